"""accmt-trainer's owners talk through public methods: no module reaches into another object's
private attributes. (Sizes are checked over every package in tests/packaging/.)"""

from __future__ import annotations

import ast
from pathlib import Path

import accmt_trainer

ROOT = Path(accmt_trainer.__file__).parent
SOURCES = sorted(ROOT.rglob("*.py"))  # the root and every folder below it


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
# across a destroy so that a group made again gets store keys of its own; torch's fused list
# operations (its optimizers' and clip_grad_norm_'s own) scale a window's gradients and update
# the weight average in one kernel each, where a loop would launch one per parameter.
THIRD_PARTY = {
    "fit/_optimizer_step.py": {"torch._foreach_mul_"},
    "fit/_weight_average.py": {"torch._foreach_lerp_"},
    # Accelerate's save_state writes every process's loader state under one file name, so a
    # stream's loader leaves its list and each process's place is accmt's part; its dispatcher
    # snapshots a stream's state a round ahead of what it dealt, and is given the dealt one.
    "data/_streams.py": {"accelerator._dataloaders", "loader._update_state_dict"},
    # torch.compile's wrapper keeps the model as _orig_mod, and Accelerate 1.2 cannot drop it.
    "runtime/_accelerator.py": {"compiled._orig_mod"},
    "runtime/_process_group.py": {
        "AcceleratorState._reset_state",
        "torch.distributed.distributed_c10d._world",
    },
}


def test_no_module_reads_another_object_s_private_attributes() -> None:
    offenders = {
        name: [
            found
            for found in private_accesses(path.read_text())
            if found.split(": ", 1)[1] not in THIRD_PARTY.get(name, set())
        ]
        for path in SOURCES
        if (name := path.relative_to(ROOT).as_posix())
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_every_folder_is_walked() -> None:
    folders = {path.parent.relative_to(ROOT).as_posix() for path in SOURCES}
    assert {"checkpointing", "fit", "inference"} <= folders
    assert set(THIRD_PARTY) <= {path.relative_to(ROOT).as_posix() for path in SOURCES}


def test_the_check_catches_a_private_access() -> None:
    assert private_accesses("trainer._step_optimizer(x)\nself._ok = 1\n") == [
        "line 1: trainer._step_optimizer"
    ]


def folder_surfaces(root: Path) -> dict[str, list[str]]:
    """Each folder's ``__all__``: what its ``__init__`` offers the other folders."""
    surfaces = {}
    for init in sorted(root.glob("*/__init__.py")):
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
                surfaces[init.parent.name] = list(ast.literal_eval(node.value))
    return surfaces


def imported_from_folders(root: Path) -> dict[str, set[str]]:
    """What each folder's ``__init__`` is asked for by the root's modules and other folders."""
    asked: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        here = parts[0] if len(parts) > 1 else None
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level and node.module:
                folder = node.module.split(".")[0]
                if folder != here and "." not in node.module:
                    asked.setdefault(folder, set()).update(a.name for a in node.names)
    return asked


def unused_surface(root: Path) -> dict[str, list[str]]:
    asked = imported_from_folders(root)
    return {
        folder: [name for name in names if name not in asked.get(folder, set())]
        for folder, names in folder_surfaces(root).items()
        if any(name not in asked.get(folder, set()) for name in names)
    }


def test_a_folder_offers_what_other_folders_use() -> None:
    """Tests import the module they test; a folder's ``__init__`` is for the other folders."""
    assert len(folder_surfaces(ROOT)) == 8
    assert unused_surface(ROOT) == {}


def test_an_offer_no_other_folder_takes_is_seen(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "__init__.py").write_text(
        'from ._a import used, spare\n__all__ = ["spare", "used"]\n'
    )
    (tmp_path / "_trainer.py").write_text("from .data import used\n")
    assert unused_surface(tmp_path) == {"data": ["spare"]}
