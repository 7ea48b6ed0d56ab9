"""Per-variant package indexes of the built wheels, and publishing them to a share.

``wheels/<variant>/`` (one toolchain: cpu, cu130, dcu) holds that variant's wheels, one per torch line and Python
(``torch_fl-0.1.0+pt213cpu-cp311-...whl``, ``+pt214cpu``, ...). ``build(dir)`` adds, beside them::

    simple/index.html            PEP 503 root page (one project: torch-fl)
    simple/torch-fl/index.html   project page: one link per wheel, ``../../<wheel>#sha256=...`` and
                                 ``data-requires-python``
    index.html                   flat find-links page (``pip install --find-links <base>/<variant>/``)

so a node installs with ``pip install torch-fl --index-url <base>/<variant>/simple`` (http(s) or file://) or
``pip install --no-index --find-links <dir> torch-fl``. A tree never mixes toolchains: every wheel's label must be
``pt<line><variant>``, else the build stops naming the file (pip would otherwise prefer another toolchain's
"higher" local version). Torch lines share a tree on purpose: each wheel requires its torch line, so pip takes the
one matching the node's torch.

The HTML comes from dumb-pypi (maintained on PyPI, Apache-2.0; depends on jinja2 and packaging only): it takes
hashes and Requires-Python from a package list, writes each page atomically and, without timestamps, writes the same
bytes for the same wheels. simple-repository-generator was the other candidate: it emits no hashes for local
directories, needs an empty output directory and pulls an HTTP client in. The tree is generated under a temporary
name and swapped in (``outputs.publish_dir``); an unchanged wheel set leaves the published tree untouched.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from email.parser import HeaderParser
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from . import context, outputs, wheelcheck

PROJECT = "torch-fl"
WHEEL_GLOB = "torch_fl-*.whl"
SIMPLE = "simple"
FLAT_PAGE = "index.html"


class IndexBuildError(ValueError):
    """A wheel directory that cannot become one variant's index; the message names the file and the fix."""


@dataclass(frozen=True)
class Dist:
    path: Path
    sha256: str
    requires_python: str | None
    requires_dist: tuple[str, ...]

    @property
    def filename(self) -> str:
        return self.path.name

    @property
    def label(self) -> str:
        return wheelcheck.local_label(self.filename)

    def package_line(self) -> str:
        """One line of dumb-pypi's ``--package-list-json``."""
        entry: dict[str, object] = {"filename": self.filename, "hash": f"sha256={self.sha256}"}
        if self.requires_python:
            entry["requires_python"] = self.requires_python
        if self.requires_dist:
            entry["requires_dist"] = list(self.requires_dist)
        return json.dumps(entry, sort_keys=True)


def read_dist(path: Path) -> Dist:
    """A wheel's hash and the metadata the index pages show (Requires-Python, Requires-Dist)."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                raise IndexBuildError(f"{path}: expected one *.dist-info/METADATA, found {names}")
            meta = HeaderParser().parsestr(zf.read(names[0]).decode("utf-8"))
    except zipfile.BadZipFile as exc:
        raise IndexBuildError(f"{path}: not a wheel ({exc}); remove it or rebuild") from None
    return Dist(
        path=path,
        sha256=context.file_sha256(path),
        requires_python=meta.get("Requires-Python"),
        requires_dist=tuple(meta.get_all("Requires-Dist") or ()),
    )


def collect(wheel_dir: Path, variant: str) -> list[Dist]:
    """The torch-fl wheels of ``wheel_dir``; each must carry ``pt<line><variant>`` (``variant`` may be "dtk*")."""
    dists = [read_dist(p) for p in sorted(wheel_dir.glob(WHEEL_GLOB))]
    if not dists:
        raise IndexBuildError(f"{wheel_dir}: no {WHEEL_GLOB} to index: run `nox -s build-<toolchain>` first")
    for d in dists:
        try:
            label = d.label
        except wheelcheck.WheelError as exc:
            raise IndexBuildError(f"{exc}: rename or delete it") from None
        if not wheelcheck.label_matches(label, variant):
            raise IndexBuildError(
                f"{d.path}: version label +{d.label or '(none)'} is not pt<torch line>{variant}: a {variant} index "
                "never holds another toolchain's wheel (move it to its own wheels/<variant>/ or delete it)"
            )
    return dists


def _render(dists: Iterable[Dist], out: Path, packages_url: str) -> Path:
    """Run dumb-pypi into ``out``; returns the directory it wrote."""
    from dumb_pypi import main as dumb_pypi

    lst = out / "packages.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    lst.write_text("".join(d.package_line() + "\n" for d in dists), encoding="utf-8")
    site = out / "site"
    rc = dumb_pypi.main(
        [
            "--package-list-json",
            str(lst),
            "--output-dir",
            str(site),
            "--packages-url",
            packages_url,
            "--title",
            "torch-fl",
            "--no-generate-timestamp",
            "--no-per-release-json",
        ]
    )
    if rc:
        raise IndexBuildError(f"dumb-pypi exited {rc} while writing {site}")
    return site


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    if root.exists():
        for f in sorted(p for p in root.rglob("*") if p.is_file()):
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class Result:
    wheel_dir: Path
    dists: tuple[Dist, ...]
    changed: bool


def build(wheel_dir: Path, variant: str) -> Result:
    """Write (or keep, when unchanged) ``simple/`` and the flat page of ``wheel_dir``; atomic and idempotent."""
    dists = collect(wheel_dir, variant)
    outputs.sweep_temporaries(wheel_dir)
    work = Path(tempfile.mkdtemp(prefix=f".index{outputs.TMP_MARK}", dir=wheel_dir))
    try:
        # project pages live two levels below the wheels: simple/torch-fl/index.html -> ../../<wheel>
        simple_site = _render(dists, work / "simple-render", "../..")
        flat_site = _render(dists, work / "flat-render", ".")
        new_simple = work / SIMPLE
        shutil.copytree(simple_site / SIMPLE, new_simple)
        flat_html = (flat_site / SIMPLE / PROJECT / "index.html").read_bytes()
        problems = check_tree(new_simple, wheel_dir, dists, relocate=wheel_dir / SIMPLE)
        if problems:
            raise IndexBuildError(f"{wheel_dir}: the generated index is wrong: " + "; ".join(problems))
        changed = tree_digest(new_simple) != tree_digest(wheel_dir / SIMPLE)
        if changed:
            tmp = outputs.temp_dir_beside(wheel_dir / SIMPLE)
            tmp.rmdir()
            new_simple.rename(tmp)
            outputs.publish_dir(tmp, wheel_dir / SIMPLE)
        flat = wheel_dir / FLAT_PAGE
        if not flat.is_file() or flat.read_bytes() != flat_html:
            outputs.atomic_write_bytes(flat, flat_html)
            changed = True
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Result(wheel_dir, tuple(dists), changed)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


def page_links(html: str) -> list[dict[str, str | None]]:
    parser = _Links()
    parser.feed(html)
    return parser.links


def check_tree(simple: Path, wheel_dir: Path, dists: Iterable[Dist], *, relocate: Path | None = None) -> list[str]:
    """Every wheel linked exactly once from the project page, each link resolving to the wheel with its sha256.

    ``relocate``: where ``simple`` will live (links are resolved from there)."""
    where = relocate or simple
    problems: list[str] = []
    root_links = [a.get("href") for a in page_links((simple / "index.html").read_text(encoding="utf-8"))]
    if not any(h and h.rstrip("/").split("/")[0] == PROJECT for h in root_links):
        problems.append(f"root page does not link {PROJECT}")
    page = simple / PROJECT / "index.html"
    base = (where / PROJECT / "index.html").as_uri()
    want = {d.filename: d for d in dists}
    seen: dict[str, int] = {}
    for a in page_links(page.read_text(encoding="utf-8")):
        href = a.get("href") or ""
        url = urlsplit(urljoin(base, href))
        target = Path(unquote(url.path))
        name = target.name
        seen[name] = seen.get(name, 0) + 1
        d = want.get(name)
        if d is None:
            problems.append(f"link to {name}, which is not a wheel of {wheel_dir}")
            continue
        if target.resolve() != d.path.resolve():
            problems.append(f"link for {name} resolves to {target}, not {d.path}")
        if url.fragment != f"sha256={d.sha256}":
            problems.append(f"link for {name} has #{url.fragment}, not its sha256")
    for name in want:
        if seen.get(name) != 1:
            problems.append(f"{name} is linked {seen.get(name, 0)} times")
    return problems


# ---------------------------------------------------------------------------------------------------- publish
def published_variants(wheels: Path, variants: dict[str, str]) -> list[tuple[str, Path]]:
    """(variant pattern, directory) of every ``wheels/<dir>`` with an index; ``variants`` maps dir -> pattern."""
    return [(v, wheels / d) for d, v in sorted(variants.items()) if (wheels / d / SIMPLE / PROJECT).is_dir()]


def publish(wheel_dir: Path, dest_root: Path) -> Path:
    """Copy one variant's wheels and index to ``dest_root/<name>/``, swapped in whole (same filesystem rename).

    A reader of the share sees the previous complete variant or the new one, never a half copy. Only the index
    and its wheels go: nothing else in the directory is published."""
    final = dest_root / wheel_dir.name
    outputs.sweep_temporaries(dest_root) if dest_root.is_dir() else dest_root.mkdir(parents=True)
    tmp = outputs.temp_dir_beside(final)
    try:
        for w in sorted(wheel_dir.glob(WHEEL_GLOB)):
            shutil.copy2(w, tmp / w.name)
        shutil.copytree(wheel_dir / SIMPLE, tmp / SIMPLE)
        shutil.copy2(wheel_dir / FLAT_PAGE, tmp / FLAT_PAGE)
        for f in tmp.rglob("*"):
            if f.is_file():
                f.chmod(0o644)
        outputs.publish_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
