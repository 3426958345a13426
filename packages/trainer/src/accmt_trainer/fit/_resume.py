"""Reading a checkpoint back into a fit: :meth:`Resume.restore`, every stateful part of the run
in one sequence, read top to bottom.

Where the run starts (which checkpoint, its state moved to this run's position, this process's
loss windows, the tracker runs) is read once the loaders are prepared, before the schedule is
sized (``Checkpoints.start``); the trackers continue their runs as they start. What is left is
restored here, once the run's objects exist and its checks have passed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torch.utils.data import IterableDataset

from ..checkpointing import (
    load_accelerate_state,
    load_objects,
    read_callback_states,
    read_stream_place,
    restore_lengths,
    schedule_lengths,
)
from ..data import epoch_batches, reads_from_state
from ..runtime import kept_rng_states

if TYPE_CHECKING:
    from pathlib import Path

    from accmt_callbacks import CallbackHandler
    from accmt_state import TrainingState

    from ..checkpointing import Checkpointable, Start
    from ..evaluation import TrainingLosses
    from ._setup import PreparedRun

_END = object()


class Resume:
    """A fit resumed from the checkpoint ``start`` found: :meth:`restore` reads the rest of it
    back into ``run``, ``losses``, the ``callbacks`` and the registered ``objects`` (the weight
    average among them)."""

    def __init__(
        self,
        start: Start,
        run: PreparedRun,
        losses: TrainingLosses,
        callbacks: CallbackHandler,
        objects: Sequence[Checkpointable],
    ) -> None:
        assert start.folder is not None  # a checkpoint's start
        assert start.losses is not None
        self.folder: Path = start.folder
        self.saved_losses: Mapping[str, Any] = start.losses
        self.start, self.run, self.losses = start, run, losses
        self.callbacks, self.objects = callbacks, list(objects)

    @property
    def state(self) -> TrainingState:
        assert self.start.state is not None
        return self.start.state

    def restore(self) -> Iterator[Any] | None:
        """Every stateful part of the run as the checkpoint holds it, in this order, firing
        ``on_fit_start`` and ``on_resume`` where the Callback contract puts them; returns the
        rest of the interrupted epoch's batches (None when it stopped between epochs). A run
        that had reached its end gets its state back and fires nothing: it trains no more."""
        folder, run, state = self.folder, self.run, self.state
        left = not run.reached_end(state)
        # 1. The callbacks' states, then the objects given to register_for_checkpointing (the
        #    weight average among them), then this process's loss windows.
        self.callbacks.load_state_dict(read_callback_states(folder))
        load_objects(folder, self.objects)
        self.losses.load_state_dict(self.saved_losses)
        # 2. on_fit_start sees the state and the callbacks' states; what it draws from the
        #    random generators does not count, as in the interrupted run's own start.
        if left:
            with kept_rng_states():
                self.callbacks.call("on_fit_start")
        # 3. The epoch's stage; a loader read again from the epoch's start draws from the
        #    RNGs as the interrupted run's did before its checkpoint: so before they are back.
        loader, rest, within = None, None, False
        if left:
            state.train_dataloader_idx = run.plan.stage(state.epoch)
            loader, total = run.plan.epoch(state.epoch)
            seen = state.batches_seen_in_epoch
            # An epoch read to its end but not closed has nothing left to read (an empty
            # skipping loader would give one None batch in Accelerate 1.2).
            if total is not None and seen >= total:
                rest = iter(())
            within = seen > 0 and rest is None
        if within and not reads_from_state(loader):
            rest = self._rest_of_epoch(loader)
        # 4. Weights, optimizer, scheduler (its length this run's), gradient scaler and RNGs:
        #    Accelerate's load_state, read with weights_only=True (the frozen weights the
        #    checkpoint left out, checked at the start, stay as they are).
        lengths = schedule_lengths(run.scheduler)
        load_accelerate_state(run.accelerator, folder, self.start.frozen)
        restore_lengths(lengths)
        # 5. A stream that keeps its place goes on from this process's own (the checkpoint's
        #    part of this process; the run has the checkpoint's number of processes, or the
        #    start refused it); its iterator's draw from the RNGs was the interrupted run's,
        #    before its checkpoint, so it is given back.
        if within and reads_from_state(loader):
            assert loader is not None  # within an epoch, which has its loader
            made_on = self.start.made_on or run.accelerator.num_processes
            loader.load_state_dict(
                read_stream_place(folder, run.accelerator.process_index, made_on)
            )
            with kept_rng_states():
                rest = self._rest_of_epoch(loader)
        if left:
            self.callbacks.call("on_resume")
        return rest

    def replayed(self) -> int:
        """The batches of the interrupted epoch that :meth:`restore` reads again and skips to
        reach the checkpoint's place: a stream's, whose loader keeps no place of its own (a
        map-style dataset's are skipped by index, never read); 0 between epochs."""
        run, state = self.run, self.state
        seen = state.batches_seen_in_epoch
        if run.reached_end(state) or not seen:
            return 0
        loader, total = run.plan.epoch(state.epoch)
        stream = isinstance(loader.dataset, IterableDataset) and not reads_from_state(loader)
        return seen if stream and (total is None or seen < total) else 0

    def _rest_of_epoch(self, loader: Any) -> Iterator[Any]:
        state = self.state
        batches = iter(
            epoch_batches(self.run.accelerator, loader, state.epoch, state.batches_seen_in_epoch)
        )
        first = next(batches, _END)
        return iter(()) if first is _END else itertools.chain([first], batches)
