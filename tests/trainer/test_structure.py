"""accmt-trainer stays easy to see and change: no module over 400 lines, a Trainer class under
350, and no module reaching into another object's private attributes."""

from __future__ import annotations

import ast
from pathlib import Path

import accmt_trainer

SOURCES = sorted(Path(accmt_trainer.__file__).parent.glob("*.py"))


def test_no_module_is_over_400_lines() -> None:
    sizes = {path.name: len(path.read_text().splitlines()) for path in SOURCES}
    assert max(sizes.values()) <= 400, sizes


def test_the_trainer_class_is_under_350_lines() -> None:
    tree = ast.parse((Path(accmt_trainer.__file__).parent / "_trainer.py").read_text())
    (trainer,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Trainer"]
    assert trainer.end_lineno is not None
    assert trainer.end_lineno - trainer.lineno + 1 < 350


def private_accesses(source: str) -> list[str]:
    """``obj._name`` where ``obj`` is not ``self`` or ``cls`` (dunders are Python's own)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") and node.attr.endswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


# Other libraries' private names used on purpose, by module, each for a reason said there:
# Accelerate has no public way to forget its per-process state, and torch's group count is kept
# across a destroy so that a group made again gets store keys of its own.
THIRD_PARTY = {
    "_process_group.py": {
        "AcceleratorState._reset_state",
        "torch.distributed.distributed_c10d._world",
    },
}


def test_no_module_reads_another_object_s_private_attributes() -> None:
    offenders = {
        path.name: [
            found
            for found in private_accesses(path.read_text())
            if found.split(": ", 1)[1] not in THIRD_PARTY.get(path.name, set())
        ]
        for path in SOURCES
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_check_catches_a_private_access() -> None:
    assert private_accesses("trainer._step_optimizer(x)\nself._ok = 1\n") == [
        "line 1: trainer._step_optimizer"
    ]
