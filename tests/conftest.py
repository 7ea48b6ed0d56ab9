"""Shared by every test folder. Registers the markers: their one list, so that every copy of tests/ (the test
image, a GPU node, the host session) knows them. One per device vendor of configs/toolchains.toml and one per
route provider of configs/routes.toml, and two that the rows for extra torch lines leave out: `stress` for the
repetition-heavy race checks, and `host_logic` for the modules of HOST_LOGIC. tests/unit/toolchain/test_build_matrix.py
holds the list to them."""

from __future__ import annotations

MARKERS = {
    "cuda": "needs a CUDA build of torch_fl and an NVIDIA GPU",
    "dcu": "needs a DCU build of torch_fl and a Hygon DCU",
    "flaggems": "needs flag_gems importable (CUDA/DCU only)",
    "stress": "repeats a run many times to catch a race: the main row runs it, the extra torch-line rows skip it",
    "host_logic": "torch-fl's own host-side logic in fresh interpreters: the main row runs it, extra lines skip it",
}

# Modules whose subject is torch-fl's host-side logic (the CLI, configuration errors, the qualification workflow):
# each test starts interpreters of its own, and none of them reaches a torch API that the routing and correctness
# modules left to the extra torch-line rows do not reach too. Those rows test API drift, so they leave these out
# (`-m "not host_logic"`); the main row runs them.
HOST_LOGIC = frozenset(
    f"routing/test_{name}.py"
    for name in ("cli", "cli_findings", "cli_route", "cli_variant", "qualify", "startup_errors")
)


def pytest_configure(config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        path = item.path.as_posix()
        if any(path.endswith("/" + module) for module in HOST_LOGIC):
            item.add_marker("host_logic")
