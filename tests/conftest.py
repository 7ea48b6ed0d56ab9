"""Shared by every test folder. Registers the markers: their one list, so that every copy of tests/ (the test
image, a GPU node, the host session) knows them. One per device vendor of configs/toolchains.toml and one per
route provider of configs/routes.toml, and `stress` for the repetition-heavy race checks that the rows for extra torch
lines leave out; tests/unit/toolchain/test_build_matrix.py holds the list to them."""

from __future__ import annotations

MARKERS = {
    "cuda": "needs a CUDA build of torch_fl and an NVIDIA GPU",
    "dcu": "needs a DCU build of torch_fl and a Hygon DCU",
    "flaggems": "needs flag_gems importable (CUDA/DCU only)",
    "stress": "repeats a run many times to catch a race: the main row runs it, the extra torch-line rows skip it",
}


def pytest_configure(config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
