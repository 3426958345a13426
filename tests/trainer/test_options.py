"""Each Trainer option is declared once: every keyword of ``Trainer.__init__`` is a field of
exactly one options record, with the same default, and a row of the trainer guide's option
table with that default. An option added in one place and not the others fails here by name."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from accmt_trainer import Trainer
from accmt_trainer.checkpointing._checkpoints import CheckpointOptions
from accmt_trainer.data._loaders import LoaderOptions
from accmt_trainer.evaluation._evaluation import EvaluationOptions
from accmt_trainer.fit._best_models import BestModelOptions
from accmt_trainer.fit._loop_options import LoopOptions
from accmt_trainer.fit._optimizer_step import StepOptions
from accmt_trainer.fit._options import FitOptions
from accmt_trainer.runtime._accelerator import AcceleratorOptions
from accmt_trainer.runtime._trackers import LoggingOptions

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "trainer.md"
RECORDS = (
    AcceleratorOptions,
    LoaderOptions,
    StepOptions,
    EvaluationOptions,
    LoopOptions,
    CheckpointOptions,
    BestModelOptions,
    LoggingOptions,
    FitOptions,
)
# Fields that are not options of their own: what the Trainer hands a record besides them.
CONTEXT = {"hps", "model_path"} | {
    field.name for field in attrs.fields(FitOptions) if field.name.endswith("_options")
}
# Keywords that go to no record: the callbacks are the CallbackHandler's.
NOT_RECORDED = {"callbacks"}


def record_defaults(records: Sequence[type[Any]]) -> dict[str, list[tuple[str, Any]]]:
    """Each option the records declare: the records that declare it, with its default."""
    declared: dict[str, list[tuple[str, Any]]] = {}
    for record in records:
        for field in attrs.fields(record):
            if field.init and field.name not in CONTEXT:
                declared.setdefault(field.name, []).append((record.__name__, field.default))
    return declared


def keyword_defaults(init: Callable[..., Any]) -> dict[str, Any]:
    parameters = inspect.signature(init).parameters.values()
    return {p.name: p.default for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}


def guide_defaults(page: str) -> dict[str, str]:
    """The option table of the trainer guide: option -> its default column as written."""
    lines = page.splitlines()
    start = lines.index("| option | default | meaning |") + 2
    table: dict[str, str] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        name, default = (cell.strip() for cell in line.strip("|").split("|")[:2])
        table[name.strip("`")] = default
    return table


def literal(written: str) -> Any:
    """A default as the guide writes it: a Python literal, in backticks or bare."""
    return ast.literal_eval(written.strip("`"))


def disagreements(
    keywords: Mapping[str, Any],
    declared: Mapping[str, list[tuple[str, Any]]],
    guide: Mapping[str, str],
) -> list[str]:
    """Every way the signature, the records and the guide disagree, each naming the option."""
    found = []
    for name in sorted(set(keywords) | set(declared)):
        if name in NOT_RECORDED:
            continue
        records = declared.get(name, [])
        if name not in keywords:
            found.append(f"{name}: declared by {records[0][0]} but not a Trainer keyword")
            continue
        if len(records) != 1:
            owners = [record for record, _ in records] or "no record"
            found.append(f"{name}: declared by {owners}, not by exactly one record")
            continue
        record, default = records[0]
        if default is attrs.NOTHING or default != keywords[name]:
            found.append(f"{name}: Trainer's default {keywords[name]!r}, {record}'s {default!r}")
    for name, default in keywords.items():
        if name not in guide:
            found.append(f"{name}: not in the guide's option table")
        elif name not in NOT_RECORDED and literal(guide[name]) != default:
            found.append(f"{name}: the guide says {guide[name]}, the Trainer {default!r}")
    positional = {"hps_config", "model_path"}
    found += [
        f"{name}: in the guide, not the Trainer's"
        for name in set(guide) - set(keywords) - positional
    ]
    return found


def test_the_signature_the_records_and_the_guide_agree() -> None:
    keywords = keyword_defaults(Trainer.__init__)
    assert len(keywords) > 50
    guide = guide_defaults(GUIDE.read_text(encoding="utf-8"))
    assert disagreements(keywords, record_defaults(RECORDS), guide) == []


def test_every_record_is_made_from_its_own_options() -> None:
    trainer = Trainer({"batch_size": 4}, "runs/x", clip_grad=0.5, eval_when_start=True)
    assert trainer.step_options.clip_grad == 0.5
    assert trainer.loop_options.eval_when_start is True
    assert trainer.fit_options.loop_options is trainer.loop_options
    assert trainer.logging_options.track_name == "x"
    assert trainer.logging_options.logging_dir == Path("runs/x/logs")


@attrs.frozen(kw_only=True)
class _Twice:
    clip_grad: float | None = None


@attrs.frozen(kw_only=True)
class _Other:
    set_to_none: bool = False


@attrs.frozen(kw_only=True)
class _AlsoClip:
    clip_grad: float | None = None


def _init(*, clip_grad: float | None = None, set_to_none: bool = True, extra: int = 1) -> None:
    """A crafted signature: ``set_to_none``'s default differs, ``extra`` has no record."""


@pytest.mark.parametrize(
    ("guide", "expected"),
    [
        (
            {"clip_grad": "None", "set_to_none": "True", "extra": "1"},
            [
                "clip_grad: declared by ['_Twice', '_AlsoClip'], not by exactly one record",
                "extra: declared by no record, not by exactly one record",
                "set_to_none: Trainer's default True, _Other's False",
            ],
        ),
        (
            {"clip_grad": "1.0", "set_to_none": "True", "gone": "2"},
            [
                "clip_grad: declared by ['_Twice', '_AlsoClip'], not by exactly one record",
                "extra: declared by no record, not by exactly one record",
                "set_to_none: Trainer's default True, _Other's False",
                "clip_grad: the guide says 1.0, the Trainer None",
                "extra: not in the guide's option table",
                "gone: in the guide, not the Trainer's",
            ],
        ),
    ],
)
def test_the_check_names_each_disagreement(guide: dict[str, str], expected: list[str]) -> None:
    declared = record_defaults([_Twice, _Other, _AlsoClip])
    assert disagreements(keyword_defaults(_init), declared, guide) == expected
