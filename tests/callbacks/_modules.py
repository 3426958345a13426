"""Checks of a package's modules, shared by tests/callbacks and tests/search: the import graph
(no circle, TYPE_CHECKING and function-local imports included) and where exceptions live."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path


def import_graph(folder: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, from every import statement at any depth.

    ``from . import x`` is an edge to the submodule x only (to ``__init__`` when x is a name
    it defines); ``from .x import y`` and ``import package.x`` are edges to x.
    """
    package = folder.name
    names = {path.stem for path in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name in sorted(names):
        edges: set[str] = set()
        for node in ast.walk(ast.parse((folder / f"{name}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level == 0 and node.module is not None:
                    parts = node.module.split(".")
                    if parts[0] != package:
                        continue
                    parts = parts[1:]
                elif node.level == 1:
                    parts = node.module.split(".") if node.module else []
                else:
                    continue
                if parts:
                    edges.add(parts[0] if parts[0] in names else "__init__")
                else:
                    edges |= {a.name if a.name in names else "__init__" for a in node.names}
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == package:
                        edges.add(parts[1] if parts[1:] and parts[1] in names else "__init__")
        graph[name] = edges - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
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


def exceptions_outside_errors(package: str) -> list[str]:
    """Every exception class that a module of ``package`` other than ``_errors`` defines."""
    root = importlib.import_module(package)
    found = []
    for info in pkgutil.iter_modules(root.__path__, f"{package}."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and info.name != f"{package}._errors"
            ):
                found.append(f"{info.name}.{name}")
    return found
