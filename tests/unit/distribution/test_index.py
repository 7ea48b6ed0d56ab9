"""Per-variant PEP 503 indexes: pages, hashes, idempotence, atomic swaps, mixing refused, publish."""

from __future__ import annotations

import hashlib
import os
import re

import pytest

from build_tools import index


def test_index_has_root_project_and_flat_pages_with_sha256_links(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    a = wheel_factory(d, "pt213cpu")
    b = wheel_factory(d, "pt214cpu")
    res = index.build(d, "cpu")
    assert res.changed and [x.filename for x in res.dists] == [a.name, b.name]
    root = (d / "simple" / "index.html").read_text()
    assert [x["href"] for x in index.page_links(root)] == ["torch-fl/index.html"]
    links = index.page_links((d / "simple" / "torch-fl" / "index.html").read_text())
    by_name = {x["href"].split("#")[0].rsplit("/", 1)[-1]: x for x in links}
    assert set(by_name) == {a.name, b.name}
    for w in (a, b):
        href = by_name[w.name]["href"]
        assert href.startswith("../../") and href.endswith("#sha256=" + hashlib.sha256(w.read_bytes()).hexdigest())
        assert by_name[w.name]["data-requires-python"] == ">=3.10"  # the parser unescapes &gt;
    flat = index.page_links((d / "index.html").read_text())
    assert sorted(x["href"].split("#")[0].lstrip("./") for x in flat) == sorted([a.name, b.name])
    assert index.check_tree(d / "simple", d, res.dists) == []


def test_second_run_changes_nothing_and_a_new_wheel_swaps_the_tree(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    wheel_factory(d, "pt213cpu")
    index.build(d, "cpu")
    page = d / "simple" / "torch-fl" / "index.html"
    before = (page.stat().st_ino, page.read_bytes())
    again = index.build(d, "cpu")
    assert not again.changed
    assert (page.stat().st_ino, page.read_bytes()) == before  # same file, untouched
    wheel_factory(d, "pt214cpu")
    third = index.build(d, "cpu")
    assert third.changed and "pt214cpu" in page.read_text()
    assert not [p for p in d.iterdir() if p.name.startswith(".")]  # no temporaries left behind


def test_a_tree_never_mixes_toolchains(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    wheel_factory(d, "pt213cpu")
    bad = wheel_factory(d, "pt211cu130")
    with pytest.raises(index.IndexBuildError, match=re.escape(bad.name) + ".*never holds another toolchain"):
        index.build(d, "cpu")
    assert not (d / "simple").exists()  # nothing half-written


def test_an_unlabelled_wheel_and_an_empty_dir_are_refused(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    d.mkdir()
    with pytest.raises(index.IndexBuildError, match="no torch_fl-"):
        index.build(d, "cpu")
    (d / "torch_fl-0.1.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(
        wheel_factory(tmp_path / "x", "pt213cpu").read_bytes()
    )
    with pytest.raises(index.IndexBuildError, match=r"\+cpu is not pt<torch line>cpu"):
        index.build(d, "cpu")


def test_dtk_family_accepts_any_dtk_release(tmp_path, wheel_factory):
    d = tmp_path / "dcu"
    wheel_factory(d, "pt210dtk2604", py="cp310")
    wheel_factory(d, "pt204dtk2504", py="cp310")
    assert len(index.build(d, "dtk*").dists) == 2


def test_check_tree_finds_a_wrong_hash(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    w = wheel_factory(d, "pt213cpu")
    res = index.build(d, "cpu")
    page = d / "simple" / "torch-fl" / "index.html"
    page.write_text(page.read_text().replace(hashlib.sha256(w.read_bytes()).hexdigest(), "0" * 64))
    assert any("not its sha256" in p for p in index.check_tree(d / "simple", d, res.dists))


def test_publish_copies_wheels_and_index_and_swaps_whole(tmp_path, wheel_factory):
    d = tmp_path / "wheels" / "cpu"
    w = wheel_factory(d, "pt213cpu")
    (d / "notes.txt").write_text("not published")
    index.build(d, "cpu")
    share = tmp_path / "share"
    out = index.publish(d, share)
    assert out == share / "cpu"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "index.html",
        "simple/index.html",
        "simple/torch-fl/index.html",
        w.name,
    ]
    res = index.collect(out, "cpu")
    assert index.check_tree(out / "simple", out, res) == []
    old_inode = os.stat(out).st_ino
    wheel_factory(d, "pt214cpu")
    index.build(d, "cpu")
    index.publish(d, share)
    assert os.stat(share / "cpu").st_ino != old_inode  # a new directory swapped in, not files overwritten
    assert len(list((share / "cpu").glob("*.whl"))) == 2
    assert not [p for p in share.iterdir() if p.name.startswith(".")]


def test_published_variants_lists_only_indexed_dirs(tmp_path, wheel_factory):
    wheels = tmp_path / "wheels"
    wheel_factory(wheels / "cpu", "pt213cpu")
    index.build(wheels / "cpu", "cpu")
    wheel_factory(wheels / "cu130", "pt211cu130")
    assert index.published_variants(wheels, {"cpu": "cpu", "cu130": "cu130"}) == [("cpu", wheels / "cpu")]
