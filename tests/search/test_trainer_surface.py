"""accmt-search reaches accmt-trainer through ``accmt_trainer.integration`` only, and that
module names what it says: every name of its ``__all__`` exists, is documented and typed, and
the names only packages need are kept out of the user-facing ``accmt_trainer.__all__``."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import accmt_search
import accmt_trainer
import accmt_trainer.integration as integration

SURFACE = "accmt_trainer.integration"
# What only packages built on accmt-trainer use: not part of the user-facing API.
INTERNAL = ["ProcessGroupScope", "check_writable", "join_slurm_job", "stop_on_signals", "use_cpu"]


def imports_past_the_surface(source: str, filename: str = "<source>") -> list[str]:
    """``file:line`` of each import of accmt-trainer in ``source`` (at any depth,
    ``TYPE_CHECKING`` blocks and functions included) other than ``from
    accmt_trainer.integration import ...``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [] if node.module == SURFACE else [node.module or ""]
        else:
            continue
        if any(name == "accmt_trainer" or name.startswith("accmt_trainer.") for name in names):
            found.append(f"{filename}:{node.lineno}")
    return found


def test_the_search_imports_the_trainer_only_through_its_integration_module() -> None:
    package = Path(accmt_search.__file__).parent
    sources = sorted(package.rglob("*.py"))
    assert len(sources) > 10
    found = [
        line
        for path in sources
        for line in imports_past_the_surface(
            path.read_text(encoding="utf-8"), path.relative_to(package).as_posix()
        )
    ]
    assert found == []


def test_the_check_finds_each_way_past_the_surface() -> None:
    source = """
from typing import TYPE_CHECKING
import accmt_trainer
from accmt_trainer import Trainer
from accmt_trainer.runtime import use_cpu
from accmt_trainer.integration import HyperParameters
import accmt_trainer.checkpointing as checkpointing
import accmt_trainer_extra
from . import accmt_trainer as local
if TYPE_CHECKING:
    from accmt_trainer import AcceleratorModule
def later():
    from accmt_trainer._trainer import Trainer
"""
    assert imports_past_the_surface(source, "crafted.py") == [
        "crafted.py:3",
        "crafted.py:4",
        "crafted.py:5",
        "crafted.py:7",
        "crafted.py:11",
        "crafted.py:13",
    ]


def test_the_integration_module_names_what_exists_documented_and_typed() -> None:
    assert integration.__doc__
    assert sorted(integration.__all__) == integration.__all__
    missing = [name for name in integration.__all__ if not hasattr(integration, name)]
    assert missing == []
    for name in integration.__all__:
        value = getattr(integration, name)
        assert inspect.getdoc(value), name
        if inspect.isfunction(value):
            signature = inspect.signature(value)
            untyped = [
                parameter.name
                for parameter in signature.parameters.values()
                if parameter.annotation is inspect.Parameter.empty
            ]
            assert untyped == [], name
            assert signature.return_annotation is not inspect.Signature.empty, name
    assert set(INTERNAL) <= set(integration.__all__)


def test_the_user_facing_names_are_the_trainer_s_own() -> None:
    for name in set(integration.__all__) - set(INTERNAL):
        assert name in accmt_trainer.__all__, name
        assert getattr(integration, name) is getattr(accmt_trainer, name), name


def test_the_internal_names_are_not_in_the_trainer_s_all() -> None:
    assert [name for name in INTERNAL if name in accmt_trainer.__all__] == []
