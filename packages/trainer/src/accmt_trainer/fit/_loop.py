"""The training loop: ``fit`` -> epoch -> step -> optimizer step, with evaluation and checkpoints
at the boundaries the options name. Each concern is asked of its owner."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch.utils.data import IterableDataset

from accmt_callbacks import CallbackHandler

from .._errors import StepOutputError
from .._module import ExtendedAcceleratorModule
from ..checkpointing import CheckpointSchedule, Unit, restore_lengths, schedule_lengths
from ..console import evaluation_postfix, logger, metrics_line
from ..data import reads_from_state
from ..evaluation import EvaluationOptions, LossWindow, split_training_output
from ..runtime import LoggingOptions, Usage, kept_rng_states
from ._owners import Owners
from ._setup import Run
from ._start_lines import replay_line
from ._throughput import Throughput

if TYPE_CHECKING:
    from accmt_state import TrainingState

    from .._module import AcceleratorModule, LogValues

_END = object()
_NO_CONTEXT = contextlib.nullcontext()


class TrainingLoop:
    """Runs one ``fit`` from its first (or resumed) batch to ``on_fit_end``."""

    def __init__(
        self,
        run: Run,
        module: AcceleratorModule,
        state: TrainingState,
        callbacks: CallbackHandler,
        owners: Owners,
        *,
        evaluation_options: EvaluationOptions,
        logging_options: LoggingOptions,
        checkpoint_schedule: CheckpointSchedule | None,
        log: LogValues,
        run_facts: Mapping[str, Any],
    ) -> None:
        self.run, self.module, self.state = run, module, state
        self.callbacks, self.owners = callbacks, owners
        self.evaluation_options, self.logging_options = evaluation_options, logging_options
        self.checkpoint_schedule, self.log, self.run_facts = checkpoint_schedule, log, run_facts
        device = run.accelerator.device
        self.loss_since_log, self.epoch_loss = LossWindow(device), LossWindow(device)
        self._extended = isinstance(module, ExtendedAcceleratorModule)
        # Without accumulation every batch steps: Accelerate's accumulate() would only add its
        # bookkeeping to each step. Its flag must still say that gradients sync.
        self._accumulating = run.accelerator.gradient_accumulation_steps > 1
        if not self._accumulating:
            run.accelerator.sync_gradients = True
        self._last_checkpoint: tuple[int, int, int] | None = None
        self.throughput = Throughput(logging_options.monitor, run.accelerator, run.train_batch_size)
        self.usage = Usage(
            logging_options.monitor, device, main_process=run.accelerator.is_main_process
        )
        self._epoch_batches = run.plan.epoch(0)[1]  # batches the current epoch reads
        self._summed: bool | None = None  # whether the steps give num_items (the first says)

    # ----------------------------------------------------------------------------- run

    def reached_end(self) -> bool:
        """Whether the run did all its epochs or its ``max_steps``: it is finished."""
        state = self.state
        return state.epoch >= self.run.epochs or state.global_step >= self.run.total_steps

    def restore(self, process_state: Mapping[str, Any]) -> None:
        """Take the loss windows of a checkpoint; this moment is that checkpoint."""
        self.loss_since_log.load_state_dict(process_state["window"])
        self.epoch_loss.load_state_dict(process_state["epoch"])
        self._last_checkpoint = self._moment()

    def fit(self, resuming: Path | None) -> None:
        self.usage.restart()
        self.callbacks.call("on_fit_start")
        rest = self._resume(resuming) if resuming is not None else None
        start = self.evaluation_options.eval_when_start and resuming is None
        if start and self.owners.evaluation.has_data:
            self._evaluate()
        self.owners.profiler.at_step(self.state.global_step)
        while not (self.reached_end() or self.owners.stop.agreed):
            self._train_epoch(rest)
            rest = None
        self.owners.stop.close()
        evaluation = self.owners.evaluation
        if (
            self.evaluation_options.eval_when_finish
            and evaluation.has_data
            and self.reached_end()
            and not evaluation.evaluated_current_weights()
        ):
            self._evaluate()
        self.state.finished = self.reached_end()
        self.checkpoint()
        # Every process's on_fit_end finds the last checkpoint synced and the oldest removed.
        self.owners.checkpoints.wait()
        self.run.accelerator.wait_for_everyone()
        self.callbacks.call("on_fit_end")

    def _resume(self, folder: Path) -> Iterator[Any] | None:
        """Restore model, optimizer, scheduler, scaler and RNGs, fire on_resume, and return the
        rest of the interrupted epoch's batches (None when it stopped between epochs)."""
        rest: Iterator[Any] | None = None
        self._enter_stage()  # a checkpoint of schema 3 had no stage index
        loader = self.run.plan.epoch(self.state.epoch)[0]
        within = self.state.batches_seen_in_epoch > 0
        from_state = within and reads_from_state(loader)
        if within and not from_state:
            # Starting an epoch's iterator draws from the global RNG. The interrupted run drew
            # before its checkpoint, so this run draws first and restores the RNGs after.
            self._say_replayed(loader)
            rest = self._rest_of_epoch(loader)
        # The schedule keeps this run's length, where the scheduler's state holds the
        # checkpoint's (a resume on another number of processes, or with more epochs).
        lengths = schedule_lengths(self.run.scheduler)
        self.owners.checkpoints.load_accelerate(folder)  # a stateful loader's place too
        restore_lengths(lengths)
        if from_state:
            # The loader starts at its restored place; its iterator's draw from the RNGs was
            # the interrupted run's, before its checkpoint, so it is given back.
            with kept_rng_states():
                rest = self._rest_of_epoch(loader)
        self.callbacks.call("on_resume")
        return rest

    def _rest_of_epoch(self, loader: Any) -> Iterator[Any]:
        batches = iter(self._epoch_loader(loader))
        first = next(batches, _END)
        return iter(()) if first is _END else itertools.chain([first], batches)

    def _say_replayed(self, loader: Any) -> None:
        if isinstance(loader.dataset, IterableDataset) and self.run.accelerator.is_main_process:
            logger.info("%s", replay_line(self.state.batches_seen_in_epoch, self.state.epoch))

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
        batches = rest or iter(self._epoch_loader(loader))
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

    def _epoch_loader(self, loader: Any) -> Any:
        """This epoch's batches of ``loader``, past those a resumed run already consumed."""
        loader.set_epoch(self.state.epoch)
        # A collate_fn whose randomness follows the epoch (accmt-collators' masking ones)
        # learns it here, before the iterator copies it into DataLoader workers.
        set_collate_epoch = getattr(loader.collate_fn, "set_epoch", None)
        if callable(set_collate_epoch):
            set_collate_epoch(self.state.epoch)
        done = 0 if reads_from_state(loader) else self.state.batches_seen_in_epoch
        # Skips by index where the sampler allows: skipped samples are never loaded.
        return self.run.accelerator.skip_first_batches(loader, done) if done else loader

    def _end_epoch(self) -> None:
        state, owners = self.state, self.owners
        state.is_end_of_epoch = True
        train_loss = self.epoch_loss.reduce_mean(self.run.accelerator)
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
        every = self.evaluation_options.evaluate_every_n_epochs
        return self.owners.evaluation.has_data and (self.state.epoch + 1) % every == 0

    # ---------------------------------------------------------------------------- step

    def _step(self, batch: Any) -> None:
        accelerator, state, owners = self.run.accelerator, self.state, self.owners
        self.callbacks.call("on_before_training_step", batch)
        owners.optimizer_step.start_batch()
        with accelerator.accumulate(self.run.model) if self._accumulating else _NO_CONTEXT:
            output = self.module.training_step(batch)
            loss, items = split_training_output(self.module, output, may_be_none=self._extended)
            self._check_items_given(items)
            self.throughput.count(items)
            if loss is not None and not self._extended:
                owners.optimizer_step.step(loss, items)
        if loss is not None:
            detached = loss.detach()
            if owners.guard.add(detached, state.global_step + 1):
                self.loss_since_log.add(detached, items)
                self.epoch_loss.add(detached, items)
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
        every = self.evaluation_options.evaluate_every_n_steps
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
        self.owners.guard.check()
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
        schedule = self.checkpoint_schedule
        return schedule is not None and schedule.due(unit, count)

    def _moment(self) -> tuple[int, int, int]:
        state = self.state
        return (state.global_step, state.epoch, state.evaluations_done)

    def checkpoint(self) -> None:
        """Write a checkpoint of this moment, an optimizer-step boundary, unless one exists."""
        if self.checkpoint_schedule is None or self._moment() == self._last_checkpoint:
            return
        self.owners.guard.check(self.run.model.parameters())
        self._last_checkpoint = self._moment()
        self.callbacks.call("on_save_checkpoint")
        self.state.num_checkpoints_made += 1
        losses = {"window": self.loss_since_log.state_dict(), "epoch": self.epoch_loss.state_dict()}
        teacher = self.module.teacher
        models = [self.run.model] if teacher is None else [self.run.model, teacher]
        self.owners.checkpoints.save(
            self.state.num_checkpoints_made,
            self.run_facts,
            self.state,
            self.callbacks,
            losses,
            snapshot_of=(models, self.run.optimizer, self.run.scheduler),
        )

    # ------------------------------------------------------------------------- logging

    def _log_training(self) -> None:
        values: dict[str, float] = {}
        monitor, state = self.logging_options.monitor, self.state
        mean = self.loss_since_log.reduce_mean(self.run.accelerator)
        self.owners.guard.check_logged_mean(mean)
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
