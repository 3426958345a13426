"""One ``Trainer.fit``: what exists only while a run goes (the accelerator, the prepared run,
its owners and loop), from the fit's options to the run's end."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from accelerate.utils import set_seed

from accmt_callbacks import CallbackHandler
from accmt_state import TrainingState

from .._errors import TrainerConfigError
from .._module import RunHandle, TrainerProtocol, bind_module
from ..checkpointing import (
    Checkpoints,
    FolderLock,
    RunFacts,
    Start,
    check_peft_model,
    check_writable,
    resize_warning,
    run_facts,
    untouched_unless,
)
from ..console import console_lines, logger
from ..data import check_datasets, check_stream
from ..runtime import (
    StopSignals,
    TrackerRuns,
    drop_mixed_precision_forward,
    job_to_requeue,
    make_accelerator,
    own_model,
    requeue,
    send,
    shards_the_model,
    start_trackers,
    warn_if_not_sharded,
)
from ._loop import TrainingLoop
from ._options import FitOptions
from ._owners import Owners, build_owners
from ._resume import Resume
from ._sanity_check import check_names
from ._setup import PreparedRun, prepare_data, prepare_run
from ._start_lines import finished_line, start_line, stopped_line
from ._weight_average import WeightAverage

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from pathlib import Path

    from torch.utils.data import Dataset

    from .._module import AcceleratorModule, LogValues
    from ..checkpointing import Checkpointable, SavingRule
    from ..data import Stages

    Datasets = tuple[Dataset[Any] | Stages, dict[str, Dataset[Any]]]


class Fit:
    """One fit of ``module`` with ``options``. Making it makes the run's Accelerator;
    :meth:`train` does the rest, holding the output folder's lock throughout. ``callbacks`` hold
    the run's one stop request; ``log`` sends values to the trackers."""

    def __init__(
        self,
        options: FitOptions,
        module: AcceleratorModule,
        callbacks: CallbackHandler,
        *,
        saving_rules: Mapping[str, SavingRule],
        checkpointed: Sequence[Checkpointable],
        log: LogValues,
    ) -> None:
        self.options, self.module, self.callbacks = options, module, callbacks
        self.saving_rules, self.checkpointed, self.log = dict(saving_rules), checkpointed, log
        self.accelerator = make_accelerator(options.accelerator_options, options.logging_options)
        warn_if_not_sharded(self.accelerator)
        self.state = TrainingState()
        self.run: PreparedRun | None = None
        self.loop: TrainingLoop | None = None
        self.average: WeightAverage | None = None
        """The run's exponential moving average of the weights (``ema_decay``), or None."""
        self.handle: RunHandle | None = None
        """What the module reaches of this run (its optimizer step and trackers)."""
        self.start: Start | None = None
        """Where the run starts: afresh, or a checkpoint's moment (found as the run is prepared)."""
        self.started = False
        """Whether the run got past its checks and writes into its folders."""
        self.tracker_runs = TrackerRuns()
        """The tracker runs this fit writes into (set as its trackers start)."""
        requeue_signal = options.requeue_signal if options.handle_signals else None
        self.signals = StopSignals(callbacks.request_stop, requeue_signal=requeue_signal)
        """SIGTERM, SIGINT and the requeue signal: a stop request while the fit runs."""
        self.reported_names: dict[str, list[str]] | None = None
        """What each validation set reported in the sanity check (set -> sorted names, the loss
        as ``"loss"``), for a callback's ``on_fit_start`` to check the names it will read
        (``self.trainer.latest_fit.reported_names``). None before the check, or without it."""

    def train(self, datasets: Datasets, trainer: TrainerProtocol) -> TrainingState:
        """Prepare the run, resume it if a checkpoint says so, and train it to its end. A run
        that fails before its first step leaves its folders as it found them. ``trainer`` is
        what the callbacks see as their ``trainer``."""
        options = self.options
        seed = options.accelerator_options.seed
        if seed is not None:
            set_seed(seed)
        tracking = options.logging_options
        logs = [("logging_dir", tracking.logging_dir)] if tracking.log_with else []
        folders = [("model_path", options.model_path), *logs]
        with (
            console_lines(self.accelerator.is_main_process),
            untouched_unless(lambda: self.started, [folder for _, folder in folders]),
        ):
            check_writable(folders)
            with FolderLock(options.model_path, self.accelerator, lambda: self.started):
                check_datasets(*datasets)
                check_stream(datasets[0], options.loader_options, options.hps.max_steps)
                check_peft_model(
                    self.module.model, self.accelerator, options.best_model_options.save_merged
                )
                self.callbacks.clear_stop()  # a new fit starts with no stop request
                try:
                    # From here on a signal asks for a stop, wherever the run is.
                    with self.signals.catching(options.handle_signals):
                        return self._train(datasets, trainer)
                finally:
                    self._release()

    def send(self, values: Mapping[str, float], step: int) -> None:
        """Log ``values`` at ``step`` to the run's trackers (main process), each once."""
        send(self.accelerator, self.tracker_runs, values, step)

    def _release(self) -> None:
        """A finished fit keeps no reference back to its runner (the Trainer, which keeps the
        fit) or from the callbacks (which refer to their handler) to the module, so that dropping
        the Trainer and the module frees them and the model at once: the callbacks stay bound to
        the run's state alone, and the module's handle keeps no step. The module's model is the
        user's own again (not DDP's or torch.compile's wrapper: its own methods, ``generate``
        say, work on each process alone), unless it is split across processes."""
        if self.handle is not None:
            self.callbacks.bind(module=None, trainer=None, state=self.state)
            bind_module(self.module, self.accelerator, self.state, RunHandle(None, self.log))
        if self.run is not None:
            # Accelerate may patch the forward of the wrapper or of the model inside it.
            drop_mixed_precision_forward(self.run.model)
            drop_mixed_precision_forward(own_model(self.run.model))
            drop_mixed_precision_forward(self.module.teacher)
            if not shards_the_model(self.accelerator):
                self.module.model = own_model(self.module.model)

    def _train(self, datasets: Datasets, trainer: TrainerProtocol) -> TrainingState:
        options, accelerator, callbacks = self.options, self.accelerator, self.callbacks
        hps = options.hps
        self.average = average = self._weight_average()
        objects = [*self.checkpointed, *([average] if average else [])]
        root = options.model_path / "checkpoints"
        checkpoints = Checkpoints(root, accelerator, options.checkpoint_options, objects=objects)
        data = prepare_data(
            accelerator,
            self.module,
            hps,
            datasets,
            options.loader_options,
            options.evaluation_options.metrics,
            options.accelerator_options,
        )
        # Where the run starts, found once the loaders are prepared (they tell its position
        # in the data) and before the schedule is sized (a resume on another number of
        # processes carries the checkpoint's step counter).
        facts = run_facts(accelerator, data.plan, hps.train_batch_size, hps.max_steps)
        self.start = start = checkpoints.start(facts, data.model)
        self.run = run = prepare_run(accelerator, self.module, hps, data, start.facts.step_offset)
        if average is not None:
            average.start()  # from the weights the run starts with, where they train
        self.state = state = start.state or TrainingState()
        owners = self._build_owners(run, state, checkpoints, trainer)
        resume = None
        if start.folder is not None:
            resume = Resume(start, run, owners.losses, callbacks, objects)
        if resume is not None and run.reached_end(state):
            resume.restore()  # nothing to train; the model is left as the run finished it
            checkpoints.clear_way(start.folder)
            if accelerator.is_main_process:
                logger.warning("%s", finished_line(options.model_path, state))
            return state
        if options.sanity_check:
            self.reported_names = reported = owners.evaluation.sanity_check()
            check_names(reported, owners.best_models.rules, list(callbacks.callbacks))
        self.started = True  # from here on the run writes into its folders
        checkpoints.clear_way(start.folder)
        first_step = state.global_step + 1 if resume else 0
        self.tracker_runs = start_trackers(
            accelerator,
            options.logging_options,
            hps.to_dict(),
            first_step=first_step,
            continued=start.tracker_runs,
        )
        self._say_start(start, run, state, resume)
        if resume is not None:
            # It goes on: neither finished (a finished run given more epochs) nor stopped.
            state.update(finished=False, stop_reason=None, stop_signal=None)
        rest = None if resume is None else resume.restore()
        self.loop = loop = self._build_loop(run, state, owners, start.facts, resumed=bool(resume))
        return self._drive(loop, rest)

    def _say_start(
        self, start: Start, run: PreparedRun, state: TrainingState, resume: Resume | None
    ) -> None:
        accelerator = self.accelerator
        if not accelerator.is_main_process:
            return
        if start.folder is not None and start.made_on is not None:
            made_on, now_on = start.made_on, accelerator.num_processes
            warnings.warn(resize_warning(start.folder, made_on, now_on), stacklevel=5)
        batches = run.plan.epoch(min(state.epoch, run.epochs - 1))[1]
        replayed = 0 if resume is None else resume.replayed()
        line = start_line(self.options.model_path, start, state, run, batches, replayed)
        logger.info("%s", line)

    def _weight_average(self) -> WeightAverage | None:
        decay = self.options.ema_decay
        if decay is None:
            return None
        if shards_the_model(self.accelerator):
            raise TrainerConfigError(
                f"Trainer(ema_decay={decay}): a model split across processes "
                f"({self.accelerator.distributed_type}) cannot keep a weight average yet; "
                "train it without ema_decay, or with DDP"
            )
        return WeightAverage(self.module.model, decay)

    def _build_owners(
        self,
        run: PreparedRun,
        state: TrainingState,
        checkpoints: Checkpoints,
        trainer: TrainerProtocol,
    ) -> Owners:
        """The run's owners around ``state``; the module and the callbacks are bound to it."""
        options, module, callbacks = self.options, self.module, self.callbacks
        owners = build_owners(
            options,
            run,
            module,
            state,
            callbacks,
            checkpoints,
            saving_rules=self.saving_rules,
            log=self.log,
            average=self.average,
            signals=self.signals,
        )
        self.handle = RunHandle(owners.optimizer_step, self.log)
        bind_module(module, run.accelerator, state, self.handle)
        callbacks.bind(module=module, trainer=trainer, state=state)
        return owners

    def _build_loop(
        self,
        run: PreparedRun,
        state: TrainingState,
        owners: Owners,
        facts: RunFacts,
        *,
        resumed: bool,
    ) -> TrainingLoop:
        options = self.options
        return TrainingLoop(
            run,
            self.module,
            state,
            self.callbacks,
            owners,
            options=options.loop_options,
            logging_options=options.logging_options,
            log=self.log,
            facts=facts,
            tracker_runs=self.tracker_runs.ids,
            resumed=resumed,
        )

    def _drive(self, loop: TrainingLoop, rest: Iterator[Any] | None) -> TrainingState:
        checkpoints, callbacks = loop.owners.checkpoints, self.callbacks
        try:
            loop.fit(rest)
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
            loop.owners.profiler.close()
        state = loop.state
        if self.accelerator.is_main_process and callbacks.should_stop and not state.finished:
            newest = checkpoints.complete()
            line = stopped_line(callbacks.stop_reason, state, newest[-1] if newest else None)
            logger.warning("%s", line)
            if state.stop_signal is not None and state.stop_signal == self._requeue_signal():
                self._requeue(checkpoints, newest)
        return state

    def _requeue_signal(self) -> str | None:
        """The signal after whose stop the job requeues itself, or None (``auto_requeue`` or
        ``handle_signals`` off, or no requeue signal)."""
        options = self.options
        return options.requeue_signal if options.auto_requeue and options.handle_signals else None

    def _requeue(self, checkpoints: Checkpoints, newest: list[Path]) -> None:
        """Main process, the stop's checkpoint durable (every process waited for it): under
        SLURM, ``scontrol requeue`` this job, once."""
        job = job_to_requeue()
        if job is None:
            return  # not under SLURM: the stop is all
        if not checkpoints.scheduled or not newest:
            logger.error(
                "SLURM job %s was not requeued: the run writes no checkpoints "
                "(checkpoint_every=None), so a requeued job would start over",
                job,
            )
            return
        requeue(job, str(newest[-1]))
