"""A package's import graph read from its source with ``ast``: every import statement at any
depth (``TYPE_CHECKING`` blocks and function-local imports included), resolved to the
package's own modules. Nothing is imported to read it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


def modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under the package folder ``root`` (a package is
    named by its ``__init__``: ``accmt_trainer.fit``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports. ``from .x import y`` is an arrow to
    ``x`` (and to ``x.y`` where that is a module), ``from . import x`` to the submodule ``x``
    only where ``x`` is one; importing a package runs its ``__init__``, so an arrow to a package
    is an arrow to its ``__init__``."""
    known = modules(root)
    graph = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        arrows = set()
        for target in _targets(ast.parse(path.read_text(encoding="utf-8")), package):
            while target and target not in known:  # an attribute of a module: its module
                target = target.rpartition(".")[0]
            if target:
                arrows.add(target)
        graph[name] = arrows - {name}
    return graph


def _targets(tree: ast.AST, package: str) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            submodules = [f"{base}.{alias.name}" for alias in node.names]
            if node.module is None:
                yield from submodules  # `from . import x`: x itself
            else:
                yield base
                yield from submodules  # kept only where they are modules


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another round a circle (Tarjan's strongly
    connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
