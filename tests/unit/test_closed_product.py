"""The product is a closed floor: torch_fl/ and csrc/ import nothing of the tooling or the tests, torch_fl's modules
import each other without a circle, and only torch_fl/_core.py calls the core's operators.

Read from the source with ``ast`` (no import, no build): an import inside a function counts as much as one at the top,
since it ties the same two modules together, only later.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
TOOLING = ("build_tools", "tests", "noxfile", "docker")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, modules: set[str]) -> set[str]:
    """Every module ``path`` imports, relative imports resolved; a name taken from a package counts as the
    submodule where one of that name exists."""
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            prefix = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{prefix}.{alias.name}"
                found.add(full if full in modules else prefix)
    return found


def product_files() -> list[Path]:
    return sorted([*ROOT.joinpath("torch_fl").rglob("*.py"), *ROOT.joinpath("csrc").rglob("*.py")])


def torch_fl_graph() -> dict[str, set[str]]:
    files = sorted(ROOT.joinpath("torch_fl").rglob("*.py"))
    modules = {module_name(f) for f in files}

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for f in files:
        targets = {owner(name) for name in imported(f, modules)}
        graph[module_name(f)] = {t for t in targets if t is not None and t != module_name(f)}
    return graph


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_product_imports_nothing_of_the_tooling_or_the_tests():
    reaching = [
        f"{f.relative_to(ROOT)} imports {name}"
        for f in product_files()
        for name in imported(f, set())
        if name.split(".")[0] in TOOLING
    ]
    assert reaching == []


def test_the_product_build_names_no_tooling_file():
    cmake = [line.split("#", 1)[0] for line in ROOT.joinpath("CMakeLists.txt").read_text().splitlines()]
    assert [line.strip() for line in cmake if any(f"{t}/" in line for t in TOOLING)] == []
    project = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text())
    providers = [entry["provider"]["path"] for entry in project["tool"]["dynamic-metadata"]]
    assert providers and all(path.split("/")[0] not in TOOLING for path in providers)


def test_torch_fl_imports_in_no_circle():
    graph = torch_fl_graph()
    assert "torch_fl.routing.routes" in graph and "torch_fl.compile" in graph  # the graph was read
    assert circle(graph) is None, " -> ".join(circle(graph) or [])


def test_the_circle_finder_finds_one():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) is None


def test_only_the_core_facade_calls_the_core_operators():
    calling = []
    for f in sorted(ROOT.joinpath("torch_fl").rglob("*.py")):
        if f.name == "_core.py" and f.parent.name == "torch_fl":
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "flagos":
                value = node.value
                if isinstance(value, ast.Attribute) and value.attr == "ops":
                    calling.append(f"{f.relative_to(ROOT)}:{node.lineno}")
    assert calling == []
