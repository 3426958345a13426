"""The Trainer: the run's options, and ``fit``, which hands the run to its owners."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from accelerate.utils import set_seed
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler
from torch.utils.data import Dataset, Sampler

from accmt_callbacks import Callback, CallbackHandler
from accmt_state import TrainingState

from ._best_models import check_shard_size, user_callbacks
from ._checkpoint_parts import Checkpointable, check_checkpointable
from ._checkpoint_schedule import parse_checkpoint_every
from ._checkpoints import Checkpoints
from ._consolidation import Extra, Predicate, make_consolidation
from ._errors import TrainerConfigError
from ._evaluation import EvaluationOptions
from ._folder_lock import FolderLock
from ._hyperparameters import HyperParameters
from ._legacy import accepts_1x_options
from ._loop import TrainingLoop
from ._manifest import run_facts
from ._module import AcceleratorModule
from ._monitor import Monitor
from ._nonfinite import NONFINITE_POLICIES, NonFinitePolicy
from ._optimizer_step import OptimizerStep, StepOptions
from ._option_checks import (
    check_mapping,
    check_patience,
    clip_value,
    log_every_value,
    one_of,
    positive_int,
)
from ._owners import build_loop
from ._process_group import ProcessGroupScope
from ._sanity_check import check_datasets, check_module, check_names, check_writable
from ._saving_rules import SavingRule, parse_rule
from ._setup import (
    AcceleratorOptions,
    GradientCheckpointing,
    LoaderOptions,
    MetricsOption,
    check_compile_kwargs,
    make_accelerator,
    named_sets,
    prepare_run,
)
from ._signals import stop_on_signals
from ._stages import Stages, TrainData, training_data
from ._trackers import LogWith, check_tracker_kwargs, log_artifact, resolve_trackers, start_trackers

logger = logging.getLogger("accmt_trainer")
MIXED_PRECISION = (None, "no", "fp16", "bf16", "fp8")


class Trainer:
    """Train an :class:`AcceleratorModule` on one CPU, one GPU or many processes.

    The run is configured here; :meth:`fit` runs it. The options are documented in the
    Trainer guide (``docs/guides/trainer.md``); in short: ``hps_config`` (HyperParameters, a
    dict or a YAML path), ``model_path`` (the run's folder: ``logs/``, ``checkpoints/``, one
    folder per best-model rule), accumulation and clipping, evaluation every N steps or
    epochs, logging and trackers, metrics, callbacks, mixed precision, the DataLoader options
    of accmt 1.x, ``seed``, checkpoints and resume, best models and ``patience``, signals,
    ``sanity_check`` (one validation batch per set and every name checked before the first
    step) and ``on_nonfinite_loss`` (``"error"``, ``"warn"`` or ``"skip"``).

    Options after ``model_path`` are keyword-only. accmt 1.x's calls work too: its positional
    options and its keywords are translated, each with one DeprecationWarning naming the 2.x
    spelling (see the migration page).
    """

    @accepts_1x_options
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
        self.track_name = track_name or self.model_path.name
        self.grad_accumulation_steps = positive_int(
            "grad_accumulation_steps", grad_accumulation_steps
        )
        self.clip_grad = clip_value(clip_grad)
        self.step_options = StepOptions(
            set_to_none=set_to_none, reset_optimizer_every_n_steps=reset_optimizer_every_n_steps,
            cleanup_cache_every_n_steps=cleanup_cache_every_n_steps,
        )  # fmt: skip
        self.gradient_checkpointing = (
            GradientCheckpointing(gradient_checkpointing_kwargs) if gradient_checkpointing else None
        )
        self.evaluate_every_n_steps = positive_int(
            "evaluate_every_n_steps", evaluate_every_n_steps, allow_none=True
        )
        self.evaluate_every_n_epochs = positive_int(
            "evaluate_every_n_epochs", evaluate_every_n_epochs
        )
        self.eval_when_start, self.eval_when_finish = eval_when_start, eval_when_finish
        self.log_every = log_every_value(log_every)
        self.log_with = resolve_trackers(log_with)
        self.logging_dir = Path(logging_dir) if logging_dir else self.model_path / "logs"
        self.tracker_config = check_mapping("additional_tracker_config", additional_tracker_config)
        self.tracker_init_kwargs = check_tracker_kwargs(tracker_init_kwargs, self.log_with)
        self.monitor = monitor or Monitor()
        self.metrics = metrics
        self.evaluation_options = EvaluationOptions(
            module_hooks=module_hooks,
            consolidation=make_consolidation(
                consolidate_metrics, additional_metric_consolidation, report_all_metrics
            ),
        )
        self.callbacks = CallbackHandler(callbacks)
        """The callbacks; ``fit`` adds one per rule with a ``patience``, and takes any added
        here before it."""
        self.mixed_precision = one_of("mixed_precision", mixed_precision, MIXED_PRECISION)
        self.compile, self.cpu, self.seed = compile, cpu, seed
        self.compile_kwargs = check_compile_kwargs(compile_kwargs)
        self.loader_options = LoaderOptions(
            num_workers=dataloader_num_workers, pin_memory=dataloader_pin_memory,
            drop_last=dataloader_drop_last, shuffle_train=shuffle_train, sampler=sampler,
            batch_sampler=batch_sampler, collate_fn=collate_fn, val_sampler=val_sampler,
            val_batch_sampler=val_batch_sampler, val_collate_fn=val_collate_fn,
            device_placement=batch_device_placement,
        )  # fmt: skip
        self.progress_bar = progress_bar
        self.state = TrainingState()
        self.checkpoint_schedule = parse_checkpoint_every(checkpoint_every)
        if resume is not None and not isinstance(resume, (bool, int)):
            raise TrainerConfigError(f"Trainer(resume=...): expected None, True, False or a "
                                     f"checkpoint index, got {resume!r}")  # fmt: skip
        self.resume = resume
        self.max_checkpoints = positive_int("max_checkpoints", max_checkpoints, allow_none=True)
        self.disable_model_saving = disable_model_saving
        self.max_shard_size = check_shard_size(max_shard_size)
        self.patience = check_patience(patience)
        self.handle_signals = handle_signals
        self.sanity_check = sanity_check
        self.on_nonfinite_loss = one_of("on_nonfinite_loss", on_nonfinite_loss, NONFINITE_POLICIES)
        self.checkpoint_async = checkpoint_async
        self.saving_rules: dict[str, SavingRule] = {}
        self.checkpointed_objects: list[Checkpointable] = []
        self._optimizer_step: OptimizerStep | None = None

    # --------------------------------------------------------------------------- public

    def fit(
        self,
        module: AcceleratorModule,
        train_dataset: TrainData,
        val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]] | None = None,
    ) -> TrainingState:
        """Train ``module`` on ``train_dataset``, evaluating on ``val_dataset`` (one dataset,
        or a dict of named datasets). Returns the final :class:`TrainingState`. Stages (a
        curriculum, or a list of ``(max_step, dataset)``) train one after another.

        The run holds an exclusive lock on ``model_path`` until it returns: a second run on
        the same folder fails at once, naming the holder."""
        check_module(module)
        train_data = training_data(train_dataset, self.hps.max_steps)
        with ProcessGroupScope() as process_group:  # torn down if this fit made it
            self.accelerator = process_group.own(make_accelerator(self.accelerator_options()))
            if self.seed is not None:
                set_seed(self.seed)
            check_writable(self._folders())
            with FolderLock(self.model_path, self.accelerator):
                return self._fit(module, (train_data, named_sets(val_dataset)))

    def _fit(
        self, module: AcceleratorModule, datasets: tuple[Dataset[Any] | Stages, dict[str, Any]]
    ) -> TrainingState:
        check_datasets(*datasets)
        accelerator = self.accelerator
        run = prepare_run(
            accelerator, module, self.hps, datasets, self.loader_options, self.metrics,
            self.gradient_checkpointing,
        )  # fmt: skip
        self.model, self.optimizer, self.scheduler = run.model, run.optimizer, run.scheduler
        checkpoints = Checkpoints(
            self.model_path / "checkpoints", accelerator, max_checkpoints=self.max_checkpoints,
            objects=self.checkpointed_objects, background=self.checkpoint_async,
        )  # fmt: skip
        facts = run_facts(run, self.hps.train_batch_size)
        resuming = checkpoints.find(self.resume, facts) if self._resumes() else None
        state, process_state = checkpoints.load(resuming, facts) if resuming else (None, None)
        state = state or TrainingState()
        loop = build_loop(self, run, module, state, checkpoints)
        self.state, self.callbacks = state, loop.callbacks
        self._optimizer_step = loop.owners.optimizer_step
        if resuming is not None and process_state is not None:
            checkpoints.load_rest(resuming, self.callbacks)
            loop.restore(process_state)
            if loop.reached_end():
                # Nothing to train; the model is left as the run finished it.
                checkpoints.load_accelerate(resuming)
                done = (self.model_path, state.epoch, state.global_step)
                logger.warning("%s already finished (epoch %d, step %d): nothing to do", *done)
                return state
        if self.sanity_check:
            self._check_names(loop)
        if self.log_with:
            config = {**self.hps.to_dict(), **self.tracker_config}
            start_trackers(accelerator, self.track_name, config, self.tracker_init_kwargs)
        return self._train(loop, resuming)

    def log(self, values: Mapping[str, float], step: int | None = None) -> None:
        """Send ``values`` to the trackers (main process), at the current global step."""
        if self.log_with:
            at = self.state.global_step if step is None else step
            self.accelerator.log(dict(values), step=at)

    def log_artifact(self, path: str | os.PathLike[str]) -> None:
        """Log the file ``path`` as an artifact of the run (accmt 1.x), on the main process:
        to each tracker that stores artifacts (MLflow); with none (TensorBoard), it is copied
        into ``logging_dir/<track_name>/artifacts/``. Trackers run while ``fit`` does."""
        log_artifact(getattr(self, "accelerator", None), Path(path), self._artifacts())

    def log_artifacts(self, folder: str | os.PathLike[str]) -> None:
        """Log every file of ``folder`` as artifacts of the run, as :meth:`log_artifact`."""
        log_artifact(getattr(self, "accelerator", None), Path(folder), self._artifacts())

    def request_stop(self, reason: str) -> None:
        """Ask the run to end after the current optimizer step: it checkpoints, fires
        ``on_fit_end`` and stays unfinished, so that ``fit`` again continues it. Patience,
        callbacks, SIGTERM/SIGINT and ``should_stop = True`` all come here; the first
        reason is kept in ``callbacks.stop_reason``."""
        if not self.callbacks.should_stop:
            self.callbacks.stop_reason = reason
        self.callbacks.should_stop = True

    @property
    def should_stop(self) -> bool:
        """True once a stop was requested. Setting it to True requests one (accmt 1.x)."""
        return self.callbacks.should_stop

    @should_stop.setter
    def should_stop(self, value: bool) -> None:
        if value:
            self.request_stop("should_stop was set")
        else:
            self.callbacks.should_stop, self.callbacks.stop_reason = False, ""

    stop_requested = should_stop

    def register_model_saving(
        self, rule: str, saving_above: float | None = None, saving_below: float | None = None
    ) -> None:
        """Save the best model by ``rule`` under ``model_path/<rule>`` (``/`` becomes
        ``__``), as safetensors with the state and the values that earned it.

        Rules: ``"best_valid_loss"``, ``"best_train_loss"``, a metric (``"accuracy"``,
        averaged over the validation sets), a metric on one set (``"accuracy@set_a"``), or
        several joined by ``/`` which must all improve (``"accuracy@set_a/f1@set_b"``).
        ``saving_above`` / ``saving_below`` save only past that value.
        """
        parsed = parse_rule(rule, saving_above, saving_below)
        self.saving_rules[parsed.name] = parsed

    def register_for_checkpointing(self, *objects: Checkpointable) -> None:
        """Save and restore ``objects`` with every checkpoint, in this order.

        Each must offer ``state_dict()`` and ``load_state_dict(state)``, the state being
        tensors and plain values (dicts with string keys, lists, numbers, strings, booleans,
        None): it is written as safetensors and JSON, so loading it runs no code.
        """
        for obj in objects:
            check_checkpointable(obj)
        self.checkpointed_objects.extend(objects)

    # The steps of an ExtendedAcceleratorModule, through the run's optimizer step.

    def backward(self, loss: torch.Tensor) -> None:
        """Backward through Accelerate (scales the loss for accumulation and mixed precision)."""
        self._stepper().backward(loss)

    def step_optimizer(self, optimizer: Optimizer | None = None) -> None:
        """Clip gradients if asked, then step ``optimizer`` (the run's by default), on the batch
        that ends an accumulation window."""
        self._stepper().step_optimizer(optimizer)

    def step_scheduler(self, scheduler: LRScheduler | None = None) -> None:
        """Step ``scheduler`` (the run's by default) when the optimizer stepped."""
        self._stepper().step_scheduler(scheduler)

    def zero_grad(self, optimizer: Optimizer | None = None) -> None:
        """Zero the gradients of ``optimizer`` (the run's by default) once they were used."""
        self._stepper().zero_grad(optimizer)

    # -------------------------------------------------------------------------- set up

    def _stepper(self) -> OptimizerStep:
        if self._optimizer_step is None:
            raise RuntimeError("the optimizer step exists only while Trainer.fit runs")
        return self._optimizer_step

    def accelerator_options(self) -> AcceleratorOptions:
        """What this run's Accelerator is made with, from the options."""
        return AcceleratorOptions(
            cpu=self.cpu,
            mixed_precision=self.mixed_precision,
            grad_accumulation_steps=self.grad_accumulation_steps,
            seed=self.seed,
            log_with=self.log_with,
            logging_dir=self.logging_dir,
            compile=self.compile,
            compile_kwargs=self.compile_kwargs,
        )

    def _artifacts(self) -> Path:
        return self.logging_dir / self.track_name / "artifacts"

    def _folders(self) -> list[tuple[str, Path]]:
        folders = [("model_path", self.model_path)]
        return [*folders, ("logging_dir", self.logging_dir)] if self.log_with else folders

    def _resumes(self) -> bool:
        return self.checkpoint_schedule is not None or self.resume is not None

    def _check_names(self, loop: TrainingLoop) -> None:
        reported = loop.owners.evaluation.sanity_check()
        check_names(reported, loop.owners.best_models.rules, user_callbacks(self.callbacks))

    def _train(self, loop: TrainingLoop, resuming: Path | None) -> TrainingState:
        checkpoints = loop.owners.checkpoints
        try:
            with stop_on_signals(self.request_stop, self.handle_signals):
                loop.fit(resuming)
            checkpoints.wait()
        except BaseException as error:
            with contextlib.suppress(Exception):
                checkpoints.wait()  # the write in flight ends before the error leaves fit
            self.callbacks.dispatch_exception(error)
            raise
        finally:
            loop.owners.progress.close()
            self._optimizer_step = None
        return loop.state
