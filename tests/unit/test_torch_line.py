"""torch_fl/_torch_line.py: ``import torch_fl`` refuses a torch of another line than its wheel's, with the pip line
of the torch that is installed, before the compiled core loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch_fl_launch as launch  # registered by conftest (the package without its extension)
import torch_fl_torch_line as torch_line
import torch_fl_variant as variant

ROOT = Path(__file__).resolve().parents[2]
TORCH_AT = "/venv/lib/python3.11/site-packages/torch"


@pytest.mark.parametrize(
    ("wheel", "torch_version"),
    [
        ("0.1.0+pt215cpu", "2.15.0+cpu"),
        ("0.1.0+pt215cpu", "2.15.1"),
        ("0.1.0+pt210cu130", "2.10.0a0+git1a2b3c"),
        ("0.1.0+pt209dtk2604", "2.9.0+das.opt1.dtk2604"),
    ],
)
def test_the_wheels_own_line_passes(wheel: str, torch_version: str) -> None:
    assert torch_line.refusal(wheel, torch_version, TORCH_AT, "cpu") is None


@pytest.mark.parametrize(
    ("wheel", "torch_version"),
    [
        ("0.1.0+pt215cpu", "2.16.0+cpu"),  # pip install -U torch
        ("0.1.0+pt215cpu", "2.14.1+cpu"),
        ("0.1.0+pt209cpu", "2.10.0"),  # lines compare as numbers: 2.10 is not 2.9 (nor "2.1")
        ("0.1.0+pt215cpu", "3.15.0"),
    ],
)
def test_another_line_is_refused_with_one_import_error(wheel: str, torch_version: str) -> None:
    error = torch_line.refusal(wheel, torch_version, TORCH_AT, "cpu")
    assert isinstance(error, torch_line.TorchLineError)
    assert isinstance(error, ImportError)  # what `import torch_fl` callers already catch


def test_the_message_names_both_lines_where_torch_is_and_the_fitting_pip_line() -> None:
    message = str(torch_line.refusal("0.1.0+pt215cpu", "2.16.0+cpu", TORCH_AT, "cpu"))
    assert "torch-fl 0.1.0+pt215cpu is built for torch 2.15 (variant pt215cpu)" in message
    assert f"the installed torch is 2.16.0+cpu ({TORCH_AT})" in message
    pip = 'pip install "torch==2.16.0+cpu" torch-fl --extra-index-url "$TORCH_FL_INDEX/cpu/torch-2.16/simple/"'
    assert f"\n    {pip}\n" in message  # on a line of its own, to copy
    assert pip == variant.install_line("$TORCH_FL_INDEX", "cpu", "2.16.0+cpu")  # the line `info` prints too
    assert "put torch 2.15 back" in message


def test_the_pip_line_is_of_the_nodes_toolchain_not_the_wheels() -> None:
    message = str(torch_line.refusal("0.1.0+pt211cu130", "2.12.0+cu130", TORCH_AT, "cu130"))
    assert '"torch==2.12.0+cu130"' in message
    assert '"$TORCH_FL_INDEX/cu130/torch-2.12/simple/"' in message
    dcu = str(torch_line.refusal("0.1.0+pt209dtk2604", "2.10.0+das.opt1.dtk2604", TORCH_AT, "dtk2604"))
    assert '"$TORCH_FL_INDEX/dcu/torch-2.10/simple/"' in dcu  # every DTK release shares dcu/


@pytest.mark.parametrize(
    ("wheel", "torch_version"),
    [
        (None, "2.16.0+cpu"),  # a source tree: no installed version speaks for it
        ("0.1.0", "2.16.0+cpu"),  # a local build without a variant label
        ("0+unknown", "2.16.0"),
        ("0.1.0+pt215cpu", "nightly"),  # a vendor's spelling: the loader still reports a torch it cannot use
    ],
)
def test_what_names_no_line_passes(wheel: str | None, torch_version: str) -> None:
    assert torch_line.refusal(wheel, torch_version, TORCH_AT, "cpu") is None


class _Dist:
    """What wheel_version reads of an importlib.metadata distribution."""

    def __init__(self, site: Path, version: str) -> None:
        self.site, self.version = site, version

    def locate_file(self, path: str) -> Path:
        return self.site / path


def test_the_version_is_the_installed_wheels_only_for_its_own_files(tmp_path, monkeypatch) -> None:
    site, checkout = tmp_path / "site-packages", tmp_path / "checkout"
    for d in (site / "torch_fl", checkout / "torch_fl"):
        d.mkdir(parents=True)
    monkeypatch.setattr(torch_line.metadata, "distribution", lambda name: _Dist(site, "0.1.0+pt215cpu"))
    assert torch_line.wheel_version(site / "torch_fl") == "0.1.0+pt215cpu"
    # a checkout imported in front of the installed wheel is not that wheel
    assert torch_line.wheel_version(checkout / "torch_fl") is None


def test_no_installed_wheel_means_no_version(tmp_path, monkeypatch) -> None:
    def missing(name: str):
        raise torch_line.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(torch_line.metadata, "distribution", missing)
    assert torch_line.wheel_version(tmp_path) is None


def test_check_reads_the_imported_torch(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(torch_line, "wheel_version", lambda package_dir: "0.1.0+pt215cpu")
    monkeypatch.setattr(torch_line, "installed_torch", lambda fallback: "2.16.0")  # PyPI's: no local label
    fake = SimpleNamespace(
        __version__="2.16.0", __file__=f"{TORCH_AT}/__init__.py", version=SimpleNamespace(cuda="13.0", hip=None)
    )
    message = str(torch_line.check(fake, tmp_path))  # type: ignore[arg-type]
    assert f"2.16.0 ({TORCH_AT})" in message
    assert '"torch==2.16.0" torch-fl --extra-index-url "$TORCH_FL_INDEX/cu130/torch-2.16/simple/"' in message


def test_the_package_checks_after_the_floor_and_before_loading_its_extension() -> None:
    source = (ROOT / "torch_fl" / "__init__.py").read_text(encoding="utf-8")
    order = [
        source.index("raise _too_old"),
        source.index("_torch_line.check(torch, Path(__file__).parent)"),
        source.index("raise _wrong_line"),
        source.index("from . import _core"),
    ]
    assert order == sorted(order)


# --- the whole import, in a fresh interpreter: a fake torch, torch_fl from this checkout, no extension needed
def _site(tmp_path: Path, torch_version: str, wheel: str | None, files: Path = ROOT / "torch_fl") -> Path:
    """A site directory with a fake torch of ``torch_version`` and, if ``wheel``, torch_fl installed as that
    version: its dist-info, and ``files`` (the checkout's package) linked in as the package."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(
        f"from types import SimpleNamespace\n__version__ = {torch_version!r}\n"
        "version = SimpleNamespace(cuda=None, hip=None)\n"
    )
    for name, version in (("torch", torch_version), ("torch_fl", wheel)):
        if version is None:
            continue
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    if wheel is not None:
        (site / "torch_fl").symlink_to(files, target_is_directory=True)
    return site


def _python(site: Path, *args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (path, site) if p), "PYTHONNOUSERSITE": "1"}
    return subprocess.run([sys.executable, *args], env=env, cwd=site.parent, capture_output=True, text=True)


def test_import_and_info_check_say_the_same_and_fail(tmp_path) -> None:
    site = _site(tmp_path, "2.16.0+cpu", "0.1.0+pt215cpu")
    imported = _python(site, "-c", "import torch_fl")
    assert imported.returncode == 1
    assert "torch_fl._torch_line.TorchLineError: torch-fl 0.1.0+pt215cpu is built for torch 2.15" in imported.stderr
    assert "undefined symbol" not in imported.stderr and "compiled core is missing" not in imported.stderr
    message = imported.stderr.split("TorchLineError: ", 1)[1].strip()
    info = _python(site, "-m", "torch_fl", "info", "--check")
    assert info.returncode == 1
    assert info.stderr.strip() == message  # the same message, and no traceback
    assert "Traceback" not in info.stderr


def test_a_source_checkout_is_never_refused(tmp_path) -> None:
    # an installed wheel of another line is there, but the checkout comes first on sys.path: its import goes on
    # to the compiled core, which a checkout lacks
    (tmp_path / "installed").mkdir()
    (tmp_path / "installed" / "__init__.py").write_text("")
    site = _site(tmp_path, "2.16.0+cpu", "0.1.0+pt215cpu", files=tmp_path / "installed")
    imported = _python(site, "-c", "import torch_fl", path=ROOT)
    assert imported.returncode == 1
    assert "TorchLineError" not in imported.stderr
    assert "compiled core is missing" in imported.stderr


@pytest.mark.parametrize(
    ("argv", "orig_argv", "main_file", "cli"),
    [
        (["-m"], ["python", "-m", "torch_fl", "info", "--check"], None, True),  # python -m torch_fl, importing
        (["/venv/bin/torch-fl", "info"], ["python", "/venv/bin/torch-fl", "info"], "/venv/bin/torch-fl", True),
        (["train.py"], ["python", "train.py"], "/work/train.py", False),  # a program that imports torch_fl
        (["-m"], ["python", "-m", "torch_fl_extra"], None, False),
        (["-c"], ["python", "-c", "import torch_fl"], None, False),
    ],
)
def test_the_cli_is_told_apart_from_a_program_importing_torch_fl(monkeypatch, argv, orig_argv, main_file, cli):
    """The CLI (python -m torch_fl, or the torch-fl console script) reports a wrong line as a message and exit 1;
    a program gets the TorchLineError it can catch."""
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(sys, "orig_argv", orig_argv, raising=False)
    monkeypatch.setitem(sys.modules, "__main__", SimpleNamespace(__file__=main_file))
    assert launch.launched_as_cli() is cli
