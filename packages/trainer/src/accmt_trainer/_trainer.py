"""The Trainer: a run's options, checked when it is made, and ``fit``, which hands a run to
its owners (see ``_fit``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler
from torch.utils.data import Dataset, Sampler

from accmt_callbacks import Callback, CallbackHandler
from accmt_state import TrainingState

from ._accelerator import AcceleratorOptions, GradientCheckpointing
from ._best_models import BestModelOptions
from ._checkpoint_parts import Checkpointable, check_checkpointable
from ._checkpoint_schedule import parse_checkpoint_every
from ._checkpoints import CheckpointOptions
from ._consolidation import Extra, Predicate, make_consolidation
from ._evaluation import EvaluationOptions
from ._fit import Fit, OfLatestFit
from ._former_options import refuses_former_options
from ._hyperparameters import HyperParameters
from ._module import AcceleratorModule
from ._monitor import Monitor
from ._nonfinite import NonFinitePolicy
from ._optimizer_step import OptimizerStep, StepOptions
from ._process_group import ProcessGroupScope
from ._sanity_check import check_module
from ._saving_rules import SavingRule, parse_rule
from ._setup import LoaderOptions, MetricsOption, named_sets
from ._stages import TrainData, training_data
from ._trackers import LoggingOptions, LogWith, log_artifact


class Trainer:
    """Train an :class:`AcceleratorModule` on one CPU, one GPU or many processes.

    The options are documented in the Trainer guide (``docs/guides/trainer.md``). Each owner
    of the run gets its own options object, checked here (``accelerator_options``,
    ``loader_options``, ``step_options``, ``evaluation_options``, ``checkpoint_options``,
    ``best_model_options``, ``logging_options``); :meth:`fit` runs it. Options after
    ``model_path`` are keyword-only; a former option name is refused with a
    :class:`TrainerConfigError` naming what to write instead (``accmt``'s Trainer takes it).
    """

    @refuses_former_options
    def __init__(
        self,
        hps_config: HyperParameters | Mapping[str, Any] | str | os.PathLike[str],
        model_path: str | os.PathLike[str],
        *,
        track_name: str | None = None,
        grad_accumulation_steps: int = 1,
        clip_grad: float | None = None,
        set_to_none: bool = True,
        reset_optimizer_every_n_steps: int | None = None,
        cleanup_cache_every_n_steps: int | None = None,
        gradient_checkpointing: bool = False,
        gradient_checkpointing_kwargs: Mapping[str, Any] | None = None,
        evaluate_every_n_steps: int | None = None,
        evaluate_every_n_epochs: int = 1,
        eval_when_start: bool = False,
        eval_when_finish: bool = True,
        module_hooks: bool = True,
        log_every: int | Literal["epoch"] = 1,
        log_with: LogWith = "auto",
        logging_dir: str | os.PathLike[str] | None = None,
        additional_tracker_config: Mapping[str, Any] | None = None,
        tracker_init_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        monitor: Monitor | None = None,
        metrics: MetricsOption = None,
        consolidate_metrics: Mapping[str, Predicate] | None = None,
        additional_metric_consolidation: Extra | None = None,
        report_all_metrics: bool = False,
        callbacks: Sequence[Callback] = (),
        mixed_precision: str | None = None,
        compile: bool = False,
        compile_kwargs: Mapping[str, Any] | None = None,
        cpu: bool | None = None,
        dataloader_num_workers: int = 0,
        dataloader_pin_memory: bool = False,
        dataloader_drop_last: bool = False,
        shuffle_train: bool = True,
        sampler: Sampler[Any] | None = None,
        batch_sampler: Sampler[list[Any]] | None = None,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        val_sampler: Sampler[Any] | None = None,
        val_batch_sampler: Sampler[list[Any]] | None = None,
        val_collate_fn: Callable[[list[Any]], Any] | None = None,
        batch_device_placement: bool = True,
        seed: int | None = None,
        progress_bar: bool = True,
        checkpoint_every: str | None = "epoch",
        resume: bool | int | None = None,
        max_checkpoints: int | None = None,
        disable_model_saving: bool = False,
        max_shard_size: int | str = "10GB",
        patience: int | Mapping[str, int] | None = None,
        handle_signals: bool = True,
        sanity_check: bool = True,
        on_nonfinite_loss: NonFinitePolicy = "error",
        checkpoint_async: bool = False,
    ) -> None:
        self.hps = HyperParameters.from_config(hps_config)
        self.model_path = Path(model_path)
        self.accelerator_options = AcceleratorOptions(
            cpu=cpu,
            mixed_precision=mixed_precision,
            grad_accumulation_steps=grad_accumulation_steps,
            seed=seed,
            compile=compile,
            compile_kwargs=compile_kwargs,
            gradient_checkpointing=(
                GradientCheckpointing(gradient_checkpointing_kwargs)
                if gradient_checkpointing
                else None
            ),
        )
        self.loader_options = LoaderOptions(
            num_workers=dataloader_num_workers,
            pin_memory=dataloader_pin_memory,
            drop_last=dataloader_drop_last,
            shuffle_train=shuffle_train,
            sampler=sampler,
            batch_sampler=batch_sampler,
            collate_fn=collate_fn,
            val_sampler=val_sampler,
            val_batch_sampler=val_batch_sampler,
            val_collate_fn=val_collate_fn,
            device_placement=batch_device_placement,
        )
        self.step_options = StepOptions(
            clip_grad=clip_grad,
            set_to_none=set_to_none,
            reset_optimizer_every_n_steps=reset_optimizer_every_n_steps,
            cleanup_cache_every_n_steps=cleanup_cache_every_n_steps,
            on_nonfinite_loss=on_nonfinite_loss,
        )
        self.evaluation_options = EvaluationOptions(
            evaluate_every_n_steps=evaluate_every_n_steps,
            evaluate_every_n_epochs=evaluate_every_n_epochs,
            eval_when_start=eval_when_start,
            eval_when_finish=eval_when_finish,
            module_hooks=module_hooks,
            metrics=metrics,
            consolidation=make_consolidation(
                consolidate_metrics, additional_metric_consolidation, report_all_metrics
            ),
        )
        self.checkpoint_options = CheckpointOptions(
            schedule=parse_checkpoint_every(checkpoint_every),
            resume=resume,
            max_checkpoints=max_checkpoints,
            checkpoint_async=checkpoint_async,
        )
        self.best_model_options = BestModelOptions(
            disable_model_saving=disable_model_saving,
            max_shard_size=max_shard_size,
            patience=patience,
        )
        self.logging_options = LoggingOptions(
            track_name=track_name or self.model_path.name,
            logging_dir=Path(logging_dir) if logging_dir else self.model_path / "logs",
            log_with=log_with,
            log_every=log_every,
            additional_tracker_config=additional_tracker_config,
            tracker_init_kwargs=tracker_init_kwargs,
            monitor=monitor or Monitor(),
            progress_bar=progress_bar,
        )
        self.callbacks = CallbackHandler(callbacks)
        """The callbacks; they also hold the run's one stop request (:meth:`request_stop`)."""
        self.handle_signals, self.sanity_check = handle_signals, sanity_check
        self.saving_rules: dict[str, SavingRule] = {}
        self.checkpointed_objects: list[Checkpointable] = []
        self.latest_fit: Fit | None = None
        """The objects of the latest :meth:`fit` (its accelerator, run, loop), or None."""

    accelerator = OfLatestFit()
    model = OfLatestFit()
    optimizer = OfLatestFit()
    scheduler = OfLatestFit()

    @property
    def state(self) -> TrainingState:
        """The latest fit's TrainingState (a fresh one before any fit)."""
        return TrainingState() if self.latest_fit is None else self.latest_fit.state

    def fit(
        self,
        module: AcceleratorModule,
        train_dataset: TrainData,
        val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]] | None = None,
    ) -> TrainingState:
        """Train ``module`` on ``train_dataset`` (a dataset, or a curriculum's stages),
        evaluating on ``val_dataset`` (one dataset, or a dict of named datasets). Returns the
        final :class:`TrainingState`. The run holds an exclusive lock on ``model_path`` until
        it returns: a second run on the same folder fails at once, naming the holder."""
        check_module(module)
        datasets = (training_data(train_dataset, self.hps.max_steps), named_sets(val_dataset))
        with ProcessGroupScope() as process_group:  # torn down only if this fit made it
            self.latest_fit = Fit(self, module)
            process_group.own(self.latest_fit.accelerator)
            return self.latest_fit.train(datasets)

    def log(self, values: Mapping[str, float], step: int | None = None) -> None:
        """Send ``values`` to the trackers (main process), at the current global step."""
        if self.logging_options.log_with and self.latest_fit is not None:
            at = self.state.global_step if step is None else step
            self.latest_fit.accelerator.log(dict(values), step=at)

    def log_artifact(self, path: str | os.PathLike[str]) -> None:
        """Log the file or folder ``path`` as an artifact of the run, on the main process: to
        each tracker that stores artifacts (MLflow); with none (TensorBoard), it is copied into
        ``logging_dir/<track_name>/artifacts/``. Trackers run while ``fit`` does."""
        fit = self.latest_fit
        accelerator = None if fit is None else fit.accelerator
        log_artifact(accelerator, Path(path), self.logging_options.artifacts)

    log_artifacts = log_artifact

    def request_stop(self, reason: str) -> None:
        """Ask the run to end after the current optimizer step: it checkpoints, fires
        ``on_fit_end`` and stays unfinished, so that ``fit`` again continues it. Callbacks,
        patience, SIGTERM/SIGINT and a search's pruning all ask through the callbacks' one
        stop request; the first reason is kept in ``callbacks.stop_reason``."""
        self.callbacks.request_stop(reason)

    @property
    def should_stop(self) -> bool:
        """True once a stop was requested. Setting it to True requests one."""
        return self.callbacks.should_stop

    @should_stop.setter
    def should_stop(self, value: bool) -> None:
        if value:
            self.request_stop("should_stop was set")
        else:
            self.callbacks.clear_stop()

    def register_model_saving(
        self, rule: str, saving_above: float | None = None, saving_below: float | None = None
    ) -> None:
        """Save the best model by ``rule`` under ``model_path/<rule>`` (``/`` becomes ``__``),
        as safetensors with the state and the values that earned it. Rules:
        ``"best_valid_loss"``, ``"best_train_loss"``, a metric (averaged over the validation
        sets), a metric on one set (``"accuracy@set_a"``), or several joined by ``/`` which must
        all improve. ``saving_above`` / ``saving_below`` save only past that value."""
        parsed = parse_rule(rule, saving_above, saving_below)
        self.saving_rules[parsed.name] = parsed

    def register_for_checkpointing(self, *objects: Checkpointable) -> None:
        """Save and restore ``objects`` with every checkpoint, in this order. Each offers
        ``state_dict()`` and ``load_state_dict(state)``, the state being tensors and plain
        values (written as safetensors and JSON, so loading it runs no code)."""
        for obj in objects:
            check_checkpointable(obj)
        self.checkpointed_objects.extend(objects)

    # An ExtendedAcceleratorModule's steps, through the run's optimizer step.

    def backward(self, loss: torch.Tensor) -> None:
        """Backward through Accelerate (scales the loss for accumulation and mixed precision)."""
        self._stepper().backward(loss)

    def step_optimizer(self, optimizer: Optimizer | None = None) -> None:
        """Clip if asked, then step ``optimizer`` (the run's by default) at a window's end."""
        self._stepper().step_optimizer(optimizer)

    def step_scheduler(self, scheduler: LRScheduler | None = None) -> None:
        """Step ``scheduler`` (the run's by default) when the optimizer stepped."""
        self._stepper().step_scheduler(scheduler)

    def zero_grad(self, optimizer: Optimizer | None = None) -> None:
        """Zero the gradients of ``optimizer`` (the run's by default) once they were used."""
        self._stepper().zero_grad(optimizer)

    def _stepper(self) -> OptimizerStep:
        loop = None if self.latest_fit is None else self.latest_fit.loop
        if loop is None:
            raise RuntimeError("the optimizer step exists only while Trainer.fit runs")
        return loop.owners.optimizer_step
