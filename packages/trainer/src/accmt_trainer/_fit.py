"""One ``Trainer.fit``: what exists only while a run goes (the accelerator, the prepared run,
its owners and loop), from the Trainer's options to the run's end."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelerate.utils import set_seed

from accmt_state import TrainingState

from ._accelerator import make_accelerator
from ._checkpoints import Checkpoints
from ._console import console_lines, logger
from ._data_checks import check_datasets
from ._folder_lock import FolderLock
from ._fsdp import warn_if_not_sharded
from ._loop import TrainingLoop
from ._manifest import run_facts
from ._owners import build_loop
from ._resize import Start, resize_warning
from ._sanity_check import check_names, check_writable
from ._setup import Run, prepare_run
from ._signals import stop_on_signals
from ._start_lines import finished_line, start_line
from ._trackers import start_trackers
from ._untouched import untouched_unless

if TYPE_CHECKING:
    from torch.utils.data import Dataset

    from ._epoch_plan import EpochPlan
    from ._module import AcceleratorModule
    from ._stages import Stages
    from ._trainer import Trainer

    Datasets = tuple[Dataset[Any] | Stages, dict[str, Dataset[Any]]]


class Fit:
    """One fit of ``module`` by ``trainer``. Making it makes the run's Accelerator; :meth:`train`
    does the rest, holding the output folder's lock throughout."""

    def __init__(self, trainer: Trainer, module: AcceleratorModule) -> None:
        self.trainer, self.module = trainer, module
        self.accelerator = make_accelerator(trainer.accelerator_options, trainer.logging_options)
        warn_if_not_sharded(self.accelerator)
        self.state = TrainingState()
        self.run: Run | None = None
        self.loop: TrainingLoop | None = None
        self.start = Start(facts={})
        """Where the run starts: afresh, or a checkpoint's moment (set as the run is prepared)."""
        self.started = False
        """Whether the run got past its checks and writes into its folders."""
        self.reported_names: dict[str, list[str]] | None = None
        """What each validation set reported in the sanity check (set -> sorted names, the loss
        as ``"loss"``), for a callback's ``on_fit_start`` to check the names it will read
        (``self.trainer.latest_fit.reported_names``). None before the check, or without it."""

    def train(self, datasets: Datasets) -> TrainingState:
        """Prepare the run, resume it if a checkpoint says so, and train it to its end. A run
        that fails before its first step leaves its folders as it found them."""
        trainer = self.trainer
        seed = trainer.accelerator_options.seed
        if seed is not None:
            set_seed(seed)
        tracking = trainer.logging_options
        logs = [("logging_dir", tracking.logging_dir)] if tracking.log_with else []
        folders = [("model_path", trainer.model_path), *logs]
        with (
            console_lines(self.accelerator.is_main_process),
            untouched_unless(lambda: self.started, [folder for _, folder in folders]),
        ):
            check_writable(folders)
            with FolderLock(trainer.model_path, self.accelerator, lambda: self.started):
                check_datasets(*datasets)
                return self._train(datasets)

    def _train(self, datasets: Datasets) -> TrainingState:
        trainer, accelerator = self.trainer, self.accelerator
        options = trainer.checkpoint_options
        checkpoints = Checkpoints(
            trainer.model_path / "checkpoints",
            accelerator,
            max_checkpoints=options.max_checkpoints,
            objects=trainer.checkpointed_objects,
            background=options.checkpoint_async,
        )

        def locate(plan: EpochPlan) -> int:
            """Once the loaders are prepared: the checkpoint to resume, sizing the schedule."""
            hps = trainer.hps
            facts = run_facts(accelerator, plan, hps.train_batch_size, hps.max_steps)
            self.start = checkpoints.start(options.resume, facts, look=options.resumes)
            return self.start.step_offset

        self.run = run = prepare_run(
            accelerator,
            self.module,
            trainer.hps,
            datasets,
            trainer.loader_options,
            trainer.evaluation_options.metrics,
            trainer.accelerator_options.gradient_checkpointing,
            step_offset=locate,
        )
        start = self.start
        resuming, process_state = start.folder, start.process_state
        self.state = state = start.state or TrainingState()
        trainer.callbacks.clear_stop()
        self.loop = loop = build_loop(trainer, run, self.module, state, checkpoints, start.facts)
        if resuming is not None and process_state is not None:
            checkpoints.load_rest(resuming, trainer.callbacks)
            loop.restore(process_state)
            if loop.reached_end():
                # Nothing to train; the model is left as the run finished it.
                checkpoints.clear_way(options.resume, resuming)
                checkpoints.load_accelerate(resuming)
                if accelerator.is_main_process:
                    logger.warning("%s", finished_line(trainer.model_path, state))
                return state
        if trainer.sanity_check:
            self.reported_names = reported = loop.owners.evaluation.sanity_check()
            rules = loop.owners.best_models.rules
            check_names(reported, rules, list(trainer.callbacks.callbacks))
        self.started = True  # from here on the run writes into its folders
        checkpoints.clear_way(options.resume, resuming)
        hps, first_step = trainer.hps.to_dict(), state.global_step + 1 if resuming else 0
        start_trackers(accelerator, trainer.logging_options, hps, first_step=first_step)
        if accelerator.is_main_process:
            if resuming is not None and start.made_on is not None:
                made_on, now_on = start.made_on, accelerator.num_processes
                warnings.warn(resize_warning(resuming, made_on, now_on), stacklevel=4)
            batches = run.plan.epoch(min(state.epoch, run.epochs - 1))[1]
            line = start_line(trainer.model_path, start, state, run, batches)
            logger.info("%s", line)
        return self._drive(loop, resuming)

    def _drive(self, loop: TrainingLoop, resuming: Path | None) -> TrainingState:
        checkpoints, callbacks = loop.owners.checkpoints, self.trainer.callbacks
        try:
            with stop_on_signals(callbacks.request_stop, self.trainer.handle_signals):
                loop.fit(resuming)
            checkpoints.wait()
        except BaseException as error:
            try:
                checkpoints.wait()  # the write in flight ends before the error leaves fit
            except Exception as failed:  # said, not raised: the first error is the one to see
                logger.error(
                    "the checkpoint being written when fit failed did not finish: %s", failed
                )
            callbacks.dispatch_exception(error)
            raise
        finally:
            loop.owners.progress.close()
        return loop.state


_NO_DEFAULT = object()


class OfLatestFit:
    """A read-only Trainer attribute that is the latest fit's: its accelerator, prepared model,
    optimizer or scheduler, or the sanity check's reported names. Before any fit it is
    ``before_fit`` when given, else reading it raises AttributeError."""

    _OF_THE_FIT = ("accelerator", "reported_names")  # the others are the prepared run's

    def __init__(self, before_fit: Any = _NO_DEFAULT) -> None:
        self.before_fit = before_fit

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, trainer: Trainer | None, owner: type | None = None) -> Any:
        if trainer is None:
            return self
        fit = trainer.latest_fit
        if fit is None and self.before_fit is not _NO_DEFAULT:
            return self.before_fit
        source = fit if self.name in self._OF_THE_FIT or fit is None else fit.run
        if source is None:
            raise AttributeError(f"Trainer.{self.name} exists once fit has prepared the run")
        return getattr(source, self.name)
