"""One ``Trainer.fit``: what exists only while a run goes (the accelerator, the prepared run,
its owners and loop), from the Trainer's options to the run's end."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelerate.utils import set_seed

from accmt_state import TrainingState

from ._accelerator import make_accelerator
from ._checkpoints import Checkpoints
from ._folder_lock import FolderLock
from ._loop import TrainingLoop
from ._manifest import run_facts
from ._owners import build_loop
from ._sanity_check import check_datasets, check_names, check_writable
from ._setup import Run, prepare_run
from ._signals import stop_on_signals
from ._trackers import start_trackers

if TYPE_CHECKING:
    from torch.utils.data import Dataset

    from ._module import AcceleratorModule
    from ._stages import Stages
    from ._trainer import Trainer

    Datasets = tuple[Dataset[Any] | Stages, dict[str, Dataset[Any]]]

logger = logging.getLogger("accmt_trainer")


class Fit:
    """One fit of ``module`` by ``trainer``. Making it makes the run's Accelerator; :meth:`train`
    does the rest, holding the output folder's lock throughout."""

    def __init__(self, trainer: Trainer, module: AcceleratorModule) -> None:
        self.trainer, self.module = trainer, module
        self.accelerator = make_accelerator(trainer.accelerator_options, trainer.logging_options)
        self.state = TrainingState()
        self.run: Run | None = None
        self.loop: TrainingLoop | None = None
        self.reported_names: dict[str, list[str]] | None = None
        """What each validation set reported in the sanity check (set -> sorted names, the loss
        as ``"loss"``), for a callback's ``on_fit_start`` to check the names it will read
        (``self.trainer.latest_fit.reported_names``). None before the check, or without it."""

    def train(self, datasets: Datasets) -> TrainingState:
        """Prepare the run, resume it if a checkpoint says so, and train it to its end."""
        trainer = self.trainer
        seed = trainer.accelerator_options.seed
        if seed is not None:
            set_seed(seed)
        tracking = trainer.logging_options
        logs = [("logging_dir", tracking.logging_dir)] if tracking.log_with else []
        check_writable([("model_path", trainer.model_path), *logs])
        with FolderLock(trainer.model_path, self.accelerator):
            check_datasets(*datasets)
            return self._train(datasets)

    def _train(self, datasets: Datasets) -> TrainingState:
        trainer, accelerator = self.trainer, self.accelerator
        self.run = run = prepare_run(
            accelerator,
            self.module,
            trainer.hps,
            datasets,
            trainer.loader_options,
            trainer.evaluation_options.metrics,
            trainer.accelerator_options.gradient_checkpointing,
        )
        options = trainer.checkpoint_options
        checkpoints = Checkpoints(
            trainer.model_path / "checkpoints",
            accelerator,
            max_checkpoints=options.max_checkpoints,
            objects=trainer.checkpointed_objects,
            background=options.checkpoint_async,
        )
        facts = run_facts(run)
        resuming = checkpoints.find(options.resume, facts) if options.resumes else None
        state, process_state = checkpoints.load(resuming, facts) if resuming else (None, None)
        self.state = state = state or TrainingState()
        trainer.callbacks.clear_stop()
        self.loop = loop = build_loop(trainer, run, self.module, state, checkpoints, facts)
        if resuming is not None and process_state is not None:
            checkpoints.load_rest(resuming, trainer.callbacks)
            loop.restore(process_state)
            if loop.reached_end():
                # Nothing to train; the model is left as the run finished it.
                checkpoints.load_accelerate(resuming)
                done = (trainer.model_path, state.epoch, state.global_step)
                logger.warning("%s already finished (epoch %d, step %d): nothing to do", *done)
                return state
        if trainer.sanity_check:
            self.reported_names = reported = loop.owners.evaluation.sanity_check()
            rules = loop.owners.best_models.rules
            check_names(reported, rules, list(trainer.callbacks.callbacks))
        logging_options = trainer.logging_options
        if logging_options.log_with:
            config = {**trainer.hps.to_dict(), **logging_options.additional_tracker_config}
            init_kwargs = logging_options.tracker_init_kwargs
            start_trackers(accelerator, logging_options.track_name, config, init_kwargs)
        return self._drive(loop, resuming)

    def _drive(self, loop: TrainingLoop, resuming: Path | None) -> TrainingState:
        checkpoints, callbacks = loop.owners.checkpoints, self.trainer.callbacks
        try:
            with stop_on_signals(callbacks.request_stop, self.trainer.handle_signals):
                loop.fit(resuming)
            checkpoints.wait()
        except BaseException as error:
            with contextlib.suppress(Exception):
                checkpoints.wait()  # the write in flight ends before the error leaves fit
            callbacks.dispatch_exception(error)
            raise
        finally:
            loop.owners.progress.close()
        return loop.state


class OfLatestFit:
    """A read-only Trainer attribute that is the latest fit's: its accelerator, prepared model,
    optimizer or scheduler. Reading it before any fit raises AttributeError."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, trainer: Trainer | None, owner: type | None = None) -> Any:
        if trainer is None:
            return self
        fit = trainer.latest_fit
        source = fit if self.name == "accelerator" or fit is None else fit.run
        if source is None:
            raise AttributeError(f"Trainer.{self.name} exists once fit has prepared the run")
        return getattr(source, self.name)
