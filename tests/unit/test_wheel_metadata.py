"""The wheel's variant tag and torch pin, computed at build time from the installed torch."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "torch_fl" / "_wheel_metadata.py"
_spec = importlib.util.spec_from_file_location("wheel_metadata_under_test", _PATH)
assert _spec is not None and _spec.loader is not None
wheel_metadata = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wheel_metadata)


@pytest.mark.parametrize(
    ("torch_version", "variant"),
    [
        ("2.13.0+cpu", "cpu"),
        ("2.11.0+cu130", "cu130"),
        ("2.9.0+das.opt1.dtk2604", "dtk2604"),
        ("2.4.1+das.opt2.dtk2504", "dtk2504"),
        ("2.5.1+rocm6.2", "rocm62"),
    ],
)
def test_variant_from_torch_local_version(torch_version: str, variant: str) -> None:
    assert wheel_metadata.torch_variant(torch_version) == variant


@pytest.mark.parametrize(
    ("torch_version", "pin"),
    [("2.13.0+cpu", "torch>=2.13,<2.14"), ("2.11.0", "torch>=2.11,<2.12"), ("3.0.1+cu130", "torch>=3.0,<3.1")],
)
def test_pin_is_the_minor_line(torch_version: str, pin: str) -> None:
    assert wheel_metadata.torch_pin(torch_version) == pin


def test_metadata_uses_env_variant_and_rejects_bad_tags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wheel_metadata.metadata, "version", lambda name: "2.13.0+cpu")
    monkeypatch.setenv("TORCH_FL_VARIANT", "dtk2604")
    out = wheel_metadata.dynamic_metadata({"base-version": "0.1.0"}, {})
    assert out == {"version": "0.1.0+pt213dtk2604", "dependencies": ["torch>=2.13,<2.14"]}
    monkeypatch.setenv("TORCH_FL_VARIANT", "dtk-26.04")
    with pytest.raises(RuntimeError, match="TORCH_FL_VARIANT"):
        wheel_metadata.dynamic_metadata({"base-version": "0.1.0"}, {})


def test_metadata_explains_missing_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise wheel_metadata.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(wheel_metadata.metadata, "version", missing)
    with pytest.raises(RuntimeError, match="--no-build-isolation"):
        wheel_metadata.dynamic_metadata({"base-version": "0.1.0"}, {})


def test_the_readmes_dcp_example_names_the_extra_that_brings_numpy() -> None:
    """dcp.save needs numpy and torch does not require it: the README's DCP example asks for the extra that adds
    it. An extra, not a dependency, so the offline install checks' indexes need no numpy."""
    import tomllib

    root = _PATH.parents[1]
    extras = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert "numpy" in extras["dcp"]
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert 0 <= readme.index('pip install "torch-fl[dcp]"') < readme.index("dcp.save(")
