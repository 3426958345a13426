"""accmt 1.x's Trainer options, translated to accmt-trainer's.

:func:`translate_1x_options` takes what a program gave ``Trainer(hps_config, model_path, ...)``
after ``model_path`` and returns the options of the 2.x Trainer. Each of accmt 1.9.5.1's options
is one of:

- kept: 2.x has an option of that name that does what 1.x's did; it passes through (a 1.x-only
  value, such as ``log_every=-1``, is translated with a DeprecationWarning);
- renamed: 2.x spells it otherwise (``callback`` -> ``callbacks``); it is translated, with one
  DeprecationWarning that names the new spelling;
- built in: what it chose is what 2.x always does, or it tuned something 2.x does not have
  (``safe_mode``, ``safe_steps``...); it is dropped, with one DeprecationWarning that says so.

Options 1.x passed through to its tracker (``run_name``, ``tags``...) become
``tracker_init_kwargs``. A name that is neither 1.x's nor 2.x's is left for the Trainer to
refuse. Contradictory spellings (``callback`` and ``callbacks``) raise
:class:`TrainerConfigError` naming both.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import yaml
from torch.utils.data import default_collate

import accmt_trainer
from accmt_trainer import TrainerConfigError

from ._monitor import DROPPED_FLAGS, Monitor, one_x_flags

# accmt 1.9.5.1's Trainer.__init__ after hps_config and model_path, in order: the positional
# arguments a 1.x program may pass.
ONE_X_POSITIONAL = (
    "track_name",
    "enable_checkpointing",
    "multiple_checkpoints",
    "max_checkpoints",
    "resume",
    "disable_model_saving",
    "patience",
    "evaluate_every_n_steps",
    "checkpoint_every",
    "logging_dir",
    "log_with",
    "log_every",
    "grad_accumulation_steps",
    "gradient_checkpointing",
    "gradient_checkpointing_kwargs",
    "clip_grad",
    "set_to_none",
    "shuffle_train",
    "sampler",
    "sampler_train",
    "sampler_val",
    "batch_sampler",
    "batch_sampler_train",
    "batch_sampler_val",
    "collate_fn",
    "collate_fn_train",
    "collate_fn_val",
    "max_shard_size",
    "safe_serialization",
    "compile",
    "compile_kwargs",
    "safe_mode",
    "train_loss_metric_name",
    "val_loss_metric_name",
    "dataloader_pin_memory",
    "dataloader_num_workers",
    "dataloader_drop_last",
    "eval_when_finish",
    "eval_when_start",
    "monitor",
    "metrics",
    "consolidate_metrics",
    "additional_metric_consolidation",
    "report_all_metrics",
    "cleanup_cache_every_n_steps",
    "callback",
    "additional_tracker_config",
    "batch_device_placement",
    "prepare_batch",
    "safe_steps",
    "destroy_after_training",
    "enable_prepare_logging",
    "module_hooks",
    "inference_mode",
    "reset_optimizer_every_n_steps",
)

# 1.x's only tracker was MLflow; its **kwargs went to MLflow's tracker as these.
TRACKER_PASS_THROUGHS = ("run_id", "tags", "nested_run", "run_name", "description")

# accmt 1.x's Monitor flags (a dict or YAML file of them was its Trainer's monitor=).
_MONITOR_FLAGS = (
    "learning_rate",
    "epoch",
    "train_loss",
    "validation_loss",
    "additional_metrics",
    "grad_norm",
    "gpu_utilization",
    "cpu_utilization",
    *DROPPED_FLAGS,
)


@attrs.frozen
class Translation:
    """What one given 1.x option becomes: options to set, the DeprecationWarning to give (None:
    none), and whether the options override what the program gave (1.x's own precedence)."""

    options: dict[str, Any] = attrs.field(factory=dict)
    warning: str | None = None
    overrides: bool = False


Rule = Callable[[Any, Mapping[str, Any]], Translation]


def _renamed(new: str, convert: Callable[[Any], Any] = lambda value: value) -> Rule:
    def rule(value: Any, given: Mapping[str, Any]) -> Translation:
        options = {} if value is None else {new: convert(value)}
        return Translation(options, f"is accmt 1.x's spelling: use Trainer({new}=...)")

    return rule


def _built_in(what: str) -> Rule:
    def rule(value: Any, given: Mapping[str, Any]) -> Translation:
        return Translation({}, f"has no effect in accmt 2 ({what}); remove it")

    return rule


def _none_is_the_default(name: str) -> Rule:
    """1.x's None for an option that 2.x wants a value for: both mean the default."""

    def rule(value: Any, given: Mapping[str, Any]) -> Translation:
        return Translation({} if value is None else {name: value})

    return rule


def _enable_checkpointing(value: Any, given: Mapping[str, Any]) -> Translation:
    if value:
        return Translation(
            {},
            "has no effect in accmt 2 (checkpoints are on unless checkpoint_every=None); remove it",
        )
    return Translation(
        {"checkpoint_every": None},
        "is accmt 1.x's spelling: use Trainer(checkpoint_every=None)",
        overrides=True,
    )


def _multiple_checkpoints(value: Any, given: Mapping[str, Any]) -> Translation:
    if value:
        return Translation(
            {},
            "has no effect in accmt 2 (every checkpoint is kept in a folder "
            "of its own; max_checkpoints=N keeps the newest N); remove it",
        )
    # 1.x kept one checkpoint folder and wrote over it.
    return Translation(
        {"max_checkpoints": 1},
        "is accmt 1.x's spelling: use Trainer(max_checkpoints=1)",
        overrides=True,
    )


def _log_every(value: Any, given: Mapping[str, Any]) -> Translation:
    if value == -1:
        return Translation(
            {"log_every": "epoch"},
            "with -1 (once per epoch) is accmt 1.x's spelling: use Trainer(log_every='epoch')",
        )
    return Translation({"log_every": value})


def _collate_fn_train(value: Any, given: Mapping[str, Any]) -> Translation:
    options: dict[str, Any] = {} if value is None else {"collate_fn": value}
    if value is not None and given.get("collate_fn_val") is None and "val_collate_fn" not in given:
        # 1.x's validation loaders then used PyTorch's default collate.
        options["val_collate_fn"] = default_collate
    return Translation(
        options,
        "is accmt 1.x's spelling: use Trainer(collate_fn=...), which "
        "also collates validation batches unless val_collate_fn is given",
    )


def _callback(value: Any, given: Mapping[str, Any]) -> Translation:
    callbacks = list(value) if isinstance(value, (list, tuple)) else [value]
    options = {} if value is None else {"callbacks": callbacks}
    return Translation(options, "is accmt 1.x's spelling: use Trainer(callbacks=[...])")


def _monitor(value: Any, given: Mapping[str, Any]) -> Translation:
    if value is None or isinstance(value, accmt_trainer.Monitor):
        return Translation({} if value is None else {"monitor": value})
    config = value
    if isinstance(value, str):
        with open(value, encoding="utf-8") as stream:
            config = yaml.safe_load(stream) or {}
    if not isinstance(config, Mapping):
        raise TrainerConfigError(
            f"Trainer(monitor=...): expected a Monitor, got {type(value).__name__}"
        )
    return Translation(
        {"monitor": _monitor_from_1x(config)},
        "given as a dict or file is accmt 1.x's spelling: use Trainer(monitor=Monitor(...))",
    )


def _monitor_from_1x(config: Mapping[str, Any]) -> Monitor:
    unknown = sorted(set(config) - set(_MONITOR_FLAGS))
    if unknown:
        raise TrainerConfigError(
            f"Trainer(monitor=...): accmt 1.x's Monitor has no {', '.join(unknown)}; its flags "
            f"are {', '.join(_MONITOR_FLAGS)}"
        )
    # One warning for the whole dict is given by the caller.
    flags, _ = one_x_flags(config)
    return Monitor(**flags)


def _track_with(value: Any, given: Mapping[str, Any]) -> Translation:
    return Translation(
        {"log_with": value}, "is accmt 1.x's README spelling: use Trainer(log_with=...)"
    )


_RULES: dict[str, Rule] = {
    "enable_checkpointing": _enable_checkpointing,
    "multiple_checkpoints": _multiple_checkpoints,
    "log_every": _log_every,
    "grad_accumulation_steps": _none_is_the_default("grad_accumulation_steps"),
    "dataloader_num_workers": _none_is_the_default("dataloader_num_workers"),
    "sampler_train": _renamed("sampler"),
    "sampler_val": _renamed("val_sampler"),
    "batch_sampler_train": _renamed("batch_sampler"),
    "batch_sampler_val": _renamed("val_batch_sampler"),
    "collate_fn_train": _collate_fn_train,
    "collate_fn_val": _renamed("val_collate_fn"),
    "safe_serialization": _built_in("models are always saved as safetensors"),
    "safe_mode": _built_in("the model always runs through its DDP/FSDP/DeepSpeed wrapper"),
    "train_loss_metric_name": _built_in("the training loss is logged as train/loss"),
    "val_loss_metric_name": _built_in("each validation set's loss is logged as <set>/loss"),
    "monitor": _monitor,
    "callback": _callback,
    "prepare_batch": _built_in("batches are not cast; Accelerate's mixed precision applies"),
    "safe_steps": _built_in("a step that runs out of memory is not retried"),
    "destroy_after_training": _built_in(
        "fit leaves the process group to Accelerate, so several fits run in one script"
    ),
    "enable_prepare_logging": _built_in("accmt 2 does not silence DeepSpeed's logging"),
    "inference_mode": _built_in("evaluation runs under torch.no_grad"),
    "track_with": _track_with,
}


def translate_1x_options(
    args: Sequence[Any], options: Mapping[str, Any], *, stacklevel: int = 1
) -> dict[str, Any]:
    """The 2.x Trainer options for ``Trainer(hps_config, model_path, *args, **options)``.

    ``args`` are positional options after ``model_path``, in accmt 1.9.5.1's order.
    DeprecationWarnings are attributed ``stacklevel`` frames above the caller (1: the code that
    called the function that calls this one, such as the program that called the Trainer).
    """
    given = dict(options)
    messages = _positional(args, given)
    result = {
        name: value
        for name, value in given.items()
        if name not in _RULES and name not in TRACKER_PASS_THROUGHS
    }
    chosen_by: dict[str, str] = {name: name for name in result}
    for name, value in given.items():
        rule = _RULES.get(name)
        if rule is None:
            continue
        translation = rule(value, given)
        if translation.warning is not None:
            messages.append(f"Trainer({name}=...) {translation.warning}")
        for key, new in translation.options.items():
            if key in chosen_by and chosen_by[key] != name and not translation.overrides:
                raise TrainerConfigError(
                    f"Trainer({name}=...) and Trainer({chosen_by[key]}=...) both set {key}: "
                    f"give only {key}=..."
                )
            result[key] = new
            chosen_by[key] = name
    messages += _tracker_pass_throughs(given, result)
    for message in messages:
        # Frames: this function, its caller (the Trainer), then the program.
        warnings.warn(message, DeprecationWarning, stacklevel=stacklevel + 2)
    return result


def _positional(args: Sequence[Any], given: dict[str, Any]) -> list[str]:
    """Put the positional options into ``given`` by 1.x's order; the warning to give."""
    if not args:
        return []
    if len(args) > len(ONE_X_POSITIONAL):
        raise TypeError(
            f"Trainer() takes at most {len(ONE_X_POSITIONAL) + 2} positional arguments "
            f"({len(args) + 2} given)"
        )
    names = ONE_X_POSITIONAL[: len(args)]
    twice = [name for name in names if name in given]
    if twice:
        raise TypeError(f"Trainer() got multiple values for argument {twice[0]!r}")
    given.update(zip(names, args, strict=True))
    keywords = ", ".join(f"{name}=..." for name in names)
    return [f"Trainer options after model_path are keyword-only in accmt 2: write {keywords}"]


def _tracker_pass_throughs(given: Mapping[str, Any], result: dict[str, Any]) -> list[str]:
    """Put 1.x's MLflow pass-throughs into ``tracker_init_kwargs``; the warnings to give."""
    passed = {name: given[name] for name in TRACKER_PASS_THROUGHS if name in given}
    if not passed:
        return []
    if "tracker_init_kwargs" in given:
        raise TrainerConfigError(
            f"Trainer({', '.join(passed)}=...) and Trainer(tracker_init_kwargs=...) both give "
            "the tracker's arguments: give only tracker_init_kwargs"
        )
    result["tracker_init_kwargs"] = {"mlflow": passed}
    return [
        f"Trainer({name}=...) is accmt 1.x's pass-through to MLflow: use "
        f"Trainer(tracker_init_kwargs={{'mlflow': {{'{name}': ...}}}})"
        for name in passed
    ]
