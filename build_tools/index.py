"""Package indexes of the built wheels, one per (variant, torch line), and publishing them to a share.

``wheels/<variant>/`` holds a variant's wheels, one per torch line (``torch_fl-0.1.0+pt213cpu-cp310-abi3-...``), each
tagged for every CPython its row serves.
``build(dir)`` writes beside them, for each torch line that has wheels::

    torch-2.13/simple/index.html            PEP 503 root page (one project: torch-fl)
    torch-2.13/simple/torch-fl/index.html   project page: ``../../../<wheel>#sha256=...`` per wheel of the line
    torch-2.13/index.html                   flat find-links page (``../<wheel>#sha256=...``)

A page offers only its line's one wheel (one per build label: DTK releases share a line), and no variant-wide page
is written: docs/cluster.md says why. The relative
links resolve the same under http, file:// and in a published copy. dumb-pypi writes the HTML (with hashes and
Requires-Python, the same bytes for the same wheels); each line's tree is swapped in whole (``outputs.publish_dir``).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from email.parser import HeaderParser
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from . import context, outputs, wheelcheck
from .product import variants

PROJECT = "torch-fl"
WHEEL_GLOB = "torch_fl-*.whl"
SIMPLE = "simple"
FLAT_PAGE = "index.html"
LINE_GLOB = "torch-*"

Line = tuple[int, int]


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

    @property
    def line(self) -> Line:
        """The torch line of the wheel's label (``pt213cpu`` -> (2, 13)); collect() checks the requirement agrees."""
        return wheel_line(self.label)

    def package_line(self) -> str:
        """One line of dumb-pypi's ``--package-list-json``."""
        entry: dict[str, object] = {"filename": self.filename, "hash": f"sha256={self.sha256}"}
        if self.requires_python:
            entry["requires_python"] = self.requires_python
        if self.requires_dist:
            entry["requires_dist"] = list(self.requires_dist)
        return json.dumps(entry, sort_keys=True)


def wheel_line(label: str) -> Line:
    """``pt213cpu`` -> (2, 13); a label without a torch line is an IndexBuildError."""
    m = re.match(r"^pt(\d)(\d\d)", label)
    if not m:
        raise IndexBuildError(f"local version +{label or '(none)'} does not start with pt<major><minor:02>")
    return int(m.group(1)), int(m.group(2))


# the torch lines a requirement is tested against: every line a pt<major><minor:02> label can name for torch 1-3
_PROBE_LINES = [(major, minor) for major in (1, 2, 3) for minor in range(100)]


def required_lines(requires_dist: Iterable[str]) -> list[Line] | None:
    """The torch lines a wheel's torch requirement admits (None: it names no torch, or any); a line is admitted
    when its first release is."""
    for text in requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.name.lower() != "torch" or not str(req.specifier):
            continue
        return [ln for ln in _PROBE_LINES if req.specifier.contains(Version(f"{ln[0]}.{ln[1]}.0"), prereleases=True)]
    return None


def line_dir(wheel_dir: Path, line: Line) -> Path:
    """Where the pages of one torch line live: ``wheels/cpu/torch-2.13``."""
    return wheel_dir / variants.line_page(line)


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
    """The torch-fl wheels of ``wheel_dir``; each must carry ``pt<line><variant>`` (``variant`` may be "dtk*"),
    require exactly that torch line and be tagged ``cp3X-abi3``, the one wheel of its build for every Python."""
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
        if not wheelcheck.is_abi3(d.filename):
            raise IndexBuildError(
                f"{d.path}: tagged {wheelcheck.interpreter_tag(d.filename)}, a wheel of one CPython: a line's page "
                "offers one cp3X-abi3 wheel for every Python, and pip would prefer this one where it fits; delete "
                "it, or rebuild its row (`nox -s build-<row>` replaces the row's last wheels)"
            )
        admitted = required_lines(d.requires_dist)
        if admitted is not None and admitted != [d.line]:
            raise IndexBuildError(
                f"{d.path}: label +{label} is for torch {d.line[0]}.{d.line[1]} but the wheel requires "
                f"{', '.join(r for r in d.requires_dist if r.lower().startswith('torch'))}: the page of its line "
                "would offer a wheel that changes torch; rebuild it against that torch line or delete it"
            )
    seen: dict[str, Dist] = {}
    for d in dists:
        if (first := seen.setdefault(d.label, d)) is not d:
            raise IndexBuildError(
                f"{wheel_dir}: {first.filename} and {d.filename} are both +{d.label}: the page of torch "
                f"{d.line[0]}.{d.line[1]} offers one wheel of a build; delete the one that build/state/<row>.json "
                "does not name"
            )
    return dists


def by_line(dists: Iterable[Dist]) -> dict[Line, list[Dist]]:
    out: dict[Line, list[Dist]] = {}
    for d in dists:
        out.setdefault(d.line, []).append(d)
    return dict(sorted(out.items()))


def _render(dists: Iterable[Dist], out: Path, packages_url: str) -> Path:
    """Run dumb-pypi into ``out``; returns the directory it wrote."""
    from dumb_pypi import main as dumb_pypi

    lst, site = out / "packages.jsonl", out / "site"
    out.mkdir(parents=True, exist_ok=True)
    lst.write_text("".join(d.package_line() + "\n" for d in dists), encoding="utf-8")
    args = [
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
    if rc := dumb_pypi.main(args):
        raise IndexBuildError(f"dumb-pypi exited {rc} while writing {site}")
    return site


@dataclass(frozen=True)
class Result:
    wheel_dir: Path
    dists: tuple[Dist, ...]
    changed: bool

    @property
    def pages(self) -> dict[Line, Path]:
        """Each torch line's page directory (``torch-2.13/``: ``simple/`` and the flat ``index.html``)."""
        return {line: line_dir(self.wheel_dir, line) for line in by_line(self.dists)}


def _render_line(dists: list[Dist], work: Path, final: Path) -> Path:
    """One line's page tree, in ``work``, checked as if it already lived at ``final``."""
    # project pages live three levels below the wheels: torch-2.13/simple/torch-fl/index.html -> ../../../<wheel>
    simple_site = _render(dists, work / "simple-render", "../../..")
    flat_site = _render(dists, work / "flat-render", "..")
    tree = work / "tree"
    shutil.copytree(simple_site / SIMPLE, tree / SIMPLE)
    shutil.copy2(flat_site / SIMPLE / PROJECT / "index.html", tree / FLAT_PAGE)
    if problems := check_line(tree, final.parent, dists, relocate=final):
        raise IndexBuildError(f"{final}: the generated index is wrong: " + "; ".join(problems))
    return tree


def _remove(path: Path) -> bool:
    if path.is_dir():
        shutil.rmtree(path)
        return True
    if path.exists():
        path.unlink()
        return True
    return False


def build(wheel_dir: Path, variant: str) -> Result:
    """Write (or keep, when unchanged) each torch line's pages in ``wheel_dir``, atomically per line; remove the
    pages of lines without wheels and any variant-wide page, which would offer a node another line's wheel."""
    dists = collect(wheel_dir, variant)
    outputs.sweep_temporaries(wheel_dir)
    lines = by_line(dists)
    work = Path(tempfile.mkdtemp(prefix=f".index{outputs.TMP_MARK}", dir=wheel_dir))
    changed = False
    try:
        trees = {
            line: _render_line(ds, work / variants.line_page(line), line_dir(wheel_dir, line))
            for line, ds in lines.items()
        }
        for line, tree in trees.items():
            final = line_dir(wheel_dir, line)
            if context.tree_digest(tree) == context.tree_digest(final):
                continue
            outputs.publish_dir(tree, final)
            changed = True
    finally:
        shutil.rmtree(work, ignore_errors=True)
    keep = {line_dir(wheel_dir, line).name for line in lines}
    for stale in sorted(wheel_dir.glob(LINE_GLOB)):
        if stale.is_dir() and stale.name not in keep:
            changed |= _remove(stale)
    changed |= _remove(wheel_dir / SIMPLE) | _remove(wheel_dir / FLAT_PAGE)
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


def _check_links(page: Path, base: str, wheel_dir: Path, dists: Iterable[Dist], what: str) -> list[str]:
    """Every wheel of ``dists`` linked exactly once from ``page`` (read at URL ``base``), resolving to the wheel
    with its sha256, and nothing else linked."""
    problems: list[str] = []
    want = {d.filename: d for d in dists}
    seen: Counter[str] = Counter()
    for a in page_links(page.read_text(encoding="utf-8")):
        url = urlsplit(urljoin(base, a.get("href") or ""))
        target = Path(unquote(url.path))
        name = target.name
        seen[name] += 1
        d = want.get(name)
        if d is None:
            problems.append(f"{what} links {name}, which is not a wheel of this line in {wheel_dir}")
            continue
        if target.resolve() != d.path.resolve():
            problems.append(f"{what} link for {name} resolves to {target}, not {d.path}")
        if url.fragment != f"sha256={d.sha256}":
            problems.append(f"{what} link for {name} has #{url.fragment}, not its sha256")
    return problems + [f"{what}: {name} is linked {seen[name]} times" for name in want if seen[name] != 1]


def check_line(page_dir: Path, wheel_dir: Path, dists: Iterable[Dist], *, relocate: Path | None = None) -> list[str]:
    """One torch line's pages list exactly ``dists``: ``simple/`` (whose root links torch-fl) and the flat page.
    ``relocate``: where ``page_dir`` will live (links are resolved from there)."""
    dists = list(dists)
    where = relocate or page_dir
    simple, project, flat = page_dir / SIMPLE, f"{SIMPLE}/{PROJECT}/index.html", page_dir / FLAT_PAGE
    problems: list[str] = []
    if not (page_dir / project).is_file():
        problems.append(f"{simple} has no {PROJECT}/index.html")
    else:
        root_links = [a.get("href") for a in page_links((simple / "index.html").read_text(encoding="utf-8"))]
        if not any(h and h.rstrip("/").split("/")[0] == PROJECT for h in root_links):
            problems.append(f"root page does not link {PROJECT}")
        problems += _check_links(page_dir / project, (where / project).as_uri(), wheel_dir, dists, "project page")
    if not flat.is_file():
        return [*problems, f"{page_dir} has no flat page {FLAT_PAGE}"]
    return problems + _check_links(flat, (where / FLAT_PAGE).as_uri(), wheel_dir, dists, "flat page")


def check_index(wheel_dir: Path, dists: Iterable[Dist]) -> list[str]:
    """The whole variant: every line's pages current, no page of a line without wheels, no variant-wide page."""
    lines = by_line(dists)
    problems = [p for line, ds in lines.items() for p in check_line(line_dir(wheel_dir, line), wheel_dir, ds)]
    keep = {line_dir(wheel_dir, line).name for line in lines}
    problems += [
        f"{p} offers a torch line with no wheel" for p in sorted(wheel_dir.glob(LINE_GLOB)) if p.name not in keep
    ]
    problems += [f"{wheel_dir / n} is a variant-wide page" for n in (SIMPLE, FLAT_PAGE) if (wheel_dir / n).exists()]
    return problems


# ---------------------------------------------------------------------------------------------------- publish
def indexed_lines(wheel_dir: Path) -> list[Path]:
    """The torch line page directories of ``wheel_dir`` that hold a project page."""
    return sorted(p for p in wheel_dir.glob(LINE_GLOB) if (p / SIMPLE / PROJECT / "index.html").is_file())


def published_variants(wheels: Path, variants: dict[str, str]) -> list[tuple[str, Path]]:
    """(variant pattern, directory) of every ``wheels/<dir>`` with an index; ``variants`` maps dir -> pattern."""
    return [(v, wheels / d) for d, v in sorted(variants.items()) if indexed_lines(wheels / d)]


def publish(wheel_dir: Path, dest_root: Path) -> Path:
    """Copy one variant's wheels and its line pages to ``dest_root/<name>/``, swapped in whole: a reader of the share
    sees the previous complete variant or the new one. Nothing else in the directory is published."""
    final = dest_root / wheel_dir.name
    outputs.sweep_temporaries(dest_root)  # temp_dir_beside makes dest_root where it is missing
    tmp = outputs.temp_dir_beside(final)
    try:
        for w in sorted(wheel_dir.glob(WHEEL_GLOB)):
            shutil.copy2(w, tmp / w.name)
        for page in indexed_lines(wheel_dir):
            shutil.copytree(page, tmp / page.name)
        for f in tmp.rglob("*"):
            if f.is_file():
                f.chmod(0o644)
        outputs.publish_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
