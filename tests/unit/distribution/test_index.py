"""Per-variant PEP 503 indexes: pages, hashes, idempotence, atomic swaps, mixing refused, publish."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

from build_tools import index


def _hrefs(page):
    return [x["href"] for x in index.page_links(page.read_text())]


def test_each_torch_line_has_its_own_pages_with_sha256_links_to_the_wheels(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    a = wheel_factory(d, "pt213cpu")
    b = wheel_factory(d, "pt215cpu", py="cp311")  # torch 2.15 ships no CPython 3.10
    res = index.build(d, "cpu")
    assert res.changed and [x.filename for x in res.dists] == [a.name, b.name]
    assert res.pages == {(2, 13): d / "torch-2.13", (2, 15): d / "torch-2.15"}
    for line, wheels in (("torch-2.13", [a]), ("torch-2.15", [b])):
        assert _hrefs(d / line / "simple" / "index.html") == ["torch-fl/index.html"]
        links = index.page_links((d / line / "simple" / "torch-fl" / "index.html").read_text())
        by_name = {x["href"].split("#")[0].rsplit("/", 1)[-1]: x for x in links}
        assert set(by_name) == {w.name for w in wheels}  # only this line's wheels
        for w in wheels:
            href = by_name[w.name]["href"]
            assert href == f"../../../{w.name}#sha256=" + hashlib.sha256(w.read_bytes()).hexdigest()
            assert by_name[w.name]["data-requires-python"] == ">=3.10"  # the parser unescapes &gt;
        flat = _hrefs(d / line / "index.html")
        assert sorted(h.split("#")[0] for h in flat) == sorted(f"../{w.name}" for w in wheels)
    assert index.check_index(d, res.dists) == []


def test_relative_links_resolve_to_the_wheel_file_from_every_page(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    w = wheel_factory(d, "pt213cpu")
    index.build(d, "cpu")
    for page in (d / "torch-2.13" / "simple" / "torch-fl" / "index.html", d / "torch-2.13" / "index.html"):
        (href,) = _hrefs(page)
        target = Path(unquote(urlsplit(urljoin(page.as_uri(), href)).path))
        assert target.resolve() == w.resolve() and target.read_bytes() == w.read_bytes()
        # and as an HTTP server rooted at the variant serves it
        url = urljoin("http://127.0.0.1:8000/" + page.relative_to(d).as_posix(), href)
        assert urlsplit(url).path == f"/{w.name}"


def test_no_variant_wide_page_is_written_and_an_old_one_is_removed(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    wheel_factory(d, "pt213cpu")
    wheel_factory(d, "pt214cpu")
    (d / "simple" / "torch-fl").mkdir(parents=True)  # the variant-wide layout: every line on one page
    (d / "simple" / "torch-fl" / "index.html").write_text("<a href='../../x.whl'>x</a>")
    (d / "index.html").write_text("<a href='x.whl'>x</a>")
    res = index.build(d, "cpu")
    assert res.changed and not (d / "simple").exists() and not (d / "index.html").exists()
    assert sorted(p.name for p in d.iterdir() if p.is_dir()) == ["torch-2.13", "torch-2.14"]
    (d / "simple").mkdir()
    assert any("variant-wide" in p for p in index.check_index(d, res.dists))


def test_a_line_whose_wheels_are_gone_loses_its_page(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    wheel_factory(d, "pt213cpu")
    old = wheel_factory(d, "pt214cpu")
    index.build(d, "cpu")
    old.unlink()
    res = index.build(d, "cpu")
    assert res.changed and not (d / "torch-2.14").exists() and list(res.pages) == [(2, 13)]


def test_a_wheel_whose_requirement_is_not_its_label_line_is_refused_by_name(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    wheel_factory(d, "pt213cpu")
    bad = wheel_factory(d, "pt214cpu", pin="torch>=2.13,<2.15")
    with pytest.raises(index.IndexBuildError, match=re.escape(bad.name) + ".*torch 2.14 but the wheel requires"):
        index.build(d, "cpu")
    assert not list(d.glob("torch-*"))  # nothing half-written


@pytest.mark.parametrize(
    ("reqs", "lines"),
    [
        (["torch>=2.13,<2.14"], [(2, 13)]),
        (["torch<2.10,>=2.9"], [(2, 9)]),
        (["numpy", "torch>=2.13,<2.15"], [(2, 13), (2, 14)]),
        (["torch"], None),
        ([], None),
    ],
)
def test_required_lines(reqs, lines):
    assert index.required_lines(reqs) == lines


def test_a_tree_never_mixes_toolchains(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    wheel_factory(d, "pt213cpu")
    bad = wheel_factory(d, "pt211cu130")
    with pytest.raises(index.IndexBuildError, match=re.escape(bad.name) + ".*never holds another toolchain"):
        index.build(d, "cpu")
    assert not list(d.glob("torch-*")) and not (d / "simple").exists()  # nothing half-written


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


def test_a_wheel_of_one_cpython_beside_the_lines_abi3_wheel_is_refused(tmp_path, wheel_factory):
    """pip prefers a cp311-cp311 wheel over cp310-abi3 on 3.11: a page holding both would serve 3.11 the stale one."""
    d = tmp_path / "cpu"
    wheel_factory(d, "pt213cpu")
    stale = wheel_factory(d, "pt213cpu", py="cp311", abi="cp311")
    with pytest.raises(index.IndexBuildError, match=re.escape(stale.name) + ": tagged cp311-cp311, a wheel of one"):
        index.build(d, "cpu")
    assert not list(d.glob("torch-*"))


def test_two_wheels_of_one_build_on_a_line_are_refused(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    first = wheel_factory(d, "pt213cpu")
    second = wheel_factory(d, "pt213cpu", py="cp311")
    message = f"{re.escape(first.name)} and {re.escape(second.name)} are both \\+pt213cpu"
    with pytest.raises(index.IndexBuildError, match=message):
        index.build(d, "cpu")
    second.unlink()
    assert [x.filename for x in index.build(d, "cpu").dists] == [first.name]


def test_dtk_family_accepts_any_dtk_release(tmp_path, wheel_factory):
    d = tmp_path / "dcu"
    wheel_factory(d, "pt210dtk2604", py="cp310")
    wheel_factory(d, "pt204dtk2504", py="cp310")
    assert len(index.build(d, "dtk*").dists) == 2


def test_check_tree_finds_a_wrong_hash(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    w = wheel_factory(d, "pt213cpu")
    res = index.build(d, "cpu")
    page = d / "torch-2.13" / "simple" / "torch-fl" / "index.html"
    page.write_text(page.read_text().replace(hashlib.sha256(w.read_bytes()).hexdigest(), "0" * 64))
    assert any("not its sha256" in p for p in index.check_index(d, res.dists))


def test_publish_copies_wheels_and_index_and_swaps_whole(tmp_path, wheel_factory):
    d = tmp_path / "wheels" / "cpu"
    w = wheel_factory(d, "pt213cpu")
    (d / "notes.txt").write_text("not published")
    index.build(d, "cpu")
    share = tmp_path / "share"
    out = index.publish(d, share)
    assert out == share / "cpu"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "torch-2.13/index.html",
        "torch-2.13/simple/index.html",
        "torch-2.13/simple/torch-fl/index.html",
        w.name,
    ]
    res = index.collect(out, "cpu")
    assert index.check_index(out, res) == []  # the relative links resolve in the copy
    old_inode = os.stat(out).st_ino
    wheel_factory(d, "pt214cpu")
    index.build(d, "cpu")
    index.publish(d, share)
    assert os.stat(share / "cpu").st_ino != old_inode  # a new directory swapped in, not files overwritten
    assert len(list((share / "cpu").glob("*.whl"))) == 2
    assert index.check_index(share / "cpu", index.collect(share / "cpu", "cpu")) == []
    assert not [p for p in share.iterdir() if p.name.startswith(".")]


def test_published_variants_lists_only_indexed_dirs(tmp_path, wheel_factory):
    wheels = tmp_path / "wheels"
    wheel_factory(wheels / "cpu", "pt213cpu")
    index.build(wheels / "cpu", "cpu")
    wheel_factory(wheels / "cu130", "pt211cu130")
    assert index.published_variants(wheels, {"cpu": "cpu", "cu130": "cu130"}) == [("cpu", wheels / "cpu")]
