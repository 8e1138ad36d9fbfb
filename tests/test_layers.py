"""The package's import graph: imports flow one way (data -> components -> strategies -> runner ->
entry points), with no cycle between components and none between files, so the folder tree
stays the architecture. Every import counts, at any depth (function-local and TYPE_CHECKING
ones too): a circle of files broken only by deferring an import is still one unit in two
halves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "gnnscale"

#: layer of each top-level component folder or module of gnnscale (lower imports nothing higher)
LAYERS = {
    "errors": 0, "registry": 0, "schema": 0, "ops": 0, "lazy": 0, "keyvalues": 0, "paths": 0,
    "compose": 0, "host": 0,
    "data": 1,
    "partition": 2, "sampling": 2, "cache": 2, "deps": 2, "models": 2, "optim": 2,
    "distributed": 2, "evaluation": 2, "compare": 2, "cost": 2, "tasks": 2,
    "strategies": 3,
    "runner": 4,
    "embed": 4, "predict": 4,
    "api": 5, "native": 5,  # python -m gnnscale.native: builds and reports the extension
    "__main__": 6,  # python -m gnnscale: the package's own command line
}
#: modules that are command lines: they sit above every layer and component and may import
#: any (``__main__``: an entry point nothing imports; ``cli``: a command line's code); between
#: files none is exempt: a circle through a command line is a circle
ENTRY_POINTS = ("__main__", "cli")
#: file-level circles known to be still open, each the set of its modules; the test fails on any
#: other circle, and on a listed one that is gone (then it leaves this list); none is open
KNOWN_CIRCLES: list[set[str]] = []


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every gnnscale module ``name`` imports, at any depth of its code (functions and
    TYPE_CHECKING blocks included)."""
    out = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        out.update(t for t in targets if t.split(".")[0] == "gnnscale" and t != "gnnscale")
    return out


def component(module: str) -> str:
    """``gnnscale.strategies.split.splitter`` -> ``strategies.split``; ``gnnscale.data.x`` ->
    ``data`` (a strategy subpackage is a component of its own)."""
    parts = module.split(".")[1:]
    if parts[0] == "strategies" and len(parts) > 1 and (PKG / "strategies" / parts[1]).is_dir():
        return f"strategies.{parts[1]}"
    return parts[0]


def layer(comp: str) -> int:
    return LAYERS[comp.split(".")[0]]


def is_entry_point(module: str) -> bool:
    return module.rsplit(".", 1)[-1] in ENTRY_POINTS


def edges() -> list[tuple[str, str]]:
    known = modules()
    return [(name, target) for name, path in sorted(known.items()) if name != "gnnscale"
            for target in sorted(imports(name, path, known))]


def test_every_component_has_a_layer():
    comps = {component(m) for m in modules() if m != "gnnscale"}
    assert {c.split(".")[0] for c in comps} <= set(LAYERS), sorted(comps)


def test_no_import_from_a_lower_layer_into_a_higher_one():
    upward = [f"{a} -> {b}" for a, b in edges() if not is_entry_point(a)
              and layer(component(a)) < layer(component(b))]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_no_cycle_between_components():
    graph: dict[str, set[str]] = {}
    for a, b in edges():
        if not is_entry_point(a) and component(a) != component(b):
            graph.setdefault(component(a), set()).add(component(b))
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycle_between_files():
    graph: dict[str, set[str]] = {}
    for a, b in edges():  # every file, command lines included
        graph.setdefault(a, set()).add(b)
    circles = strongly_connected(graph)
    new = [c for c in circles if c not in KNOWN_CIRCLES]
    gone = [c for c in KNOWN_CIRCLES if c not in circles]
    assert not new, "file-level import circles:\n" + "\n".join(
        " -> ".join(find_cycle({a: graph[a] & c for a in c}) or sorted(c)) for c in new)
    assert not gone, f"opened, so drop them from KNOWN_CIRCLES: {[sorted(c) for c in gone]}"


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The circles of ``graph``: each set of nodes that all reach one another (more than one
    node, or one that imports itself), in no particular order (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                members.add(top)
                if top == node:
                    break
            if len(members) > 1 or node in graph.get(node, ()):
                out.append(members)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


@pytest.mark.parametrize(("graph", "cyclic"), [
    ({"a": {"b"}, "b": {"c"}}, False),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True),
])
def test_cycle_finder_finds_cycles(graph, cyclic):
    assert (find_cycle(graph) is not None) == cyclic


@pytest.mark.parametrize(("graph", "circles"), [
    ({"a": {"b"}, "b": {"c"}}, []),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [{"a", "b", "c"}]),
    ({"a": {"a"}, "b": {"c"}, "c": {"b", "d"}, "d": set()}, [{"a"}, {"b", "c"}]),
])
def test_circle_finder_finds_every_circle(graph, circles):
    found = strongly_connected(graph)
    assert sorted(map(sorted, found)) == sorted(map(sorted, circles))


def test_function_local_imports_are_edges(tmp_path):
    """An import inside a function (a deferred one) is an edge like one at the top."""
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from gnnscale.data import graph\n    return graph\n")
    known = {"gnnscale.data.graph": PKG / "data" / "graph.py", "gnnscale.m": mod}
    assert imports("gnnscale.m", mod, known) == {"gnnscale.data.graph"}


def test_each_strategy_is_a_subpackage_and_nothing_is_left_in_old_places():
    for name in ("data", "split", "factored", "fullgraph", "offload", "auto"):
        assert (PKG / "strategies" / name / "__init__.py").is_file(), name
    assert not (PKG / "executor").exists() and not (PKG / "offload").exists()
