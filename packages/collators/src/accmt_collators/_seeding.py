"""The (seed, epoch) a masking collator's randomness is a function of."""

from __future__ import annotations

from typing import Any

import torch

from ._base import Collator
from ._errors import CollatorError
from ._keyed_random import salt_of
from ._plain import KeyPath

_UNSET = -1


class EpochSeed:
    """A seed, and an epoch that ``set_epoch`` changes and DataLoader workers read.

    The epoch lives in one int64 of shared memory: a worker process, forked or spawned, even
    a persistent one started in an earlier epoch, reads the value the main process set last.
    """

    def __init__(self, owner: str, seed: int | None) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise CollatorError(f"{owner}: seed must be an int or None, got {seed!r}")
        self.owner = owner
        self.seed = seed
        epoch = torch.full((), _UNSET, dtype=torch.int64)
        self._epoch = epoch.share_memory_()  # type: ignore[no-untyped-call]  # torch: untyped

    def set_epoch(self, epoch: int) -> None:
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise CollatorError(f"{self.owner}.set_epoch: epoch must be an int >= 0, got {epoch!r}")
        if self.seed is None:
            # The global generator's seed: what the Trainer's seed= (or torch.manual_seed) set.
            self.seed = torch.initial_seed()
        self._epoch.fill_(epoch)

    @property
    def epoch(self) -> int | None:
        value = int(self._epoch.item())
        return None if value == _UNSET else value

    def salt(self, path: KeyPath) -> int:
        """The salt of one tokenized place of the samples for this batch."""
        epoch = self.epoch
        if self.seed is None:
            # Neither a seed nor an epoch was ever given: draw like transformers' collators
            # without a seed, from torch's global generator (a worker's is seeded per worker by
            # the DataLoader). set_epoch takes torch's seed, and the draws become keyed.
            return int(torch.randint(-(2**63), 2**63 - 1, ()).item())
        # A seed given to the collator holds from its first batch: epoch 0 until set_epoch.
        return salt_of(self.seed, 0 if epoch is None else epoch, path)


class SeededCollator(Collator):
    """A collator whose randomness is a function of (seed, epoch, sample): the masking ones."""

    def __init__(self, tokenizer: Any, return_tensors: str, seed: int | None) -> None:
        super().__init__(tokenizer, return_tensors)
        self.seeding = EpochSeed(self._owner, seed)

    @property
    def seed(self) -> int | None:
        """The seed of the draws (None until ``set_epoch`` takes torch's when none was given)."""
        return self.seeding.seed

    @property
    def epoch(self) -> int | None:
        """The epoch last given to :meth:`set_epoch` (None before the first call, when a
        collator given a ``seed`` draws epoch 0's masks)."""
        return self.seeding.epoch

    def set_epoch(self, epoch: int) -> None:
        """Draw this epoch's masks as a function of (seed, ``epoch``, sample).

        accmt's Trainer calls it before each epoch's batches, also when it resumes; a loop of
        one's own calls it at the start of each epoch. Until the first call, a collator given
        a ``seed`` draws epoch 0's masks; one without draws each batch from torch's global
        generator, as transformers' collators without a seed do.
        """
        self.seeding.set_epoch(epoch)
