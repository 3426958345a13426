"""The Trainer: drives an AcceleratorModule through Accelerate."""

from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.data_loader import DataLoaderShard
from accelerate.utils import DataLoaderConfiguration, set_seed
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler
from torch.utils.data import DataLoader, Dataset, Sampler

from accmt_callbacks import Callback, CallbackHandler
from accmt_decorators import current_process
from accmt_metrics import Metric
from accmt_state import TrainingState, write_json

from ._checkpoints import (
    CheckpointError,
    Checkpoints,
    check_compatible,
    package_versions,
    replace_folder,
)
from ._hyperparameters import HyperParameters
from ._module import AcceleratorModule, ExtendedAcceleratorModule, overrides
from ._monitor import Monitor
from ._options import TrainerConfigError, clip_value, one_of, positive_int
from ._saving import SavingRule, parse_rule
from ._schedule import Unit, parse_checkpoint_every
from ._tracking import LogWith, ProgressBar, flatten, resolve_trackers

logger = logging.getLogger("accmt_trainer")

DEFAULT_SET = "validation"
_END = object()
_NO_CONTEXT = contextlib.nullcontext()
_set = object.__setattr__
MIXED_PRECISION = (None, "no", "fp16", "bf16", "fp8")


class Trainer:
    """Train an :class:`AcceleratorModule` on one CPU, one GPU or many processes.

    The run is configured here; :meth:`fit` runs it. Options:

    - ``hps_config``: :class:`HyperParameters`, a dict, or a YAML file in accmt 1.x's layout.
    - ``model_path``: the run's folder: ``logs/`` (unless ``logging_dir`` says otherwise),
      ``checkpoints/`` and one folder per best-model rule. ``track_name`` names the run for
      the trackers (the folder's name by default).
    - ``grad_accumulation_steps``: batches per optimizer step. Gradients are synchronised
      across processes only on the batch that steps, and a partial window at the end of an
      epoch is still applied.
    - ``clip_grad``: max gradient norm, or None.
    - ``evaluate_every_n_steps`` (optimizer steps) and ``evaluate_every_n_epochs``; the end of
      an epoch always evaluates when ``evaluate_every_n_epochs`` divides it (every epoch by
      default). ``eval_when_start`` / ``eval_when_finish``.
    - ``log_every``: log every N optimizer steps. ``log_with``: Accelerate tracker names
      (``"tensorboard"``, ``"mlflow"``, ``"wandb"``, ``"aim"``, ...), ``"auto"`` for TensorBoard
      when installed, or None. ``monitor``: what is logged (:class:`Monitor`).
    - ``metrics``: a list of :class:`accmt_metrics.Metric` for every validation set, or a dict
      from set name to list.
    - ``callbacks``: :class:`accmt_callbacks.Callback` instances.
    - ``mixed_precision`` (``"no"``, ``"fp16"``, ``"bf16"``, ``"fp8"``), ``compile`` (torch
      dynamo through Accelerate), ``cpu`` (True forces the CPU; by default, a job of several
      processes on a machine without an accelerator runs on the CPU with gloo, where
      Accelerate alone would run each process as a separate single-process job).
    - DataLoader options for the Trainer's own loaders (accmt 1.x's names):
      ``dataloader_num_workers``, ``dataloader_pin_memory``, ``dataloader_drop_last`` (training
      only), ``shuffle_train``, ``sampler`` (training), ``collate_fn``.
    - ``seed``: seeds every RNG at the start of :meth:`fit` and the data order (the model,
      built before, is seeded by the user).
    - ``progress_bar``: a tqdm bar on the main process when stderr is a terminal.
    - ``checkpoint_every``: ``"epoch"``, ``"2ep"``, ``"500 steps"``, ``"eval"``, or None for
      no checkpoints; always at an optimizer-step boundary. ``max_checkpoints`` keeps the
      newest N. ``resume``: None resumes when a checkpoint exists, True requires one, False
      starts afresh (earlier checkpoints are moved aside, not deleted), an int picks one by
      index (-1: the newest).
    - ``disable_model_saving``: no best models. Otherwise the rules given to
      :meth:`register_model_saving`, or ``"best_valid_loss"`` (``"best_train_loss"`` without
      validation data).
    - ``patience``: evaluations without improvement, for every rule (int) or per rule (dict),
      after which the run ends cleanly.
    - ``handle_signals``: on SIGTERM or SIGINT, finish the step, checkpoint, fire
      ``on_fit_end`` and return from :meth:`fit` (the run stays unfinished, to be resumed).
    """

    def __init__(
        self,
        hps_config: HyperParameters | Mapping[str, Any] | str | os.PathLike[str],
        model_path: str | os.PathLike[str],
        *,
        track_name: str | None = None,
        grad_accumulation_steps: int = 1,
        clip_grad: float | None = None,
        evaluate_every_n_steps: int | None = None,
        evaluate_every_n_epochs: int = 1,
        eval_when_start: bool = False,
        eval_when_finish: bool = True,
        log_every: int = 1,
        log_with: LogWith = "auto",
        logging_dir: str | os.PathLike[str] | None = None,
        monitor: Monitor | None = None,
        metrics: Sequence[Metric] | Mapping[str, Sequence[Metric]] | None = None,
        callbacks: Sequence[Callback] = (),
        mixed_precision: str | None = None,
        compile: bool = False,
        cpu: bool | None = None,
        dataloader_num_workers: int = 0,
        dataloader_pin_memory: bool = False,
        dataloader_drop_last: bool = False,
        shuffle_train: bool = True,
        sampler: Sampler[Any] | None = None,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        seed: int | None = None,
        progress_bar: bool = True,
        checkpoint_every: str | None = "epoch",
        resume: bool | int | None = None,
        max_checkpoints: int | None = None,
        disable_model_saving: bool = False,
        patience: int | Mapping[str, int] | None = None,
        handle_signals: bool = True,
    ) -> None:
        self.hps = HyperParameters.from_config(hps_config)
        self.model_path = Path(model_path)
        self.track_name = track_name or self.model_path.name
        self.grad_accumulation_steps = positive_int(
            "grad_accumulation_steps", grad_accumulation_steps
        )
        self.clip_grad = clip_value(clip_grad)
        self.evaluate_every_n_steps = positive_int(
            "evaluate_every_n_steps", evaluate_every_n_steps, allow_none=True
        )
        self.evaluate_every_n_epochs = positive_int(
            "evaluate_every_n_epochs", evaluate_every_n_epochs
        )
        self.eval_when_start = eval_when_start
        self.eval_when_finish = eval_when_finish
        self.log_every = positive_int("log_every", log_every)
        self.log_with = resolve_trackers(log_with)
        self.logging_dir = Path(logging_dir) if logging_dir else self.model_path / "logs"
        self.monitor = monitor or Monitor()
        self.metrics = metrics
        self.callbacks = CallbackHandler(callbacks)
        self.mixed_precision = one_of("mixed_precision", mixed_precision, MIXED_PRECISION)
        self.compile = compile
        self.cpu = cpu
        self.dataloader_options: dict[str, Any] = {
            "num_workers": dataloader_num_workers,
            "pin_memory": dataloader_pin_memory,
            "drop_last": dataloader_drop_last,
        }
        self.shuffle_train = shuffle_train
        self.sampler = sampler
        self.collate_fn = collate_fn
        self.seed = seed
        self.progress_bar = progress_bar
        self.should_stop = False
        """Set to True (from a callback, say) to end the run after the current step."""
        self.state = TrainingState()
        self.checkpoint_schedule = parse_checkpoint_every(checkpoint_every)
        if resume is not None and not isinstance(resume, (bool, int)):
            raise TrainerConfigError(f"Trainer(resume=...): expected None, True, False or a "
                                     f"checkpoint index, got {resume!r}")  # fmt: skip
        self.resume = resume
        self.max_checkpoints = positive_int("max_checkpoints", max_checkpoints, allow_none=True)
        self.disable_model_saving = disable_model_saving
        self.patience = _check_patience(patience)
        self.handle_signals = handle_signals
        self.saving_rules: dict[str, SavingRule] = {}

    # ----------------------------------------------------------------- the run's objects

    accelerator: Accelerator
    module: AcceleratorModule
    model: torch.nn.Module
    optimizer: Optimizer
    scheduler: LRScheduler | None
    train_dataloader: DataLoaderShard
    val_dataloaders: dict[str, DataLoader[Any]]
    val_metrics: dict[str, list[Metric]]

    def fit(
        self,
        module: AcceleratorModule,
        train_dataset: Dataset[Any],
        val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]] | None = None,
    ) -> TrainingState:
        """Train ``module`` on ``train_dataset``, evaluating on ``val_dataset`` (one dataset,
        or a dict of named datasets). Returns the final :class:`TrainingState`."""
        self._setup(module, train_dataset, val_dataset)
        if self.state.finished and self._resuming is not None:
            # Nothing to train; the model is left as the run finished it.
            self.accelerator.load_state(str(self._resuming[0] / "accelerate"))
            logger.warning(
                "the run in %s already finished (epoch %d, step %d); nothing to do",
                *(self.model_path, self.state.epoch, self.state.global_step),
            )
            return self.state
        restore_signals = self._catch_signals()
        try:
            self._run()
        except BaseException as error:
            self.callbacks.dispatch_exception(error)
            raise
        finally:
            restore_signals()
            self._progress.close()
            self.accelerator.end_training()
        return self.state

    def log(self, values: Mapping[str, float], step: int | None = None) -> None:
        """Send ``values`` to the trackers (main process), at the current global step."""
        if self.log_with:
            self.accelerator.log(
                dict(values), step=self.state.global_step if step is None else step
            )

    @property
    def stop_requested(self) -> bool:
        """True once a callback or the user asked the run to end."""
        return self.should_stop or self.callbacks.should_stop

    # ------------------------------------------------------------------------- set up

    def _setup(
        self,
        module: AcceleratorModule,
        train_dataset: Dataset[Any],
        val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]] | None,
    ) -> None:
        if not isinstance(module, AcceleratorModule):
            raise TypeError(f"Trainer.fit: module must be an AcceleratorModule, got {module!r}")
        if not isinstance(getattr(module, "model", None), torch.nn.Module):
            raise TrainerConfigError(
                f"Trainer.fit: {type(module).__name__}.model must be set to a torch.nn.Module "
                "before fit"
            )
        self.accelerator = self._make_accelerator()
        if self.seed is not None:
            set_seed(self.seed)
        self.module = module
        self.state = TrainingState()
        self.should_stop = False
        self.callbacks.should_stop, self.callbacks.stop_reason = False, ""
        module.accelerator, module.state, module.trainer = self.accelerator, self.state, self
        self._prepare_model_and_data(module, train_dataset, val_dataset)
        self._prepare_optimization(module)
        self.callbacks.bind(module=module, trainer=self, state=self.state)
        self._progress = ProgressBar(self.progress_bar, self.accelerator.is_main_process)
        if self.log_with:
            self.accelerator.init_trackers(self.track_name, config=flatten(self.hps.to_dict()))
        self._window = _LossWindow(self.accelerator.device)
        self._epoch_loss = _LossWindow(self.accelerator.device)
        # Without accumulation every batch steps, and Accelerate's accumulate() would only add
        # its bookkeeping to each step; its flag must still say that gradients sync.
        self._extended = isinstance(module, ExtendedAcceleratorModule)
        self._accumulating = self.grad_accumulation_steps > 1
        if not self._accumulating:
            self.accelerator.sync_gradients = True
        self._epoch_loss_mean: float | None = None
        self._signal: int | None = None
        self._last_checkpoint: tuple[int, int, int] | None = None
        self._active_rules = self._choose_rules()
        self._patience = self._patience_per_rule()
        self._checkpoints = Checkpoints(self.model_path / "checkpoints", self.max_checkpoints)
        self._resuming = self._find_checkpoint()
        if self._resuming is not None:
            self._load_checkpoint_state(self._resuming[0])

    def _make_accelerator(self) -> Accelerator:
        return Accelerator(
            cpu=_use_cpu(self.cpu),
            mixed_precision=self.mixed_precision,
            gradient_accumulation_steps=self.grad_accumulation_steps,
            # The scheduler is stepped by the loop, once per real optimizer step, and sized
            # to exactly that count; Accelerate would otherwise step it once per process.
            step_scheduler_with_optimizer=False,
            dataloader_config=DataLoaderConfiguration(
                use_seedable_sampler=True,
                data_seed=self.seed,
            ),
            log_with=self.log_with,
            project_dir=str(self.logging_dir),
            dynamo_backend="inductor" if self.compile else None,
        )

    def _prepare_model_and_data(
        self,
        module: AcceleratorModule,
        train_dataset: Dataset[Any],
        val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]] | None,
    ) -> None:
        train_loader = module.get_train_dataloader(train_dataset) or self._loader(
            module, train_dataset, self.hps.train_batch_size, train=True
        )
        val_sets = _named_sets(val_dataset)
        val_loaders = {
            key: module.get_validation_dataloader(dataset)
            or self._loader(module, dataset, self.hps.val_batch_size, train=False)
            for key, dataset in val_sets.items()
        }
        self.model, self.train_dataloader = self.accelerator.prepare(module.model, train_loader)
        self.val_dataloaders = {
            key: self.accelerator.prepare(loader) for key, loader in val_loaders.items()
        }
        self.val_metrics = self._metrics_per_set(val_sets)
        if module.teacher is not None:
            module.teacher.requires_grad_(False)
            module.teacher = self.accelerator.prepare_model(module.teacher, evaluation_mode=True)
            module.teacher.eval()
        module.model = self.model

    def _loader(
        self, module: AcceleratorModule, dataset: Dataset[Any], batch_size: int, *, train: bool
    ) -> DataLoader[Any]:
        collate = module.collate_fn if overrides(module, "collate_fn") else self.collate_fn
        sampler = self.sampler if train else None
        return DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=self.shuffle_train and train and sampler is None,
            sampler=sampler,
            collate_fn=collate,
            **{
                **self.dataloader_options,
                "drop_last": train and self.dataloader_options["drop_last"],
            },
        )

    def _metrics_per_set(self, val_sets: Mapping[str, Dataset[Any]]) -> dict[str, list[Metric]]:
        if isinstance(self.metrics, Mapping):
            unknown = set(self.metrics) - set(val_sets)
            if unknown:
                raise TrainerConfigError(
                    f"Trainer(metrics=...): no validation set named {sorted(unknown)}; "
                    f"the sets are {sorted(val_sets)}"
                )
            chosen = {key: list(self.metrics.get(key, ())) for key in val_sets}
        else:
            chosen = {key: list(self.metrics or ()) for key in val_sets}
        # Each set accumulates into its own copies, so one set's batches never mix with another's.
        per_set = {
            key: [copy.deepcopy(metric) for metric in metrics] for key, metrics in chosen.items()
        }
        for key, metrics in per_set.items():
            size = _length(val_sets[key])
            for metric in metrics:
                metric.num_samples = size
        return per_set

    def _prepare_optimization(self, module: AcceleratorModule) -> None:
        optimizer = module.get_optimizer() or self.hps.build_optimizer(
            p for p in self.model.parameters() if p.requires_grad
        )
        steps_per_epoch = math.ceil(len(self.train_dataloader) / self.grad_accumulation_steps)
        total_steps = self.hps.epochs * steps_per_epoch
        if self.hps.max_steps is not None:
            total_steps = min(total_steps, self.hps.max_steps)
        self.steps_per_epoch, self.total_steps = steps_per_epoch, total_steps
        scheduler_steps = self.hps.epochs if self.hps.step_scheduler_per_epoch else total_steps
        scheduler = module.get_scheduler(
            optimizer, scheduler_steps, self.hps.epochs
        ) or self.hps.build_scheduler(optimizer, scheduler_steps, self.hps.epochs)
        self.optimizer = self.accelerator.prepare_optimizer(optimizer)
        self.scheduler = (
            self.accelerator.prepare_scheduler(scheduler) if scheduler is not None else None
        )

    # -------------------------------------------------------------------------- the loop

    def _run(self) -> None:
        self.callbacks.call("on_fit_start")
        resumed_batches = self._resume() if self._resuming is not None else None
        evaluated_last = False
        if self.eval_when_start and self.val_dataloaders and self._resuming is None:
            self._evaluate()
        self._resuming = None
        while self.state.epoch < self.hps.epochs and not self._done() and self._signal is None:
            evaluated_last = self._train_epoch(resumed_batches)
            resumed_batches = None
        interrupted = self._signal is not None
        if self.eval_when_finish and self.val_dataloaders and not (evaluated_last or interrupted):
            self._evaluate()
        # A signal that came between steps (during an evaluation, say) is checkpointed here;
        # one that came during a step already was, at that step.
        self.state.finished = not interrupted
        self._checkpoint()
        self.callbacks.call("on_fit_end")

    def _done(self) -> bool:
        return self.stop_requested or self.state.global_step >= self.total_steps

    def _train_epoch(self, resumed_batches: Iterator[Any] | None) -> bool:
        """One epoch (or the rest of a resumed one); returns whether it ended evaluating."""
        state = self.state
        if resumed_batches is None:
            state.is_last_epoch = state.epoch == self.hps.epochs - 1
            state.is_end_of_epoch = state.is_last_training_batch = False
            self.callbacks.call("on_epoch_start")
        self.model.train()
        batches = resumed_batches or iter(self._epoch_loader())
        total = len(self.train_dataloader)
        self._progress.start_epoch(state.epoch, self.hps.epochs, total, state.batches_seen_in_epoch)
        self._last_log_time = time.perf_counter()
        for batch in batches:
            if state.batches_seen_in_epoch == total - 1:
                state.is_last_training_batch = True
            self._training_step(batch)
            if self._done() and (self._signal is not None or not state.is_last_training_batch):
                # Stopped inside the epoch, or by a signal: no end-of-epoch work, the epoch
                # stays unfinished (a resume from the signal's checkpoint does its end).
                return False
        return self._end_epoch()

    def _epoch_loader(self) -> DataLoaderShard:
        """This epoch's batches, past those a resumed run already consumed."""
        self.train_dataloader.set_epoch(self.state.epoch)
        # A collate_fn whose randomness follows the epoch (accmt-collators' masking ones)
        # learns it here, before the iterator copies it into DataLoader workers.
        set_collate_epoch = getattr(self.train_dataloader.collate_fn, "set_epoch", None)
        if callable(set_collate_epoch):
            set_collate_epoch(self.state.epoch)
        done = self.state.batches_seen_in_epoch
        if done == 0:
            return self.train_dataloader
        # Skips by index where the sampler allows: skipped samples are never loaded.
        return self.accelerator.skip_first_batches(self.train_dataloader, done)

    def _end_epoch(self) -> bool:
        state = self.state
        state.is_end_of_epoch = True
        self._end_epoch_loss()
        if self.scheduler is not None and self.hps.step_scheduler_per_epoch:
            self._step_scheduler(force=True)
        evaluate = self._epoch_end_evaluates() and not self.stop_requested
        if evaluate:
            self._evaluate()
        self._save_best_models(train_loss_rules=True)
        self.callbacks.call("on_epoch_end")
        state.epoch += 1
        state.batches_seen_in_epoch = state.train_step = 0
        # Taken after the epoch is closed, so that a resume starts the next one cleanly. The
        # last epoch's is left to the end of the run, which records that the run finished.
        due = self._due("epoch", state.epoch) or (
            evaluate and self._due("eval", state.evaluations_done)
        )
        if due and not (self._done() or state.epoch >= self.hps.epochs):
            self._checkpoint()
        return evaluate

    def _epoch_end_evaluates(self) -> bool:
        """Whether this epoch's end evaluates."""
        return bool(self.val_dataloaders) and (
            (self.state.epoch + 1) % self.evaluate_every_n_epochs == 0
        )

    def _epoch_end_follows(self) -> bool:
        """Whether this step is the epoch's last and its end evaluates (so the step need not)."""
        return self.state.is_last_training_batch and self._epoch_end_evaluates()

    def _training_step(self, batch: Any) -> None:
        self.callbacks.call("on_before_training_step", batch)
        with self.accelerator.accumulate(self.model) if self._accumulating else _NO_CONTEXT:
            loss = self.module.training_step(batch)
            if not self._extended:
                self._backward(loss)
                self._step_optimizer()
                self._step_scheduler()
                self._zero_grad()
        if loss is not None:
            detached = loss.detach()
            self._window.add(detached)
            self._epoch_loss.add(detached)
        self._progress.advance()
        state = self.state
        # The loop's own counters are whole numbers it made: set them past attrs' validators,
        # which would cost this hot path a few microseconds a step.
        _set(state, "batch_iteration", state.batch_iteration + 1)
        _set(state, "batches_seen_in_epoch", state.batches_seen_in_epoch + 1)
        _set(state, "train_step", state.batches_seen_in_epoch)
        if self.accelerator.sync_gradients:
            _set(state, "global_step", state.global_step + 1)
            self._after_optimizer_step()
        self.callbacks.call("on_after_training_step")

    def _after_optimizer_step(self) -> None:
        step = self.state.global_step
        if step % self.log_every == 0:
            self._log_training()
        evaluated = False
        every = self.evaluate_every_n_steps
        if every and step % every == 0 and self.val_dataloaders and not self._epoch_end_follows():
            self._evaluate()
            evaluated = True
        if (
            self._signal is not None
            or self._due("step", step)
            or (evaluated and self._due("eval", self.state.evaluations_done))
        ):
            self._checkpoint()
        if self._signal is not None:
            self.should_stop = True

    # ------------------------------------------------------------ checkpoints and resume

    def _due(self, unit: Unit, count: int) -> bool:
        return self.checkpoint_schedule is not None and self.checkpoint_schedule.due(unit, count)

    def _checkpoint(self) -> None:
        """Write a checkpoint of this moment, an optimizer-step boundary, unless one exists."""
        if self.checkpoint_schedule is None:
            return
        moment = (self.state.global_step, self.state.epoch, self.state.evaluations_done)
        if moment == self._last_checkpoint:
            return
        self._last_checkpoint = moment
        self.callbacks.call("on_save_checkpoint")
        state = self.state
        state.num_checkpoints_made += 1
        state.samples_seen_in_epoch = (
            state.batches_seen_in_epoch * self.hps.train_batch_size * self.accelerator.num_processes
        )
        self._checkpoints.save(
            self.accelerator,
            state.num_checkpoints_made,
            self._run_facts(),
            write_main=self._write_checkpoint_files,
            write_each=self._write_process_files,
        )

    def _write_checkpoint_files(self, folder: Path) -> None:
        self.state.save(folder / "state.json")
        self.callbacks.save_state(folder / "callbacks.json")

    def _write_process_files(self, folder: Path) -> None:
        losses = {"window": self._window.state_dict(), "epoch": self._epoch_loss.state_dict()}
        torch.save(losses, folder / f"process_{self.accelerator.process_index}.pt")

    def _run_facts(self) -> dict[str, Any]:
        """What a checkpoint must agree with to resume exactly."""
        return {
            "format": 1,
            "world_size": self.accelerator.num_processes,
            "train_batch_size": self.hps.train_batch_size,
            "grad_accumulation_steps": self.grad_accumulation_steps,
            "batches_per_epoch": len(self.train_dataloader),
            "versions": package_versions(),
        }

    def _find_checkpoint(self) -> tuple[Path, dict[str, Any]] | None:
        """The checkpoint this fit resumes from, per ``resume``; None to start afresh."""
        if self.checkpoint_schedule is None and self.resume is None:
            return None
        if self.resume is False:
            self._checkpoints.set_aside(self.accelerator)
            return None
        # Not `in (None, True)`: resume=1 (== True) names checkpoint 1.
        which = -1 if self.resume is None or self.resume is True else int(self.resume)
        found = self._checkpoints.choose(which)
        if found is None and self.resume is not None:
            raise CheckpointError(
                f"resume={self.resume!r}, but {self._checkpoints.root} holds no intact checkpoint"
            )
        if found is not None:
            check_compatible(found[1], self._run_facts(), found[0])
            if which != -1:
                self._checkpoints.set_aside_newer(self.accelerator, found[0])
        return found

    def _load_checkpoint_state(self, folder: Path) -> None:
        """Restore what the loop keeps (not yet the model, optimizer and RNGs)."""
        self.state = TrainingState.load(folder / "state.json")
        self.module.state = self.state
        self.callbacks.bind(module=self.module, trainer=self, state=self.state)
        self.callbacks.load_state(folder / "callbacks.json")
        losses = torch.load(folder / f"process_{self.accelerator.process_index}.pt")
        self._window.load_state_dict(losses["window"])
        self._epoch_loss.load_state_dict(losses["epoch"])
        self._last_checkpoint = (
            self.state.global_step, self.state.epoch, self.state.evaluations_done
        )  # fmt: skip

    def _resume(self) -> Iterator[Any] | None:
        """Restore model, optimizer, scheduler, scaler and RNGs, fire on_resume, and return
        the rest of the interrupted epoch's batches (None when it stopped between epochs)."""
        assert self._resuming is not None
        folder = self._resuming[0]
        rest: Iterator[Any] | None = None
        if self.state.batches_seen_in_epoch:
            # Starting an epoch's iterator draws from the global RNG. The interrupted run drew
            # before its checkpoint, so this run draws first and restores the RNGs after.
            batches = iter(self._epoch_loader())
            first = next(batches, _END)
            rest = iter(()) if first is _END else itertools.chain([first], batches)
        self.accelerator.load_state(str(folder / "accelerate"))
        self.callbacks.call("on_resume")
        return rest

    # --------------------------------------------------------------------- best models

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

    def _choose_rules(self) -> list[SavingRule]:
        if self.disable_model_saving:
            return []
        if self.saving_rules:
            return list(self.saving_rules.values())
        default = "best_valid_loss" if self.val_dataloaders else "best_train_loss"
        return [parse_rule(default)]

    def _patience_per_rule(self) -> dict[str, int]:
        if self.patience is None:
            return {}
        if isinstance(self.patience, int):
            return {rule.name: self.patience for rule in self._active_rules}
        unknown = set(self.patience) - {rule.name for rule in self._active_rules}
        if unknown:
            raise TrainerConfigError(
                f"Trainer(patience=...): no model saving rule named {sorted(unknown)}; the "
                f"rules are {[rule.name for rule in self._active_rules]}"
            )
        return dict(self.patience)

    def _catch_signals(self) -> Callable[[], None]:
        """On SIGTERM or SIGINT, finish the step, checkpoint and leave the loop cleanly."""
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return lambda: None

        def note(signum: int, frame: object) -> None:
            self._signal = signum

        previous = {sig: signal.signal(sig, note) for sig in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def _save_best_models(self, *, train_loss_rules: bool) -> None:
        """Check each rule against the latest values; save and count patience."""
        for rule in self._active_rules:
            if rule.uses_train_loss != train_loss_rules:
                continue
            values = rule.values(self.state, self._epoch_loss_mean)
            saved = self.state.model_savings
            best = {k: saved[_best_key(rule, k)] for k in values if _best_key(rule, k) in saved}
            if rule.improves(values, best, self._greater_is_better):
                for key, value in values.items():
                    self.state.model_savings[_best_key(rule, key)] = value
                self._write_best_model(rule, values)
                self._count_patience(rule, improved=True)
            else:
                self._count_patience(rule, improved=False)

    def _greater_is_better(self, metric: str) -> bool:
        for metrics in self.val_metrics.values():
            for candidate in metrics:
                if candidate.name == metric:
                    return bool(candidate.greater_is_better)
        return False

    def _write_best_model(self, rule: SavingRule, values: Mapping[str, float]) -> None:
        folder = self.model_path / rule.folder
        staging = self.model_path / f".tmp-{rule.folder}"
        accelerator = self.accelerator
        if accelerator.is_main_process:
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
        accelerator.wait_for_everyone()
        accelerator.save_model(self.model, str(staging), safe_serialization=True)
        # Every process must be done with the staging folder before it is renamed.
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            self.state.save(staging / "state.json")
            write_json(staging / "metrics.json", {"rule": rule.name, "values": dict(values)})
            replace_folder(staging, folder)
        accelerator.wait_for_everyone()

    def _count_patience(self, rule: SavingRule, *, improved: bool) -> None:
        patience = self._patience.get(rule.name)
        if patience is None:
            return
        left = self.state.patience_left
        left[rule.name] = patience if improved else max(left.get(rule.name, patience) - 1, 0)
        if all(left.get(name, 1) == 0 for name in self._patience):
            self.should_stop = True

    # Accumulation-aware pieces, shared with ExtendedAcceleratorModule.

    def _backward(self, loss: torch.Tensor) -> None:
        self.callbacks.call("on_before_backward", loss)
        self.accelerator.backward(loss)
        self.callbacks.call("on_after_backward")

    def _step_optimizer(self, optimizer: Optimizer | None = None) -> None:
        if not self.accelerator.sync_gradients:
            return
        optimizer = optimizer or self.optimizer
        if self.clip_grad is not None:
            self._grad_norm = self.accelerator.clip_grad_norm_(
                self.model.parameters(), self.clip_grad
            )
        elif self.monitor.grad_norm and (self.state.global_step + 1) % self.log_every == 0:
            self._grad_norm = self.accelerator.clip_grad_norm_(self.model.parameters(), math.inf)
        self.callbacks.call("on_before_optimizer_step", optimizer)
        optimizer.step()
        self.callbacks.call("on_after_optimizer_step", optimizer)

    def _step_scheduler(self, scheduler: LRScheduler | None = None, *, force: bool = False) -> None:
        scheduler = scheduler or self.scheduler
        if scheduler is None or (self.hps.step_scheduler_per_epoch and not force):
            return
        if not force and (
            not self.accelerator.sync_gradients or self.accelerator.optimizer_step_was_skipped
        ):
            return
        self.callbacks.call("on_before_scheduler_step", scheduler)
        scheduler.step()
        self.callbacks.call("on_after_scheduler_step", scheduler)

    def _zero_grad(self, optimizer: Optimizer | None = None) -> None:
        if not self.accelerator.sync_gradients:
            return
        optimizer = optimizer or self.optimizer
        self.callbacks.call("on_before_zero_grad", optimizer)
        optimizer.zero_grad(set_to_none=True)
        self.callbacks.call("on_after_zero_grad", optimizer)

    # ------------------------------------------------------------------ logging, losses

    def _log_training(self) -> None:
        values: dict[str, float] = {}
        monitor = self.monitor
        mean = self._window.reduce_mean(self.accelerator)
        if monitor.train_loss and mean is not None:
            values["train/loss"] = mean
        if monitor.epoch:
            values["train/epoch"] = self.state.epoch + self.state.batch_iteration / max(
                len(self.train_dataloader), 1
            )
        if monitor.learning_rate:
            values["train/lr"] = float(self.optimizer.param_groups[0]["lr"])
        if monitor.grad_norm and getattr(self, "_grad_norm", None) is not None:
            values["train/grad_norm"] = float(self._grad_norm)
        if monitor.throughput:
            values["train/samples_per_second"] = self._throughput()
        if monitor.memory:
            values["train/memory_gib"] = _memory_gib(self.accelerator.device)
        self._progress.show({k.removeprefix("train/"): v for k, v in values.items()})
        self.log(values)

    def _throughput(self) -> float:
        """Samples of all processes per second since the last log (or the epoch's start)."""
        now = time.perf_counter()
        batches = self.log_every * self.grad_accumulation_steps
        samples = batches * self.hps.train_batch_size * self.accelerator.num_processes
        elapsed, self._last_log_time = now - self._last_log_time, now
        return float(samples) / max(elapsed, 1e-9)

    def _end_epoch_loss(self) -> None:
        self._epoch_loss_mean = mean = self._epoch_loss.reduce_mean(self.accelerator)
        if mean is not None and mean < self.state.best_train_loss:
            self.state.best_train_loss = mean

    # ------------------------------------------------------------------------ evaluation

    def _evaluate(self) -> None:
        self.callbacks.call("on_evaluation_start")
        self.model.eval()
        results: dict[str, dict[str, float]] = {}
        with torch.no_grad():
            for key, loader in self.val_dataloaders.items():
                results[key] = self._evaluate_set(key, loader)
        self.model.train()
        self._record_evaluation(results)
        self.callbacks.call("on_evaluation_end")

    def _evaluate_set(self, key: str, loader: DataLoader[Any]) -> dict[str, float]:
        metrics = {metric.name: metric for metric in self.val_metrics[key]}
        loss = _LossWindow(self.accelerator.device)
        batches = len(loader)
        for index, batch in enumerate(loader):
            self.state.is_last_validation_batch = index == batches - 1
            self.callbacks.call("on_before_validation_step", batch)
            output = self.module.validation_step(key, batch)
            self._accumulate_validation(key, output, loss, metrics)
            self.state.val_step += 1
            self.callbacks.call("on_after_validation_step")
        values: dict[str, float] = {}
        mean = loss.reduce_mean(self.accelerator)
        if mean is not None:
            values["loss"] = mean
        for metric in metrics.values():
            values.update(metric.compute())
            metric.reset()
        return values

    def _accumulate_validation(
        self, key: str, output: Any, loss: _LossWindow, metrics: Mapping[str, Metric]
    ) -> None:
        if isinstance(output, torch.Tensor):
            loss.add(output.detach())
            return
        if not isinstance(output, Mapping):
            raise TypeError(
                f"{type(self.module).__name__}.validation_step({key!r}, batch) returned "
                f"{type(output).__name__}; expected a loss tensor or a dict"
            )
        for name, value in output.items():
            if name == "loss":
                loss.add(value.detach())
            elif name in metrics:
                predictions, references = value
                metrics[name].add_batch(predictions, references)
            else:
                raise TrainerConfigError(
                    f"{type(self.module).__name__}.validation_step({key!r}, batch) returned "
                    f"{name!r}, but validation set {key!r} has no metric of that name "
                    f"(its metrics: {sorted(metrics)})"
                )

    def _record_evaluation(self, results: dict[str, dict[str, float]]) -> None:
        state = self.state
        state.additional_metrics = results
        state.evaluations_done += 1
        losses = [values["loss"] for values in results.values() if "loss" in values]
        if losses:
            # With several sets, the run's validation loss is their mean.
            valid_loss = sum(losses) / len(losses)
            state.best_valid_loss = min(state.best_valid_loss, valid_loss)
        self.log(self._evaluation_log(results))
        self._save_best_models(train_loss_rules=False)

    def _evaluation_log(self, results: dict[str, dict[str, float]]) -> dict[str, float]:
        logged: dict[str, float] = {}
        for key, values in results.items():
            for name, value in values.items():
                monitor = self.monitor
                wanted = monitor.validation_loss if name == "loss" else monitor.additional_metrics
                if wanted:
                    logged[f"{key}/{name}"] = value
        return logged


class _LossWindow:
    """A running sum of losses kept on the device: adding costs no host sync; reading does one.

    Losses are kept as a list of detached tensors, folded into the sum every FOLD of them:
    appending costs a tenth of a microsecond where an in-place tensor add costs several.
    """

    FOLD = 1024

    def __init__(self, device: torch.device) -> None:
        self.total = torch.zeros((), device=device, dtype=torch.float64)
        self.count = 0
        self._pending: list[torch.Tensor] = []

    def add(self, loss: torch.Tensor) -> None:
        self._pending.append(loss)
        if len(self._pending) >= self.FOLD:
            self._fold()

    def _fold(self) -> None:
        if self._pending:
            self.total += torch.stack(self._pending).to(torch.float64).sum()
            self.count += len(self._pending)
            self._pending.clear()

    def state_dict(self) -> dict[str, Any]:
        self._fold()
        return {"total": self.total.detach().cpu(), "count": self.count}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._pending.clear()
        self.total.copy_(state["total"])
        self.count = int(state["count"])

    def reduce_mean(self, accelerator: Accelerator) -> float | None:
        """The mean over this window on every process, then resets the window."""
        self._fold()
        count = torch.tensor(float(self.count), device=self.total.device, dtype=torch.float64)
        summed = accelerator.reduce(torch.stack([self.total, count]), reduction="sum")
        self.total.zero_()
        self.count = 0
        total, samples = (float(x) for x in summed.tolist())
        return total / samples if samples else None


def _named_sets(
    val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]] | None,
) -> dict[str, Dataset[Any]]:
    if val_dataset is None:
        return {}
    if isinstance(val_dataset, Mapping):
        return dict(val_dataset)
    return {DEFAULT_SET: val_dataset}


def _length(dataset: Dataset[Any]) -> int | None:
    try:
        return len(dataset)  # type: ignore[arg-type]
    except TypeError:
        return None


def _memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _best_key(rule: SavingRule, key: str) -> str:
    """Where a rule keeps the best value of one part in ``state.model_savings``."""
    return rule.name if len(rule.watched) == 1 else f"{rule.name}::{key}"


def _check_patience(patience: int | Mapping[str, int] | None) -> dict[str, int] | int | None:
    if patience is None or isinstance(patience, int):
        return positive_int("patience", patience, allow_none=True)  # type: ignore[no-any-return]
    return {rule: positive_int(f"patience[{rule!r}]", value) for rule, value in patience.items()}


def _use_cpu(cpu: bool | None) -> bool:
    if cpu is not None:
        return cpu
    if current_process().num_processes == 1:
        return False
    xpu = getattr(torch, "xpu", None)
    mps = getattr(torch.backends, "mps", None)
    return not (
        torch.cuda.is_available()
        or (xpu is not None and xpu.is_available())
        or (mps is not None and mps.is_available())
    )
