"""accmt_callbacks's modules import one another one way only; its exceptions are in _errors."""

from __future__ import annotations

from pathlib import Path

import accmt_callbacks

from ._modules import circles, exceptions_outside_errors, import_graph

FOLDER = Path(accmt_callbacks.__file__).parent


def test_no_import_circle() -> None:
    assert circles(import_graph(FOLDER)) == []


def test_every_exception_class_is_in_errors() -> None:
    assert exceptions_outside_errors("accmt_callbacks") == []


def test_the_check_sees_a_circle_at_any_depth(tmp_path: Path) -> None:
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("from ._a import A\n")
    (folder / "_a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import _b\n"
    )
    (folder / "_b.py").write_text("def f():\n    import pkg._c\n")
    (folder / "_c.py").write_text("from ._a import A\n")
    (folder / "_d.py").write_text("from . import A\n")
    graph = import_graph(folder)
    assert graph == {
        "__init__": {"_a"},
        "_a": {"_b"},
        "_b": {"_c"},
        "_c": {"_a"},
        "_d": {"__init__"},
    }
    assert circles(graph) == [["_a", "_b", "_c"]]
