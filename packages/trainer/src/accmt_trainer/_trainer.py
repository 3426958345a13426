"""The Trainer, a facade: its options, checked once into the frozen records that ``fit`` and
``evaluate`` / ``predict`` are handed, and methods that delegate. Nothing below names it."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from torch.utils.data import Dataset, Sampler

if TYPE_CHECKING:
    import torch
    from accelerate import Accelerator
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler

from accmt_callbacks import Callback, CallbackHandler
from accmt_state import TrainingState

from ._module import (
    AcceleratorModule,
    RunHandle,
    Stepper,
    check_module,
    trainer_bound,
    weak_log,
)
from .checkpointing import (
    Checkpointable,
    CheckpointOptions,
    SavingRule,
    check_checkpointable,
    parse_rule,
)
from .config import HyperParameters, Monitor, options_of, refuses_former_options
from .data import LoaderOptions, TrainData, named_sets, training_data
from .evaluation import EvaluationOptions, Extra, MetricsOption, Predicate
from .fit import (
    BestModelOptions,
    Fit,
    FitOptions,
    LoopOptions,
    NonFinitePolicy,
    PreparedRun,
    StepOptions,
)
from .inference import InferenceOptions, Weights, evaluate, predict
from .runtime import (
    AcceleratorOptions,
    LoggingOptions,
    LogWith,
    ProcessGroupScope,
    log_artifact,
)


class Trainer:
    """Train an :class:`AcceleratorModule` on one CPU, one GPU or many processes
    (:meth:`fit`); then :meth:`evaluate` it and :meth:`predict` with it.

    The options (``docs/guides/trainer.md``) are checked here into one options record per
    owner of the run: ``accelerator_options``, ``loader_options``, ``step_options``, ... Each
    record declares its options as fields named like these keywords, with the same defaults
    (``tests/trainer/test_options.py`` holds them together). Those after ``model_path`` are
    keyword-only; a former name is refused with a TrainerConfigError naming the 2.x spelling
    (``accmt``'s Trainer takes it)."""

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
        shuffle_train: bool | None = None,
        sampler: Sampler[Any] | None = None,
        batch_sampler: Sampler[list[Any]] | None = None,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        val_sampler: Sampler[Any] | None = None,
        val_batch_sampler: Sampler[list[Any]] | None = None,
        val_collate_fn: Callable[[list[Any]], Any] | None = None,
        batch_device_placement: bool = True,
        dispatch_streams: bool = False,
        seed: int | None = None,
        progress_bar: bool = True,
        checkpoint_every: str | None = "epoch",
        resume: bool | int | None = None,
        max_checkpoints: int | None = None,
        disable_model_saving: bool = False,
        max_shard_size: int | str = "10GB",
        patience: int | Mapping[str, int] | None = None,
        save_merged: bool = False,
        handle_signals: bool = True,
        requeue_signal: str | int | None = "SIGUSR1",
        auto_requeue: bool = True,
        sanity_check: bool = True,
        on_nonfinite_loss: NonFinitePolicy = "error",
        checkpoint_async: bool = False,
        ema_decay: float | None = None,
        profile_steps: tuple[int, int] | None = None,
    ) -> None:
        # Every argument by its name: each options record takes the options it declares.
        given: dict[str, Any] = dict(locals())
        self.hps = given["hps"] = HyperParameters.from_config(hps_config)
        self.model_path = given["model_path"] = Path(model_path)
        self.accelerator_options: AcceleratorOptions = options_of(AcceleratorOptions, given)
        self.loader_options: LoaderOptions = options_of(LoaderOptions, given)
        self.step_options: StepOptions = options_of(StepOptions, given)
        self.evaluation_options: EvaluationOptions = options_of(EvaluationOptions, given)
        self.loop_options: LoopOptions = options_of(LoopOptions, given)
        self.checkpoint_options: CheckpointOptions = options_of(CheckpointOptions, given)
        self.best_model_options: BestModelOptions = options_of(BestModelOptions, given)
        self.logging_options: LoggingOptions = options_of(LoggingOptions, given)
        records = {name: value for name, value in vars(self).items() if name.endswith("_options")}
        self.fit_options: FitOptions = options_of(FitOptions, {**given, **records})
        """What every :meth:`fit` is handed: the options above, made once."""
        self.inference_options = InferenceOptions(
            hps=self.hps,
            model_path=self.model_path,
            accelerator_options=self.accelerator_options,
            loader_options=self.loader_options,
            evaluation_options=self.evaluation_options,
            logging_options=self.logging_options,
        )
        """What :meth:`evaluate` and :meth:`predict` are handed, made once."""
        self.callbacks = CallbackHandler(callbacks)
        """The callbacks; they also hold the run's one stop request (:meth:`request_stop`)."""
        self.saving_rules: dict[str, SavingRule] = {}
        self.checkpointed_objects: list[Checkpointable] = []
        self.latest_fit: Fit | None = None
        """The objects of the latest :meth:`fit` (its accelerator, run, loop), or None."""

    @property
    def accelerator(self) -> Accelerator:
        """The latest fit's Accelerator."""
        return self._latest("accelerator").accelerator

    @property
    def model(self) -> torch.nn.Module:
        """The latest fit's model, as Accelerate prepared it."""
        return self._prepared_run("model").model

    @property
    def optimizer(self) -> Optimizer:
        """The latest fit's optimizer, as Accelerate prepared it."""
        return self._prepared_run("optimizer").optimizer

    @property
    def scheduler(self) -> LRScheduler | None:
        """The latest fit's scheduler, as Accelerate prepared it (None without one)."""
        return self._prepared_run("scheduler").scheduler

    @property
    def reported_names(self) -> dict[str, list[str]] | None:
        """The names each set reported in the latest fit's sanity check (set -> sorted names,
        the loss as ``"loss"``), for a callback's ``on_fit_start`` to check the names it will
        read; None before it, or without it."""
        return None if self.latest_fit is None else self.latest_fit.reported_names

    def _latest(self, name: str) -> Fit:
        if self.latest_fit is None:
            raise AttributeError(
                f"{type(self).__name__}.{name} exists once fit has prepared the run"
            )
        return self.latest_fit

    def _prepared_run(self, name: str) -> PreparedRun:
        run = self._latest(name).run
        if run is None:
            raise AttributeError(
                f"{type(self).__name__}.{name} exists once fit has prepared the run"
            )
        return run

    def averaged_weights(self) -> dict[str, torch.Tensor] | None:
        """The latest fit's exponential moving average of the weights (``ema_decay``), by the
        model's parameter names, of those that train (``model.load_state_dict(...,
        strict=False)`` takes it); None without one. The model itself keeps training's own
        weights."""
        fit = self.latest_fit
        return None if fit is None or fit.average is None else fit.average.weights()

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
        evaluating on ``val_dataset`` (one dataset, or a dict of named ones); returns the final
        :class:`TrainingState`. It locks ``model_path``: a second run there fails at once."""
        check_module(module)
        datasets = (training_data(train_dataset, self.hps.max_steps), named_sets(val_dataset))
        with ProcessGroupScope() as process_group:  # torn down only if this fit made it
            self.latest_fit = Fit(
                self.fit_options,
                module,
                self.callbacks,
                saving_rules=self.saving_rules,
                checkpointed=self.checkpointed_objects,
                log=weak_log(self),
            )
            process_group.own(self.latest_fit.accelerator)
            with trainer_bound(module, self):
                return self.latest_fit.train(datasets, trainer=self)

    def evaluate(
        self,
        module: AcceleratorModule,
        data: Dataset[Any] | Mapping[str, Dataset[Any]],
        metrics: MetricsOption = None,
        weights: Weights = None,
    ) -> dict[str, Any]:
        """Evaluate ``module`` on ``data`` (a dataset, or a dict of named ones) through its
        ``test_step`` when it overrides one, else ``validation_step``, with ``metrics`` (by
        default the Trainer's). ``weights``, loaded into ``module.model``: a saving rule's name
        (its best model under ``model_path``), a saved folder or a checkpoint. On any number
        of processes each sample counts once. Returns ``{name: value}`` for one dataset (its
        key ``"test"``), ``{set: {name: value}}`` for a dict; logs them; fires no callback."""
        with trainer_bound(module, self):
            return evaluate(
                self.inference_options,
                module,
                data,
                metrics,
                weights,
                state=self.state,
                log=weak_log(self),
            )

    def predict(
        self,
        module: AcceleratorModule,
        data: Dataset[Any],
        *,
        weights: Weights = None,
        output_dir: str | os.PathLike[str] | None = None,
        max_shard_size: int | str = "1GB",
    ) -> Any:
        """``module.predict_step``'s outputs of every sample once, in dataset order, with their
        structure, on the CPU of every process; or, with ``output_dir``, written there in
        safetensors shards of ``max_shard_size`` (:func:`load_predictions`) and the folder
        returned. ``weights`` as in :meth:`evaluate`."""
        with trainer_bound(module, self):
            return predict(
                self.inference_options,
                module,
                data,
                weights,
                output_dir,
                max_shard_size,
                state=self.state,
                log=weak_log(self),
            )

    # An ExtendedAcceleratorModule's steps, also reachable here: the running fit's handle.

    def backward(self, loss: torch.Tensor) -> None:
        """Backward through Accelerate (scales the loss for accumulation and mixed precision)."""
        self._steps().backward(loss)

    def step_optimizer(self, optimizer: Optimizer | None = None) -> None:
        """Clip if asked, then step ``optimizer`` (the run's by default) at a window's end."""
        self._steps().step_optimizer(optimizer)

    def step_scheduler(self, scheduler: LRScheduler | None = None) -> None:
        """Step ``scheduler`` (the run's by default) when the optimizer stepped."""
        self._steps().step_scheduler(scheduler)

    def zero_grad(self, optimizer: Optimizer | None = None) -> None:
        """Zero the gradients of ``optimizer`` (the run's by default) once they were used."""
        self._steps().zero_grad(optimizer)

    def _steps(self) -> Stepper:
        handle = None if self.latest_fit is None else self.latest_fit.handle
        return RunHandle(None, self.log).steps() if handle is None else handle.steps()

    def log(self, values: Mapping[str, float], step: int | None = None) -> None:
        """Send ``values`` to the trackers (main process), at the current global step."""
        if self.logging_options.log_with and self.latest_fit is not None:
            at = self.state.global_step if step is None else step
            self.latest_fit.send(values, at)

    def log_artifact(self, path: str | os.PathLike[str]) -> None:
        """Log the file or folder ``path`` (main process) to the trackers that store artifacts
        (MLflow), else copy it into ``logging_dir/<track_name>/artifacts/``; during ``fit``."""
        fit = self.latest_fit
        accelerator = None if fit is None else fit.accelerator
        log_artifact(accelerator, Path(path), self.logging_options.artifacts)

    def request_stop(self, reason: str) -> None:
        """End the run after this optimizer step, checkpointed and unfinished, through the
        callbacks' one stop request (patience, signals, pruning use it too)."""
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
        """Save and restore ``objects`` (with ``state_dict()`` and ``load_state_dict(state)``
        of tensors and plain values: safetensors and JSON, no code) with every checkpoint."""
        for obj in objects:
            check_checkpointable(obj)
        self.checkpointed_objects.extend(objects)
