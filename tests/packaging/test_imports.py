"""Every package's modules import one another one way: no import circle in any package
(``TYPE_CHECKING`` and function-local imports included); accmt-trainer's folders import only
the layers below them, in the order ``docs/architecture.md`` gives; nothing below the
Trainer's module names the Trainer; and each package's errors live in its ``_errors.py``."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from ._imports import circles, import_graph, modules

REPO = Path(__file__).resolve().parents[2]
PACKAGES = sorted(path.parent for path in REPO.glob("packages/*/src/*/__init__.py"))
TRAINER = REPO / "packages/trainer/src/accmt_trainer"
LAYERS_MARK = "<!-- accmt-trainer's layers, lowest first (tests/packaging/test_imports.py) -->"


def layers() -> list[str]:
    """The layers of accmt-trainer as docs/architecture.md lists them, lowest first: a root
    module (``_errors.py``) or a folder (``fit/``), each the first word of its line."""
    text = (REPO / "docs/architecture.md").read_text(encoding="utf-8")
    block = text.split(LAYERS_MARK, 1)[1].split("```")[1]
    return [line.split()[0] for line in block.splitlines()[1:] if line.strip()]


def layer_of(module: str, root: Path = TRAINER) -> str:
    """``accmt_trainer.fit._loop`` -> ``fit/``; ``accmt_trainer._module`` -> ``_module.py``
    (a module at the root of the package folder ``root``: ``integration.py`` too); the
    package's ``__init__`` -> ``__init__.py``."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__.py"
    return f"{parts[0]}.py" if (root / f"{parts[0]}.py").is_file() else f"{parts[0]}/"


def against_the_layers(
    graph: dict[str, set[str]], order: list[str], root: Path = TRAINER
) -> list[str]:
    rank = {layer: position for position, layer in enumerate(order)}
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if rank[layer_of(target, root)] > rank[layer_of(module, root)]
    )


@pytest.mark.parametrize("root", PACKAGES, ids=lambda root: root.name)
def test_no_import_circle(root: Path) -> None:
    assert circles(import_graph(root)) == []


def test_every_package_is_read() -> None:
    assert len(PACKAGES) == 8
    assert len(modules(TRAINER)) > 50  # the subpackages' modules too


def test_the_trainer_s_folders_import_only_the_layers_below() -> None:
    order = layers()
    graph = import_graph(TRAINER)
    assert {layer_of(module) for module in graph} == set(order)
    assert against_the_layers(graph, order) == []


def test_nothing_below_the_trainer_s_module_names_the_trainer() -> None:
    graph = import_graph(TRAINER)
    importers = {module for module, targets in graph.items() if "accmt_trainer._trainer" in targets}
    assert importers == {"accmt_trainer"}
    naming = sorted(
        f"{path.relative_to(TRAINER)}:{node.lineno}"
        for path in TRAINER.rglob("*.py")
        if path.name not in ("_trainer.py", "__init__.py") or path.parent != TRAINER
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Name) and node.id == "Trainer"
    )
    assert naming == []


@pytest.mark.parametrize("root", PACKAGES, ids=lambda root: root.name)
def test_every_error_is_in_its_package_s_errors_module(root: Path) -> None:
    outside = []
    for name in modules(root):
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and not name.endswith("._errors")
            ):
                outside.append(f"{name}.{attribute}")
    assert outside == []


@pytest.mark.parametrize("root", PACKAGES, ids=lambda root: root.name)
def test_a_package_makes_its_logger_once(root: Path) -> None:
    spelled = re.compile(rf"getLogger\(\s*[\"']{root.name}[\"']\s*\)")
    makers = [path.name for path in root.rglob("*.py") if spelled.search(path.read_text())]
    assert len(makers) <= 1, makers


# The checks themselves, on crafted packages: each must be able to fail.


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_a_circle_through_type_checking_or_a_function_is_found(tmp_path: Path) -> None:
    package = write(
        tmp_path / "crafted",
        {
            "__init__.py": "",
            "_a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._b import B\n",
            "_b.py": "def f():\n    from ._c import C\n",
            "_c.py": "from . import _a\n",
            "_d.py": "from ._a import x\n",
        },
    )
    assert circles(import_graph(package)) == [["crafted._a", "crafted._b", "crafted._c"]]


def test_an_arrow_up_the_layers_is_found(tmp_path: Path) -> None:
    package = write(
        tmp_path / "accmt_trainer",
        {
            "__init__.py": "from ._trainer import Trainer\n",
            "_trainer.py": "from .fit import run\n",
            "data/__init__.py": "from ._plan import plan\n",
            "data/_plan.py": "from ..fit._loop import run\n",
            "fit/__init__.py": "from ._loop import run\n",
            "fit/_loop.py": "from ..data import plan\n",
            "integration.py": "from . import Trainer\nfrom .fit import run\n",
        },
    )
    order = ["data/", "fit/", "_trainer.py", "__init__.py", "integration.py"]
    found = against_the_layers(import_graph(package), order, package)
    assert found == ["accmt_trainer.data._plan -> accmt_trainer.fit._loop"]
