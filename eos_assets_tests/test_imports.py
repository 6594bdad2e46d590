"""The package has no import cycle, counting imports inside functions.

Every ``import`` and ``from ... import`` of an ``eos_assets`` module anywhere in a file (module
level or in a function body) is an edge; importing ``a.b.c`` from outside package ``a.b`` also
runs ``a.b``'s ``__init__``, so it is an edge to it too. A cycle is a strongly connected set of
more than one module.
"""

import ast
from pathlib import Path

import eos_assets

ROOT = Path(eos_assets.__file__).parent


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    found = modules()

    def module_of(name: str) -> str | None:
        while name and name not in found:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in found}
    for module, path in found.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            for name in targets:
                target = module_of(name) if name.startswith("eos_assets") else None
                if target is None or target == module:
                    continue
                edges[module].add(target)
                parts = target.split(".")
                for i in range(2, len(parts)):
                    package = ".".join(parts[:i])
                    if package in found and not module.startswith(package + "."):
                        edges[module].add(package)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_the_checker_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]
    graph = import_graph()
    assert "eos_assets.lib.spark.spark_env" in graph["eos_assets.lib.spark.spark_cds_record"]


# The embedded broker, the demo producer and its events, the manifests: tools, not the core.
DEVKIT = "eos_assets.devkit"


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or not."""
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return seen - {start}


def test_neither_the_settings_nor_the_core_import_the_devkit() -> None:
    graph = import_graph()
    settings = [m for m in reachable(graph, "eos_assets.settings") if m.startswith(DEVKIT)]
    assert settings == []
    core = [m for m in graph if m.startswith(("eos_assets.lib", "eos_assets.declaration"))]
    leaks = {m: sorted(t for t in graph[m] if t.startswith(DEVKIT)) for m in core}
    assert {m: t for m, t in leaks.items() if t} == {}
