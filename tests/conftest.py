"""Shared by every test folder. Registers the vendor markers, so that a copy of tests/ run
outside the source tree (against an installed wheel, without pyproject.toml) knows them too."""

from __future__ import annotations

MARKERS = {
    "cuda": "needs a CUDA build of torch_fl and an NVIDIA GPU",
    "dcu": "needs a DCU build of torch_fl and a Hygon DCU",
    "flaggems": "needs flag_gems importable (CUDA/DCU only)",
}


def pytest_configure(config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
