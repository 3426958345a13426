"""accmt 1.9.5.1's Trainer options, each translated to the 2.x Trainer's: kept, renamed with one
DeprecationWarning naming the new spelling, or built in with one DeprecationWarning saying so.

The translation is a pure function of the options (accmt._one_x._trainer_options); wiring it into
Trainer.__init__ is the Trainer's part.
"""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path
from typing import Any

import pytest
from torch.utils.data import default_collate

import accmt_trainer
from accmt import Monitor, Trainer, TrainerConfigError
from accmt._one_x._trainer_options import (
    ONE_X_POSITIONAL,
    TRACKER_PASS_THROUGHS,
    translate_1x_options,
)

REQUIRED = object()

# accmt 1.9.5.1's Trainer.__init__, every parameter in order with its default (**kwargs went
# to the MLflow tracker: TRACKER_PASS_THROUGHS).
ONE_X_SIGNATURE: list[tuple[str, Any]] = [
    ("hps_config", REQUIRED),
    ("model_path", REQUIRED),
    ("track_name", None),
    ("enable_checkpointing", True),
    ("multiple_checkpoints", False),
    ("max_checkpoints", None),
    ("resume", None),
    ("disable_model_saving", False),
    ("patience", None),
    ("evaluate_every_n_steps", None),
    ("checkpoint_every", "epoch"),
    ("logging_dir", "logs"),
    ("log_with", None),
    ("log_every", 1),
    ("grad_accumulation_steps", None),
    ("gradient_checkpointing", False),
    ("gradient_checkpointing_kwargs", None),
    ("clip_grad", 1.0),
    ("set_to_none", True),
    ("shuffle_train", True),
    ("sampler", None),
    ("sampler_train", None),
    ("sampler_val", None),
    ("batch_sampler", None),
    ("batch_sampler_train", None),
    ("batch_sampler_val", None),
    ("collate_fn", None),
    ("collate_fn_train", None),
    ("collate_fn_val", None),
    ("max_shard_size", "10GB"),
    ("safe_serialization", False),
    ("compile", False),
    ("compile_kwargs", None),
    ("safe_mode", True),
    ("train_loss_metric_name", "train_loss"),
    ("val_loss_metric_name", "val_loss"),
    ("dataloader_pin_memory", True),
    ("dataloader_num_workers", None),
    ("dataloader_drop_last", False),
    ("eval_when_finish", True),
    ("eval_when_start", False),
    ("monitor", None),
    ("metrics", None),
    ("consolidate_metrics", None),
    ("additional_metric_consolidation", None),
    ("report_all_metrics", False),
    ("cleanup_cache_every_n_steps", None),
    ("callback", None),
    ("additional_tracker_config", None),
    ("batch_device_placement", True),
    ("prepare_batch", True),
    ("safe_steps", True),
    ("destroy_after_training", True),
    ("enable_prepare_logging", False),
    ("module_hooks", True),
    ("inference_mode", True),
    ("reset_optimizer_every_n_steps", None),
]

SAMPLER, BATCH_SAMPLER, COLLATE, VAL_COLLATE, METRIC, CALLBACK = (object() for _ in range(6))


def consolidate(key: str) -> bool:
    return key.startswith("accuracy")


def extra_consolidation(values: dict[str, list[float]]) -> dict[str, float]:
    return {"max_accuracy": max(values["accuracy"])}


def kept(name: str, value: Any) -> tuple[str, Any, dict[str, Any], str | None]:
    return (name, value, {name: value}, None)


# (1.x option, a value a 1.x program gives, the 2.x options it becomes, the new spelling the
# one DeprecationWarning names, or None for no warning). Every option of the signature has at
# least one case.
CASES: list[tuple[str, Any, dict[str, Any], str | None]] = [
    kept("track_name", "my-run"),
    ("enable_checkpointing", False, {"checkpoint_every": None}, "checkpoint_every=None"),
    ("enable_checkpointing", True, {}, "remove it"),
    ("multiple_checkpoints", False, {"max_checkpoints": 1}, "max_checkpoints=1"),
    ("multiple_checkpoints", True, {}, "remove it"),
    kept("max_checkpoints", 3),
    kept("resume", -1),
    kept("disable_model_saving", True),
    kept("patience", {"best_valid_loss": 2}),
    kept("evaluate_every_n_steps", 100),
    kept("checkpoint_every", "2ep"),
    kept("logging_dir", "http://localhost:5000"),
    kept("log_with", "mlflow"),
    kept("log_every", 10),
    ("log_every", -1, {"log_every": "epoch"}, "log_every='epoch'"),
    kept("grad_accumulation_steps", 4),
    ("grad_accumulation_steps", None, {}, None),  # 1.x's default: no accumulation, 2.x's too
    kept("gradient_checkpointing", True),
    kept("gradient_checkpointing_kwargs", {"use_reentrant": False}),
    kept("clip_grad", 0.5),
    kept("set_to_none", False),
    kept("shuffle_train", False),
    kept("sampler", SAMPLER),
    ("sampler_train", SAMPLER, {"sampler": SAMPLER}, "sampler="),
    ("sampler_val", SAMPLER, {"val_sampler": SAMPLER}, "val_sampler="),
    kept("batch_sampler", BATCH_SAMPLER),
    ("batch_sampler_train", BATCH_SAMPLER, {"batch_sampler": BATCH_SAMPLER}, "batch_sampler="),
    (
        "batch_sampler_val",
        BATCH_SAMPLER,
        {"val_batch_sampler": BATCH_SAMPLER},
        "val_batch_sampler=",
    ),
    kept("collate_fn", COLLATE),
    # Alone, 1.x's training collate left validation batches to PyTorch's default.
    (
        "collate_fn_train",
        COLLATE,
        {"collate_fn": COLLATE, "val_collate_fn": default_collate},
        "collate_fn=",
    ),
    ("collate_fn_val", VAL_COLLATE, {"val_collate_fn": VAL_COLLATE}, "val_collate_fn="),
    kept("max_shard_size", "2GB"),
    ("safe_serialization", True, {}, "remove it"),
    ("safe_serialization", False, {}, "remove it"),
    kept("compile", True),
    kept("compile_kwargs", {"mode": "max-autotune"}),
    ("safe_mode", False, {}, "remove it"),
    ("train_loss_metric_name", "loss", {}, "remove it"),
    ("val_loss_metric_name", "vloss", {}, "remove it"),
    kept("dataloader_pin_memory", True),
    kept("dataloader_num_workers", 2),
    ("dataloader_num_workers", None, {}, None),  # 1.x's default: 2.x's default (0)
    kept("dataloader_drop_last", True),
    kept("eval_when_finish", False),
    kept("eval_when_start", True),
    kept("monitor", Monitor(learning_rate=True)),
    (
        "monitor",
        {"learning_rate": True, "gpu_utilization": True, "checkpoint": True},
        {"monitor": Monitor(learning_rate=True, gpu_utilization=True)},
        "monitor=Monitor(",
    ),
    ("monitor", None, {}, None),
    kept("metrics", [METRIC]),
    kept("metrics", METRIC),  # one metric: the Trainer's to accept, as 1.x did
    kept("consolidate_metrics", {"average_accuracy": consolidate}),
    kept("additional_metric_consolidation", extra_consolidation),
    kept("report_all_metrics", True),
    kept("cleanup_cache_every_n_steps", 100),
    ("callback", CALLBACK, {"callbacks": [CALLBACK]}, "callbacks=["),
    ("callback", [CALLBACK], {"callbacks": [CALLBACK]}, "callbacks=["),
    kept("additional_tracker_config", {"dataset": "digits"}),
    kept("batch_device_placement", False),
    ("prepare_batch", False, {}, "remove it"),
    ("safe_steps", False, {}, "remove it"),
    ("destroy_after_training", False, {}, "remove it"),
    ("enable_prepare_logging", True, {}, "remove it"),
    kept("module_hooks", False),
    ("inference_mode", False, {}, "remove it"),
    kept("reset_optimizer_every_n_steps", 1000),
    *(
        (
            name,
            "value",
            {"tracker_init_kwargs": {"mlflow": {name: "value"}}},
            "tracker_init_kwargs=",
        )
        for name in TRACKER_PASS_THROUGHS
    ),
    # accmt 1.x's README named log_with so; 1.9.5.1 handed it to MLflow, which refused it.
    ("track_with", "mlflow", {"log_with": "mlflow"}, "log_with="),
]


def translate(*args: Any, **options: Any) -> tuple[dict[str, Any], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = translate_1x_options(args, options)
    assert all(w.category is DeprecationWarning for w in caught)
    return result, [str(w.message) for w in caught]


# The options that are 1.x's spelling only: each warns once, even at its 1.x default.
ONE_X_ONLY = {
    "enable_checkpointing",
    "multiple_checkpoints",
    "sampler_train",
    "sampler_val",
    "batch_sampler_train",
    "batch_sampler_val",
    "collate_fn_train",
    "collate_fn_val",
    "safe_serialization",
    "safe_mode",
    "train_loss_metric_name",
    "val_loss_metric_name",
    "callback",
    "prepare_batch",
    "safe_steps",
    "destroy_after_training",
    "enable_prepare_logging",
    "inference_mode",
}


def warned_names(messages: list[str]) -> list[str]:
    """The options that warnings of the form 'Trainer(NAME=...) ...' name, sorted."""
    return sorted(message.split("=")[0].removeprefix("Trainer(") for message in messages)


def trainer_options() -> set[str]:
    return set(inspect.signature(Trainer).parameters) - {"hps_config", "model_path"}


def test_the_cases_walk_the_whole_1_9_5_1_signature() -> None:
    names = [name for name, _ in ONE_X_SIGNATURE]
    assert tuple(names[2:]) == ONE_X_POSITIONAL
    assert len(names) == 57
    covered = {name for name, *_ in CASES}
    assert covered - {*TRACKER_PASS_THROUGHS, "track_with"} == set(names[2:])


@pytest.mark.parametrize(("name", "value", "expected", "spelling"), CASES)
def test_each_1x_option_is_kept_or_translated_with_one_warning(
    name: str, value: Any, expected: dict[str, Any], spelling: str | None
) -> None:
    result, messages = translate(**{name: value})
    assert result == expected
    if spelling is None:
        assert messages == []
    else:
        assert len(messages) == 1, messages
        assert f"Trainer({name}=...)" in messages[0]
        assert spelling in messages[0]


def test_a_program_spelling_out_every_1x_default_keeps_1x_s_choices() -> None:
    defaults = dict(ONE_X_SIGNATURE[2:])
    result, messages = translate(**defaults)
    # Each of these spellings is 1.x's only: one warning each, even at its default.
    assert warned_names(messages) == sorted(ONE_X_ONLY)
    # None meant the default for these two, and for the monitor; 2.x's defaults are the same.
    dropped = {"grad_accumulation_steps", "dataloader_num_workers", "monitor"}
    kept_as_given = {k: v for k, v in defaults.items() if k not in ONE_X_ONLY | dropped}
    # multiple_checkpoints=False: 1.x kept only its newest checkpoint.
    assert result == {**kept_as_given, "max_checkpoints": 1}
    assert (result["clip_grad"], result["log_with"], result["checkpoint_every"]) == (
        1.0,
        None,
        "epoch",
    )


def test_every_option_the_translation_gives_is_the_trainer_s() -> None:
    produced = {key for _, value, expected, _ in CASES for key in expected}
    assert produced <= trainer_options()


@pytest.mark.parametrize("positional", [False, True])
def test_the_trainer_takes_a_call_spelling_out_every_1x_default(
    tmp_path: Path, positional: bool
) -> None:
    defaults = dict(ONE_X_SIGNATURE[2:])
    args, options = (list(defaults.values()), {}) if positional else ([], defaults)
    with pytest.deprecated_call() as warned:
        trainer = Trainer(HPS, tmp_path, *args, **options)
    messages = [str(warning.message) for warning in warned]
    if positional:
        keyword_only = "Trainer options after model_path are keyword-only in accmt 2"
        assert [m for m in messages if m.startswith(keyword_only)] == messages[:1]
        messages = messages[1:]
    assert warned_names(messages) == sorted(ONE_X_ONLY)  # one warning each, as translated
    assert all(w.category is DeprecationWarning for w in warned)
    assert (
        trainer.step_options.clip_grad,
        trainer.checkpoint_options.max_checkpoints,
        trainer.best_model_options.max_shard_size,
    ) == (1.0, 1, "10GB")
    assert trainer.logging_options.logging_dir == Path("logs")
    assert trainer.step_options.set_to_none is True
    assert trainer.loader_options.batch_device_placement is True


def test_2x_options_and_unknown_names_pass_through() -> None:
    result, messages = translate(callbacks=[CALLBACK], seed=3, no_such_option=1)
    assert result == {"callbacks": [CALLBACK], "seed": 3, "no_such_option": 1}
    assert messages == []


def test_positional_options_follow_1x_s_order_with_one_warning() -> None:
    result, messages = translate("my-run", False, False, 3)
    assert result == {"track_name": "my-run", "checkpoint_every": None, "max_checkpoints": 1}
    assert len(messages) == 3
    assert "keyword-only" in messages[0]
    assert "track_name=..., enable_checkpointing=..., multiple_checkpoints=..." in messages[0]
    with pytest.raises(TypeError, match="at most 57 positional"):
        translate_1x_options([None] * 56, {})
    with pytest.raises(TypeError, match="multiple values for argument 'track_name'"):
        translate_1x_options(["a"], {"track_name": "b"})


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"callback": CALLBACK, "callbacks": [CALLBACK]}, ("callback", "callbacks")),
        ({"sampler": SAMPLER, "sampler_train": SAMPLER}, ("sampler_train", "sampler")),
        ({"collate_fn": COLLATE, "collate_fn_train": COLLATE}, ("collate_fn_train", "collate_fn")),
        ({"batch_sampler": 1, "batch_sampler_train": 2}, ("batch_sampler_train", "batch_sampler")),
        (
            {"collate_fn_val": COLLATE, "val_collate_fn": COLLATE},
            ("collate_fn_val", "val_collate_fn"),
        ),
        ({"log_with": "mlflow", "track_with": "mlflow"}, ("track_with", "log_with")),
        ({"run_name": "a", "tracker_init_kwargs": {}}, ("run_name", "tracker_init_kwargs")),
    ],
)
def test_two_spellings_of_one_option_are_an_error_naming_both(
    options: dict[str, Any], names: tuple[str, str]
) -> None:
    with pytest.raises(TrainerConfigError) as caught:
        translate_1x_options((), options)
    for name in names:
        assert f"Trainer({name}=...)" in str(caught.value)


def test_1x_s_own_precedence_is_kept() -> None:
    # enable_checkpointing=False turned checkpoints off whatever checkpoint_every said, and one
    # checkpoint folder was kept whatever max_checkpoints said.
    result, _ = translate(
        checkpoint_every="2ep",
        enable_checkpointing=False,
        max_checkpoints=5,
        multiple_checkpoints=False,
    )
    assert (result["checkpoint_every"], result["max_checkpoints"]) == (None, 1)
    # Training and validation collates together: each to its own.
    result, _ = translate(collate_fn_train=COLLATE, collate_fn_val=VAL_COLLATE)
    assert result == {"collate_fn": COLLATE, "val_collate_fn": VAL_COLLATE}


def test_tracker_pass_throughs_go_to_mlflow_together() -> None:
    result, messages = translate(run_name="baseline", tags={"team": "nlp"}, log_with="mlflow")
    assert result == {
        "log_with": "mlflow",
        "tracker_init_kwargs": {"mlflow": {"run_name": "baseline", "tags": {"team": "nlp"}}},
    }
    assert len(messages) == 2


def test_a_1x_monitor_file_or_dict_becomes_a_monitor(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text("learning_rate: true\ncpu_utilization: true\nepoch: false\n")
    result, _ = translate(monitor=str(path))
    assert result["monitor"] == Monitor(learning_rate=True, cpu_utilization=True, epoch=False)
    with pytest.raises(TrainerConfigError, match="has no gpu_memory"):
        translate_1x_options((), {"monitor": {"gpu_memory": True}})
    with pytest.raises(TrainerConfigError, match="expected a Monitor"):
        translate_1x_options((), {"monitor": 3})


def the_trainer(*args: Any, **options: Any) -> dict[str, Any]:
    """Stands for Trainer.__init__, which calls the translation for its caller."""
    return translate_1x_options(args, options)


def test_warnings_point_at_the_program_that_called_the_trainer() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        the_trainer("run", callback=CALLBACK, run_name="x")
    assert len(caught) == 3
    assert {(Path(w.filename).name, w.lineno) for w in caught} == {(Path(__file__).name, line)}


# The Trainer itself: 1.x calls are translated, 2.x calls are as they were.

HPS = {"epochs": 1, "batch_size": 4}


def test_a_1x_positional_call_builds_the_trainer_with_warnings_at_the_call(
    tmp_path: Path,
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        trainer = Trainer(HPS, tmp_path, "my-run", False, False, 3)  # type: ignore[misc]
    assert (
        trainer.logging_options.track_name,
        trainer.checkpoint_options.schedule,
        trainer.checkpoint_options.max_checkpoints,
    ) == (
        "my-run",
        None,
        1,  # multiple_checkpoints=False wins over max_checkpoints, as in 1.x
    )
    assert len(caught) == 3
    assert all(w.category is DeprecationWarning for w in caught)
    assert {(Path(w.filename).name, w.lineno) for w in caught} == {(Path(__file__).name, line)}


def test_a_1x_keyword_call_is_translated(tmp_path: Path) -> None:
    from accmt_callbacks import Callback

    callback = Callback()
    with pytest.warns(DeprecationWarning, match=r"use Trainer\(callbacks=\[\.\.\.\]\)"):
        trainer = Trainer(HPS, tmp_path, callback=callback)  # type: ignore[call-arg]
    assert list(trainer.callbacks.callbacks) == [callback]


def test_a_2x_call_gives_no_warning_and_keeps_its_defaults(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer = Trainer(hps_config=HPS, model_path=tmp_path, track_name="x", log_every=3)
    assert (
        trainer.logging_options.track_name,
        trainer.logging_options.log_every,
        trainer.step_options.clip_grad,
    ) == ("x", 3, None)
    assert trainer.checkpoint_options.schedule is not None  # "epoch"


def test_an_unknown_keyword_is_a_type_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_option'"):
        Trainer(HPS, tmp_path, no_such_option=1)  # type: ignore[call-arg]
    with pytest.raises(TrainerConfigError, match=r"Trainer\(log_every=\.\.\.\)"):
        Trainer(HPS, tmp_path, log_every=0)


def test_the_trainer_s_signature_is_its_typed_2x_options() -> None:
    parameters = inspect.signature(Trainer).parameters
    assert list(parameters)[:2] == ["hps_config", "model_path"]
    kinds = {
        parameter.kind
        for name, parameter in parameters.items()
        if name not in ("hps_config", "model_path")
    }
    assert kinds == {inspect.Parameter.KEYWORD_ONLY}


def test_every_1x_name_is_a_2x_option_or_one_accmt_trainer_refuses_naming_its_spelling() -> None:
    # accmt_trainer's error table and this translation cover the same 1.x names.
    from accmt_trainer.config._former_options import FORMER_OPTIONS

    options = set(inspect.signature(accmt_trainer.Trainer).parameters)
    one_x = {*ONE_X_POSITIONAL, *TRACKER_PASS_THROUGHS, "track_with"}  # README: log_with
    assert one_x - options == set(FORMER_OPTIONS)
