"""Adding a vendor is adding a row to configs/toolchains.toml (and its docker directory of requirement files, beside
the Debian rows' Dockerfile or a Dockerfile of its own): no Python changes.

A throw-away vendor in a copy of the repository gets its sessions, its plan and its dry run.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from buildtest_support import REPO

ACME = """
[toolchains.acme]
summary = "a throw-away vendor: the cpu toolchain under another name"
dockerfile = "docker/Dockerfile"
docker_dir = "docker/acme"
builder_image = "debian:bookworm-slim"
test_image = "debian:bookworm-slim"
python = "3.11"
variant = "acme"
torch.requirement = "torch==2.13.0+cpu"
auditwheel.exclude = ["libc10*.so*", "libtorch*.so*"]
test_env = { FLAGOS_ACCELERATOR = "cpu" }
pytest_markers = ""
accelerator = "cpu"
"""


@pytest.fixture(scope="module")
def acme_repo(tmp_path_factory) -> Path:
    import nox  # noqa: F401  (the nox tests session installs it; a missing nox must fail, not skip)

    repo = tmp_path_factory.mktemp("acme") / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info")
    for entry in ("build_tools", "configs", "csrc", "docker", "torch_fl", "tests"):
        shutil.copytree(REPO / entry, repo / entry, ignore=ignore)
    for entry in ("noxfile.py", "pyproject.toml", "CMakeLists.txt"):
        shutil.copy(REPO / entry, repo / entry)
    shutil.copytree(REPO / "docker" / "cpu", repo / "docker" / "acme")
    with (repo / "configs" / "toolchains.toml").open("a", encoding="utf-8") as f:
        f.write(ACME)
    return repo


def nox(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(repo / "noxfile.py"), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=repo,
        timeout=300,
    )


def test_a_new_row_gets_its_sessions(acme_repo):
    res = nox(acme_repo, "-l")
    assert res.returncode == 0, res.stderr
    listed = {line.split()[1] for line in res.stdout.splitlines() if line[:2] in ("- ", "* ")}
    assert {"build-acme", "test-acme", "bench-acme", "install-acme"} <= listed


def test_a_new_row_gets_its_plan_and_dry_run(acme_repo):
    res = nox(acme_repo, "-s", "test-acme", "--", "--dry-run")
    assert res.returncode == 0, res.stdout + res.stderr
    # the new row has no locks yet: the dry run plans on, and says what a real run would stop on
    said = res.stdout + res.stderr
    assert "a real run would stop here" in said and "docker/acme/locks/acme-builder-py311.txt is missing" in said
    lines = [line for line in res.stdout.splitlines() if not line.startswith("nox >")]
    printed = [shlex.split(line) for line in lines if "docker build " in line or "docker run " in line]
    commands = [argv[i + 1 :] for argv in printed for i, a in enumerate(argv[:2]) if Path(a).name == "docker"]
    builds = [argv for argv in commands if argv[0] == "build"]
    runs = [argv for argv in commands if argv[0] == "run"]
    # the test image's dependency layers build alongside the wheel (printed first in a dry run)
    assert [argv[argv.index("--target") + 1] for argv in builds] == ["test-deps", "build", "wheel", "test"]
    builds = builds[1:]
    for argv in builds:
        assert argv[argv.index("-f") + 1] == str(acme_repo / "docker" / "Dockerfile")
        assert "VARIANT=acme" in argv
    export = builds[1][builds[1].index("--output") + 1]
    assert export.startswith(f"type=local,dest={acme_repo / 'wheels' / '.acme.tmp-'}")
    assert len(runs) == 1 and any(a.startswith("torch-fl/acme-test:") for a in runs[0])
