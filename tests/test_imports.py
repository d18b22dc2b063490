"""No import cycle among the product's modules, nor among its packages (docs/design.md §8): the imports of every
module of `evaluate` and `decoders`, read statically (function bodies included), form a graph without a strongly
connected component of more than one module; and the graph of the packages they make (`package_of`: `decoders`,
each subpackage of `evaluate`, each top-level module of `evaluate`) is one-way too: no package imports another that
imports it back, directly or through others.

A package's __init__ that imports its own submodules is an edge like any other (`decoders` imports
`decoders.ncut`), so a submodule that imports its package back (`from decoders import ...`) closes a cycle. The
package __init__ files Python runs before a module are not edges unless the module names them.
"""

from __future__ import annotations

import ast

from sources import REPO

from evaluate.plumbing.provenance import PACKAGES, module_file


def product_modules() -> list[str]:
    """Every module of the product packages, by dotted name (a package by its __init__)."""
    names = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def named(tree: ast.AST, package: str) -> set[str]:
    """Every dotted name the import statements of `tree` (anywhere in it) may import, from inside `package`:
    `import a.b` names a.b; `from a import b` names a and a.b (b may be a module); relative imports are resolved."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def imports_of(name: str) -> set[str]:
    """The other product modules that module `name` imports."""
    path = module_file(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {m for m in named(tree, package) if m != name and module_file(m) is not None}


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of `graph` (node -> successors), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def one_cycle(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, as a path that ends where it starts."""
    start, members = comp[0], set(comp)
    paths = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                todo.append(w)
    raise AssertionError(f"{comp} is not a cycle")


def cycles(graph: dict[str, set[str]]) -> list[str]:
    """One line per component of more than one module: its modules, then one cycle through them."""
    return [f"{', '.join(c)}: {' -> '.join(one_cycle(graph, c))}" for c in components(graph) if len(c) > 1]


def test_the_cycle_finder_names_a_cycle_and_passes_a_tree():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == ["a, b, c: a -> b -> c -> a"]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_imports_are_resolved_relative_absolute_and_inside_functions():
    tree = ast.parse("import a.b\nfrom .c import d\ndef f():\n    from .. import e\n")
    assert named(tree, "p.q") == {"a.b", "p.q.c", "p.q.c.d", "p", "p.e"}
    assert "evaluate.plumbing.paths" in imports_of("evaluate.jobs.ledger")  # inside a function
    assert {"decoders.registry", "decoders.ncut"} <= imports_of("decoders")  # a package __init__'s own submodules
    assert "evaluate" in imports_of("evaluate.ledger")  # `from evaluate import EvaluationError`


def package_of(module: str) -> str:
    """The package a module belongs to in the package graph: `decoders` for every module of decoders/,
    `evaluate.<x>` for a subpackage's modules or a top-level module of evaluate/ (`evaluate.experiment`), and
    `evaluate` for the root's __init__ (the errors)."""
    parts = module.split(".")
    return parts[0] if parts[0] != "evaluate" else ".".join(parts[:2])


def package_graph(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    """package -> the other packages its modules import, from a module graph."""
    graph: dict[str, set[str]] = {package_of(m): set() for m in modules}
    for module, imported in modules.items():
        graph[package_of(module)] |= {package_of(m) for m in imported} - {package_of(module)}
    return graph


def test_packages_are_named_by_their_first_two_dotted_parts():
    assert [package_of(m) for m in ("decoders.ncut.cut", "evaluate.readings.runner", "evaluate.experiment",
                                    "evaluate")] == ["decoders", "evaluate.readings", "evaluate.experiment", "evaluate"]
    modules = {"evaluate.a.x": {"evaluate.b.y"}, "evaluate.b.y": {"evaluate.b.z"}, "evaluate.b.z": {"evaluate.a.w"},
               "evaluate.a.w": set()}
    assert cycles(package_graph(modules)) == ["evaluate.a, evaluate.b: evaluate.a -> evaluate.b -> evaluate.a"]
    assert cycles(modules) == []  # no module cycle, yet the packages import each other


def test_no_package_of_the_product_imports_another_that_imports_it_back():
    graph = package_graph({name: imports_of(name) for name in product_modules()})
    assert len(graph) > 10
    found = cycles(graph)
    assert not found, "package import cycles (each: its packages, then one cycle):\n" + "\n".join(found)


def test_no_module_of_the_product_imports_itself_back():
    graph = {name: imports_of(name) for name in product_modules()}
    assert len(graph) > 50
    found = cycles(graph)
    assert not found, "import cycles (each: its modules, then one cycle):\n" + "\n".join(found)


def test_no_module_imports_another_modules_private_names():
    found = set()
    for name in product_modules():
        path = module_file(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PACKAGES:
                found |= {f"{name}: {alias.name} from {node.module}" for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")}
    assert not found, "private names imported across modules (make them public or move them):\n" + "\n".join(
        sorted(found))
