"""Which loader each epoch of a run reads, and how many of its batches.

One dataset: every epoch is one whole pass of its loader. Stages (a curriculum): each stage's
loader is passed over again and again until the global optimizer step reaches the stage's end;
each pass is an epoch, and the pass the stage's end cuts short is an epoch too. Everything
follows from the stage ends, the loaders' lengths and the accumulation window, so a resumed run
finds its stage from its epoch counter: no extra state is checkpointed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
from accelerate.data_loader import (
    BatchSamplerShard,
    DataLoaderDispatcher,
    DataLoaderShard,
    IterableDatasetShard,
)
from torch.utils.data import BatchSampler, IterableDataset

from ._loaders import length_or_none
from ._streams import reads_from_state
from ._token_budget import plan_budget

if TYPE_CHECKING:
    from accelerate import Accelerator


@attrs.frozen
class StageLayout:
    """The epochs of a curriculum, from plain numbers (a checkpoint's facts hold them)."""

    end_steps: tuple[int, ...]
    """The global step at which each stage ends."""
    lengths: tuple[int, ...]
    """Batches in one pass of each stage's loader, on this process."""
    accumulation: int
    """Batches per optimizer step (gradient accumulation); a pass's end closes a window."""

    def passes(self, stage: int) -> tuple[int, int]:
        """How many epochs ``stage`` takes, and how many batches its last one reads."""
        start = self.end_steps[stage - 1] if stage else 0
        steps = self.end_steps[stage] - start
        length = self.lengths[stage]
        per_pass = math.ceil(length / self.accumulation)
        count = math.ceil(steps / per_pass)
        last_steps = steps - (count - 1) * per_pass
        return count, length if last_steps == per_pass else last_steps * self.accumulation

    @property
    def epochs(self) -> int:
        return sum(self.passes(stage)[0] for stage in range(len(self.end_steps)))

    def epoch(self, epoch: int) -> tuple[int, int]:
        """The stage of ``epoch``, and how many batches it reads."""
        for stage, length in enumerate(self.lengths):
            count, last = self.passes(stage)
            if epoch < count:
                return stage, last if epoch == count - 1 else length
            epoch -= count
        raise IndexError(f"the curriculum has {self.epochs} epochs; there is no epoch {epoch}")

    def counters_at(self, epoch: int, seen: int) -> tuple[int, int]:
        """``(global_step, batch_iteration)`` after ``seen`` batches of ``epoch``."""
        step = batches = 0
        for before in range(epoch):
            _, read = self.epoch(before)
            step, batches = step + math.ceil(read / self.accumulation), batches + read
        return step + math.ceil(seen / self.accumulation), batches + seen

    def stage_facts(self) -> tuple[tuple[int, int], ...]:
        """``(end step, batches of a pass)`` per stage: what a checkpoint records of them."""
        return tuple(zip(self.end_steps, self.lengths, strict=True))

    @classmethod
    def from_stage_facts(cls, stages: Sequence[tuple[int, int]], accumulation: int) -> StageLayout:
        return cls(
            tuple(end for end, _ in stages), tuple(length for _, length in stages), accumulation
        )


@attrs.frozen
class EpochPlan:
    """The run's training loaders and the layout of its epochs over them."""

    loaders: tuple[DataLoaderShard, ...]
    layout: StageLayout | None
    """None for one dataset: every epoch is a whole pass of ``loaders[0]``."""

    @classmethod
    def build(
        cls, loaders: Sequence[DataLoaderShard], end_steps: Sequence[int] | None, accumulation: int
    ) -> EpochPlan:
        if end_steps is None:
            return cls(tuple(loaders), None)
        lengths = tuple(len(loader) for loader in loaders)
        return cls(tuple(loaders), StageLayout(tuple(end_steps), lengths, accumulation))

    def epoch(self, epoch: int) -> tuple[DataLoaderShard, int | None]:
        """The loader ``epoch`` reads, and how many of its batches (None: a stream without a
        length, read to its end)."""
        if self.layout is None:
            return self.loaders[0], length_or_none(self.loaders[0])
        stage, batches = self.layout.epoch(epoch)
        return self.loaders[stage], batches

    def stage(self, epoch: int) -> int:
        """The index of the stage ``epoch`` belongs to (0 for one dataset)."""
        return 0 if self.layout is None else self.layout.epoch(epoch)[0]

    @property
    def batches_per_epoch(self) -> int | None:
        """Batches of one pass of the first loader on this process (None: no length)."""
        return length_or_none(self.loaders[0])

    @property
    def order_batches(self) -> int | None:
        """Batches of one pass of the order Accelerate deals out (:func:`order_batches`)."""
        return order_batches(self.loaders[0])

    @property
    def stream(self) -> str | None:
        """The training stream's name (its type's; a stream that Accelerate splits by
        wrapping it, the stream's own), or None for a map-style dataset."""
        dataset = self.loaders[0].dataset
        if isinstance(dataset, IterableDatasetShard):
            dataset = dataset.dataset
        return type(dataset).__name__ if isinstance(dataset, IterableDataset) else None

    @property
    def stage_facts(self) -> tuple[tuple[int, int], ...] | None:
        """The stages as a checkpoint records them, or None for one dataset."""
        return None if self.layout is None else self.layout.stage_facts()


def order_batches(loader: Any) -> int | None:
    """Batches per epoch of the one order that Accelerate deals out to the processes (the
    batch sampler before it is sharded), or None when it has no length this can read (an
    iterable dataset, batches dispatched or split)."""
    sampler = loader.sampler if isinstance(loader.sampler, BatchSampler) else loader.batch_sampler
    if isinstance(sampler, BatchSamplerShard):
        return None if sampler.split_batches else len(sampler.batch_sampler)
    if isinstance(loader, DataLoaderDispatcher) or isinstance(loader.dataset, IterableDataset):
        return None
    try:
        return len(sampler)
    except TypeError:
        return None


def epoch_batches(accelerator: Accelerator, loader: Any, epoch: int, seen: int) -> Any:
    """The batches ``loader`` gives in ``epoch``, past the ``seen`` that a resumed run already
    consumed (a loader that resumes from its own state starts at its place)."""
    loader.set_epoch(epoch)
    # A token-budget sampler plans the epoch for the processes its batches are dealt to
    # (Accelerate passes the epoch on to it only on one process).
    plan_budget(loader, epoch)
    # A collate_fn whose randomness follows the epoch (accmt-collators' masking ones)
    # learns it here, before the iterator copies it into DataLoader workers.
    set_collate_epoch = getattr(loader.collate_fn, "set_epoch", None)
    if callable(set_collate_epoch):
        set_collate_epoch(epoch)
    done = 0 if reads_from_state(loader) else seen
    # Skips by index where the sampler allows: skipped samples are never loaded.
    return accelerator.skip_first_batches(loader, done) if done else loader
