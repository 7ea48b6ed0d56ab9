"""The host's CPythons that the images take for the Pythons no Debian ships."""

from __future__ import annotations

import pytest

from build_tools import hostpython


def test_an_installation_is_staged_without_its_tests_packages_or_bytecode_and_links_as_their_files(tmp_path):
    prefix = tmp_path / "3.12.1"
    for rel in (
        "bin/python3.12",
        "include/python3.12/Python.h",
        "lib/python3.12/os.py",
        "lib/libpython3.12.so.1.0",
        "lib/python3.12/test/test_os.py",
        "lib/python3.12/site-packages/hook.pth",
        "lib/python3.12/__pycache__/os.cpython-312.pyc",
    ):
        (prefix / rel).parent.mkdir(parents=True, exist_ok=True)
        (prefix / rel).write_text(rel)
    (prefix / "bin" / "python3").symlink_to("python3.12")
    (prefix / "bin" / "gone").symlink_to("nothing-there")
    staged = {rel.as_posix(): src for src, rel in hostpython.files(prefix)}
    assert sorted(staged) == [
        "bin/python3",
        "bin/python3.12",
        "include/python3.12/Python.h",
        "lib/libpython3.12.so.1.0",
        "lib/python3.12/os.py",
    ]
    assert staged["bin/python3"] == (prefix / "bin" / "python3.12").resolve()  # a plain file in the context


def test_a_python_the_host_lacks_is_named_with_the_way_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    with pytest.raises(hostpython.HostPythonError, match=r"CPython 3\.99 .*pyenv install 3\.99"):
        hostpython.find("3.99")


def test_an_installation_without_headers_is_found_since_no_image_compiles_against_it(monkeypatch, tmp_path):
    prefix = tmp_path / "versions" / "3.98.1"
    (prefix / "lib" / "python3.98").mkdir(parents=True)
    (prefix / "lib" / "python3.98" / "os.py").write_text("")
    exe = prefix / "bin" / "python3.98"
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\necho {prefix}\n")  # answers sys.base_prefix as the interpreter would
    exe.chmod(0o755)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    assert hostpython.find("3.98") == prefix
    (prefix / "lib" / "python3.98" / "os.py").unlink()  # no standard library: nothing an image could run
    with pytest.raises(hostpython.HostPythonError, match="with its standard library"):
        hostpython.find("3.98")
