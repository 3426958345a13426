"""The training loop: ``fit`` -> epoch -> step -> optimizer step, with evaluation and checkpoints
at the boundaries the options name. Each concern is asked of its owner."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from accmt_callbacks import CallbackHandler

from .._errors import StepOutputError
from .._module import ExtendedAcceleratorModule
from ..checkpointing import RunFacts, Unit
from ..console import evaluation_postfix, logger, metrics_line
from ..data import epoch_batches, stream_place
from ..evaluation import split_training_output, without_documents
from ..runtime import LoggingOptions, Usage
from ._loop_options import LoopOptions
from ._owners import Owners
from ._setup import PreparedRun
from ._throughput import Throughput

if TYPE_CHECKING:
    from accmt_state import TrainingState

    from .._module import AcceleratorModule, LogValues

_NO_CONTEXT = contextlib.nullcontext()


class TrainingLoop:
    """Runs one ``fit`` from its first (or resumed) batch to ``on_fit_end``."""

    def __init__(
        self,
        run: PreparedRun,
        module: AcceleratorModule,
        state: TrainingState,
        callbacks: CallbackHandler,
        owners: Owners,
        *,
        options: LoopOptions,
        logging_options: LoggingOptions,
        log: LogValues,
        facts: RunFacts,
        tracker_runs: Mapping[str, str],
        resumed: bool,
    ) -> None:
        self.run, self.module, self.state = run, module, state
        self.callbacks, self.owners = callbacks, owners
        self.options, self.logging_options, self.log = options, logging_options, log
        self.facts, self.tracker_runs = facts, dict(tracker_runs)
        """What every checkpoint records: the run's facts and the tracker runs it continues."""
        self.resumed = resumed
        """Whether the run goes on from a checkpoint (``Resume`` fired its start hooks)."""
        device = run.accelerator.device
        self.losses = owners.losses
        self._extended = isinstance(module, ExtendedAcceleratorModule)
        # Without accumulation every batch steps: Accelerate's accumulate() would only add its
        # bookkeeping to each step. Its flag must still say that gradients sync.
        self._accumulating = run.accelerator.gradient_accumulation_steps > 1
        if not self._accumulating:
            run.accelerator.sync_gradients = True
        # A resumed run's moment is its checkpoint's, which is not written again.
        self._last_checkpoint = self._moment() if resumed else None
        self.throughput = Throughput(logging_options.monitor, run.accelerator, run.train_batch_size)
        self.usage = Usage(
            logging_options.monitor, device, main_process=run.accelerator.is_main_process
        )
        self._epoch_batches = run.plan.epoch(0)[1]  # batches the current epoch reads
        self._summed: bool | None = None  # whether the steps give num_items (the first says)
        self._where = f"{type(module).__name__}.training_step(batch)"

    # ----------------------------------------------------------------------------- run

    def reached_end(self) -> bool:
        """Whether the run did all its epochs or its ``max_steps``: it is finished."""
        return self.run.reached_end(self.state)

    def fit(self, rest: Iterator[Any] | None) -> None:
        """Train to the run's end or an agreed stop; ``rest`` is a resumed epoch's batches."""
        self.usage.restart()
        if not self.resumed:  # a resume fired its start hooks as it read the checkpoint back
            self.callbacks.call("on_fit_start")
            if self.options.eval_when_start and self.owners.evaluation.has_data:
                self._evaluate()
        self.owners.profiler.at_step(self.state.global_step)
        while not (self.reached_end() or self.owners.stop.agreed):
            self._train_epoch(rest)
            rest = None
        self.owners.stop.close()
        evaluation = self.owners.evaluation
        if (
            self.options.eval_when_finish
            and evaluation.has_data
            and self.reached_end()
            and not evaluation.evaluated_current_weights()
        ):
            self._evaluate()
        self.state.finished = self.reached_end()
        self._say_what_stopped()
        self.checkpoint()
        # Every process's on_fit_end finds the last checkpoint synced and the oldest removed.
        self.owners.checkpoints.wait()
        self.run.accelerator.wait_for_everyone()
        self.callbacks.call("on_fit_end")

    def _say_what_stopped(self) -> None:
        """The state, and so the run's last checkpoint, says what stopped a run before its end:
        the stop request's reason, and the signal behind it (the same on every process)."""
        stopped = self.owners.stop.agreed and not self.reached_end()
        received = self.owners.stop.stop_signal if stopped else None
        self.state.update(
            stop_reason=self.callbacks.stop_reason if stopped else None,
            stop_signal=None if received is None else received.name,
        )

    # --------------------------------------------------------------------------- epoch

    def _train_epoch(self, rest: Iterator[Any] | None) -> None:
        """One epoch, or the rest of a resumed one (``on_epoch_start`` fired before the kill).
        The epoch reads the loader and the number of batches the run's plan gives it: a whole
        pass, or with stages, the part of a pass up to the end of its stage."""
        state = self.state
        loader, total = self.run.plan.epoch(state.epoch)
        self._enter_stage()
        if rest is None:
            state.is_last_epoch = state.epoch == self.run.epochs - 1
            state.is_end_of_epoch = state.is_last_training_batch = False
            self.callbacks.call("on_epoch_start")
        self.run.model.train()
        self._epoch_batches = total
        self.owners.progress.start_epoch(
            state.epoch, self.run.epochs, total, state.batches_seen_in_epoch
        )
        self.throughput.restart(state.batch_iteration)
        seen = state.batches_seen_in_epoch
        batches = rest or iter(epoch_batches(self.run.accelerator, loader, state.epoch, seen))
        if total is not None and total < len(loader):
            batches = itertools.islice(batches, total - state.batches_seen_in_epoch)
        gradient_state = self.run.accelerator.gradient_state
        for batch in batches:
            if total is None:
                # Accelerate reads one batch ahead, so it knows a stream's last batch.
                state.is_last_training_batch = gradient_state.end_of_dataloader
            elif state.batches_seen_in_epoch == total - 1:
                state.is_last_training_batch = True
            self._step(batch)
            if not self.run.accelerator.sync_gradients:
                continue  # a stop waits for the end of the optimizer step
            if self.owners.stop.agreed or (
                state.global_step >= self.run.total_steps and not state.is_last_training_batch
            ):
                # The epoch stays unfinished: a resume from this step's checkpoint ends it.
                return
        self._end_epoch()

    def _enter_stage(self) -> None:
        """The state names the curriculum stage of its epoch; assigning it runs the field's
        validators, like every assignment to the state."""
        self.state.train_dataloader_idx = self.run.plan.stage(self.state.epoch)

    def _end_epoch(self) -> None:
        state, owners = self.state, self.owners
        state.is_end_of_epoch = True
        train_loss = self.losses.epoch.reduce_mean(self.run.accelerator)
        if train_loss is not None and train_loss < state.best_train_loss:
            state.best_train_loss = train_loss
        owners.optimizer_step.end_epoch()
        if self.logging_options.log_every == "epoch":
            self._log_training()
        evaluate = self._epoch_end_evaluates() and not owners.stop.exchange()
        if evaluate:
            self._evaluate()
        with self._averaged():
            owners.best_models.after_epoch(train_loss)
        self.callbacks.call("on_epoch_end")
        state.epoch += 1
        state.batches_seen_in_epoch = state.train_step = 0
        # After the epoch is closed, so that a resume starts the next one cleanly. The last
        # epoch's is left to the end of the run, which records whether the run finished.
        due = self._due("epoch", state.epoch) or (
            evaluate and self._due("eval", state.evaluations_done)
        )
        if due and not (owners.stop.exchange() or self.reached_end()):
            self.checkpoint()

    def _epoch_end_evaluates(self) -> bool:
        every = self.options.evaluate_every_n_epochs
        return self.owners.evaluation.has_data and (self.state.epoch + 1) % every == 0

    # ---------------------------------------------------------------------------- step

    def _step(self, batch: Any) -> None:
        accelerator, state, owners = self.run.accelerator, self.state, self.owners
        self.callbacks.call("on_before_training_step", batch)
        owners.optimizer_step.start_batch()
        with accelerator.accumulate(self.run.model) if self._accumulating else _NO_CONTEXT:
            # A flattened batch's document_spans are for evaluation: they never reach a model.
            output = self.module.training_step(without_documents(batch, self._where))
            loss, items = split_training_output(self.module, output, may_be_none=self._extended)
            self._check_items_given(items)
            self.throughput.count(items)
            if loss is not None and not self._extended:
                owners.optimizer_step.step(loss, items)
        if loss is not None:
            detached = loss.detach()
            if owners.nonfinite_guard.add(detached, state.global_step + 1):
                self.losses.since_log.add(detached, items)
                self.losses.epoch.add(detached, items)
        owners.progress.advance()
        state.batch_iteration += 1
        state.batches_seen_in_epoch += 1
        state.train_step = state.batches_seen_in_epoch
        syncing = accelerator.sync_gradients
        if syncing:
            state.global_step += 1
        self.callbacks.call("on_after_training_step")
        if syncing:
            self._after_optimizer_step()

    def _check_items_given(self, items: object) -> None:
        """A run's steps all give ``num_items`` (summed losses) or none do (mean losses)."""
        given = items is not None
        if self._summed is None:
            self._summed = given
        elif given != self._summed:
            first = "summed losses with num_items" if self._summed else "mean losses"
            raise StepOutputError(
                f"{type(self.module).__name__}.training_step(batch) returned "
                f"{'a num_items' if given else 'no num_items'} at batch "
                f"{self.state.batch_iteration + 1}, where the run's first steps returned "
                f"{first}; return num_items on every step or on none"
            )

    def _after_optimizer_step(self) -> None:
        step, log_every = self.state.global_step, self.logging_options.log_every
        stop = self.owners.stop
        stop.exchange()  # a stop asked on any process, agreed by all at this step
        average = self.owners.average
        if average is not None and self.owners.optimizer_step.stepped:
            average.update()
        self.owners.optimizer_step.after_step(step)
        if log_every != "epoch" and step % log_every == 0:
            self._log_training()
        every = self.options.evaluate_every_n_steps
        evaluated = False
        if every and step % every == 0 and self.owners.evaluation.has_data:
            epoch_end_follows = self.state.is_last_training_batch and self._epoch_end_evaluates()
            if not epoch_end_follows:
                self._evaluate()
                evaluated = True
                stop.exchange()  # asked by the evaluation (patience): taken at this step
        if (
            stop.agreed
            or self._due("step", step)
            or (evaluated and self._due("eval", self.state.evaluations_done))
        ):
            self.checkpoint()
        self.owners.profiler.at_step(step)

    # ----------------------------------------------------------- evaluation, checkpoints

    def _evaluate(self) -> None:
        self.owners.nonfinite_guard.check()
        self.callbacks.call("on_evaluation_start")
        with self._averaged():
            results = self.owners.evaluation.evaluate()
            self.owners.progress.show_evaluation(evaluation_postfix(results))
            if self.run.accelerator.is_main_process:
                logger.info("%s", metrics_line(self.state, self.run.epochs, results))
            self.owners.best_models.after_evaluation()
        self.callbacks.call("on_evaluation_end")

    def _averaged(self) -> contextlib.AbstractContextManager[None]:
        """The weight average in the model (``ema_decay``), else the model as it is."""
        average = self.owners.average
        return _NO_CONTEXT if average is None else average.applied()

    def _due(self, unit: Unit, count: int) -> bool:
        return self.owners.checkpoints.due(unit, count)

    def _moment(self) -> tuple[int, int, int]:
        state = self.state
        return (state.global_step, state.epoch, state.evaluations_done)

    def checkpoint(self) -> None:
        """Write a checkpoint of this moment, an optimizer-step boundary, unless one exists."""
        if not self.owners.checkpoints.scheduled or self._moment() == self._last_checkpoint:
            return
        self.owners.nonfinite_guard.check(self.run.model.parameters())
        self._say_what_stopped()
        self._last_checkpoint = self._moment()
        self.callbacks.call("on_save_checkpoint")
        self.state.num_checkpoints_made += 1
        teacher = self.module.teacher
        models = [self.run.model] if teacher is None else [self.run.model, teacher]
        plan = self.run.plan  # a stream is one dataset, never a curriculum's stage
        self.owners.checkpoints.save(
            self.state.num_checkpoints_made,
            self.facts,
            self.state,
            self.callbacks,
            self.losses.state_dict(),
            tracker_runs=self.tracker_runs,
            snapshot_of=(models, self.run.optimizer, self.run.scheduler),
            stream=stream_place(plan.loaders[0]) if plan.layout is None else None,
        )

    # ------------------------------------------------------------------------- logging

    def _log_training(self) -> None:
        values: dict[str, float] = {}
        monitor, state = self.logging_options.monitor, self.state
        mean = self.losses.since_log.reduce_mean(self.run.accelerator)
        self.owners.nonfinite_guard.check_logged_mean(mean)
        if monitor.train_loss and mean is not None:
            values["train/loss"] = mean
        if monitor.epoch:
            total = self._epoch_batches
            within = 0.0 if total is None else state.batches_seen_in_epoch / max(total, 1)
            values["train/epoch"] = state.epoch + within
        if monitor.learning_rate:
            values.update(learning_rates(self.run.optimizer))
        grad_norm = self.owners.optimizer_step.grad_norm if monitor.grad_norm else None
        if grad_norm is not None:
            values["train/grad_norm"] = grad_norm
        values.update(self.throughput.read(state.batch_iteration))
        values.update(self.usage.read())
        if state.skipped_steps:
            values["train/skipped_steps"] = float(state.skipped_steps)
        self.owners.progress.show({k.removeprefix("train/"): v for k, v in values.items()})
        self.log(values)


def learning_rates(optimizer: Any) -> dict[str, float]:
    """``train/lr``, or with several parameter groups ``train/lr/<i>`` for each."""
    groups = optimizer.param_groups
    if len(groups) == 1:
        return {"train/lr": float(groups[0]["lr"])}
    return {f"train/lr/{index}": float(group["lr"]) for index, group in enumerate(groups)}
