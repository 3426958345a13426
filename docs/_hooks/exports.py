"""MkDocs hook: the tables of names the meta-package exports, made from ``__all__``.

``docs/api/accmt.md`` holds ``<!-- exports -->`` and ``<!-- 1.x modules -->``; each becomes a
table whose rows list, per source package or per accmt 1.x module, every name with a link to
its documentation. Written from the code, the tables cannot fall behind it.
"""

from __future__ import annotations

import importlib
from typing import Any

_LEGACY = [
    "states",
    "callbacks",
    "decorators",
    "metrics",
    "hyperparameters",
    "monitor",
    "modules",
    "trainer",
    "curriculum",
    "utils",
    "evaluator",
]


def _link(module: str, name: str) -> str:
    return f"[`{name}`][{module}.{name}]" if module else f"`{name}`"


def _sources(names: list[str], owner: Any) -> dict[str, list[str]]:
    """Names grouped by the public path that documents them: the accmt_* package that defines
    them, or the accmt module itself for what the meta-package defines (accmt 1.x's shapes)."""
    grouped: dict[str, list[str]] = {}
    for name in names:
        value = getattr(owner, name)
        home = getattr(value, "__module__", None) or ""
        package = home.split(".")[0]
        if package == "accmt":
            # accmt's own (accmt 1.x's shapes): documented at the top when exported there.
            top = importlib.import_module("accmt")
            package = "accmt" if getattr(top, name, None) is value else owner.__name__
        elif not package.startswith("accmt_"):
            # Re-exported from another library: named, not linked (no page documents it).
            package = _package_exporting(name) or ""
        grouped.setdefault(package, []).append(name)
    return grouped


def _package_cell(package: str) -> str:
    # accmt itself is this page; its name alone would be an ambiguous cross-reference.
    return "`accmt`" if package == "accmt" else f"[`{package}`][{package}]"


def _package_exporting(name: str) -> str | None:
    for package in (
        "accmt_trainer",
        "accmt_state",
        "accmt_callbacks",
        "accmt_metrics",
        "accmt_decorators",
        "accmt_collators",
        "accmt_search",
    ):
        try:
            if name in importlib.import_module(package).__all__:
                return package
        except ImportError:
            continue
    return None


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if page.file.src_path != "api/accmt.md":
        return markdown
    accmt = importlib.import_module("accmt")
    names = [name for name in accmt.__all__ if name != "__version__"]
    by_package = _sources(names, accmt)
    exports = ["| from | names |", "| --- | --- |"] + [
        f"| {_package_cell(package)} | "
        + ", ".join(_link(package, name) for name in sorted(found))
        + " |"
        for package, found in by_package.items()
    ]
    legacy = ["| module | names |", "| --- | --- |"]
    for module in _LEGACY:
        loaded = importlib.import_module(f"accmt.{module}")
        public = [n for n in getattr(loaded, "__all__", []) if not n.startswith("_")]
        grouped = _sources(public, loaded)
        links = ", ".join(_link(src, n) for src, ns in grouped.items() for n in sorted(ns))
        legacy.append(f"| `accmt.{module}` | {links} |")
    return markdown.replace("<!-- exports -->", "\n".join(exports)).replace(
        "<!-- 1.x modules -->", "\n".join(legacy)
    )
