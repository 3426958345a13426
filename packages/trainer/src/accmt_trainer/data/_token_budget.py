"""Batches by token budget: ``TokenBudgetBatchSampler``, a batch sampler whose batches each
cost at most ``max_tokens``, planned for all the job's processes at once, and the two things
the Trainer tells it (the processes its batches are dealt to, the epoch) through the wrappers
Accelerate puts around it."""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Iterator, Sequence
from typing import Any, TypeGuard

import torch
from torch.utils.data import Sampler

from .._errors import TrainerConfigError

_NAME = "TokenBudgetBatchSampler"


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Batches of dataset indices whose cost stays within ``max_tokens``, for
    ``Trainer(batch_sampler=...)``.

    A batch's cost is the tokens it computes: with ``packed=False`` (batches padded to their
    longest sample) the longest length times the number of samples; with ``packed=True``
    (samples joined into one row by a collator that flattens, such as accmt-collators'
    ``DataCollatorWithFlattening``) the sum of the lengths.

    The batches are formed once, greedily, from the samples sorted by length: each batch is a
    run of neighbours in that order, so samples of like length share a batch and padding is
    small. They are the job's batches, all processes together: Accelerate deals them round-robin
    to the processes, and the Trainer tells the sampler their number
    (:meth:`set_num_processes`) so that the plan holds a multiple of it. Where it does not,
    the batches with the most samples are split in two (a half costs no more than the whole)
    until it does. So every process gets as many batches, each sample is read exactly once per
    epoch, and nothing is repeated to even the processes out.

    Each epoch (:meth:`set_epoch`) with ``shuffle`` draws, from ``(seed, epoch)`` alone, which
    of the samples of equal length go where, and the order of the batches. The batches' sizes
    and their number (``len()``) are the same every epoch, so the schedule sized from ``len()``
    before training holds; the plan is a function of the lengths, ``max_tokens``, ``packed``,
    ``seed``, the epoch and the number of processes, so a run resumed mid-epoch reads the same
    batches. It draws from no global RNG. Without ``shuffle``, the batches come shortest first.

    Choosing ``max_tokens``: it must hold the longest sample alone (truncate longer samples
    before, or raise it); a sample longer than ``max_tokens`` is refused, named by its index,
    because it could never be batched. Above that, it is the number of tokens one batch
    computes, the budget of activation memory: start from what a padded batch you know fits
    computes (batch size times length), then raise it while memory allows. Padded, a batch of
    long samples holds few of them, so ``max_tokens`` several times the longest sample keeps
    those batches from being tiny; packed, every token of the budget is a token of the data.

    ``lengths[i]`` is the number of tokens of dataset sample ``i`` (an int >= 1), one per
    sample of the dataset given to ``fit``.

    Outside the Trainer, call :meth:`set_num_processes` before reading its ``len()`` and
    :meth:`set_epoch` before each epoch (Accelerate's loaders pass the epoch on to it only on
    one process).
    """

    batch_size: int | None = None
    """None: batches of varying size (what Accelerate's ``BatchSamplerShard`` reads)."""
    drop_last = False

    def __init__(
        self,
        lengths: Sequence[int] | Any,
        max_tokens: int,
        *,
        packed: bool = False,
        shuffle: bool = True,
        seed: int = 0,
    ) -> None:
        self.lengths: list[int] = _checked_lengths(lengths)
        self.max_tokens: int = _checked_max_tokens(max_tokens, self.lengths)
        self.packed: bool = _checked_flag("packed", packed)
        self.shuffle: bool = _checked_flag("shuffle", shuffle)
        if not _is_int(seed):
            raise TrainerConfigError(f"{_NAME}(seed={seed!r}): must be an int")
        self.seed: int = int(seed)
        self.epoch: int = 0
        self.num_processes: int = 1
        self._lengths = torch.tensor(self.lengths)
        ascending = torch.sort(self._lengths, stable=True)
        self._ascending: torch.Tensor = ascending.indices
        self._formed: list[tuple[int, int]] = _greedy(
            ascending.values.tolist(), self.max_tokens, packed=self.packed
        )
        self._spans: list[tuple[int, int]] = self._formed

    def __repr__(self) -> str:
        return (
            f"{_NAME}({len(self.lengths)} samples, max_tokens={self.max_tokens}, "
            f"packed={self.packed}, shuffle={self.shuffle}, seed={self.seed})"
        )

    def __len__(self) -> int:
        """Batches per epoch, all processes together: a multiple of ``num_processes``."""
        return len(self._spans)

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose plan :meth:`__iter__` gives."""
        self.epoch = int(epoch)

    def set_num_processes(self, num_processes: int) -> None:
        """Plan for ``num_processes`` processes: a multiple of it batches, by splitting."""
        if not _is_int(num_processes) or num_processes < 1:
            raise TrainerConfigError(
                f"{_NAME}.set_num_processes({num_processes!r}): must be an int >= 1"
            )
        self._spans = _split_to_multiple(self._formed, num_processes, repr(self))
        self.num_processes = num_processes

    def cost(self, batch: Sequence[int]) -> int:
        """The tokens ``batch`` (dataset indices) computes: its ``max_tokens`` measure."""
        lengths = [self.lengths[index] for index in batch]
        return sum(lengths) if self.packed else max(lengths) * len(lengths)

    def __iter__(self) -> Iterator[list[int]]:
        order = self._ascending
        batch_order = torch.arange(len(self._spans))
        if self.shuffle:
            generator = torch.Generator().manual_seed(_mixed(self.seed, self.epoch))
            # The sorted order with the ties among equal lengths drawn: the same lengths at
            # the same places, so every batch costs what it cost before.
            drawn = torch.randperm(len(self.lengths), generator=generator)
            order = drawn[torch.sort(self._lengths[drawn], stable=True).indices]
            batch_order = torch.randperm(len(self._spans), generator=generator)
        indices = order.tolist()
        for which in batch_order.tolist():
            start, stop = self._spans[which]
            yield indices[start:stop]


def _mixed(seed: int, epoch: int) -> int:
    """One generator seed per (seed, epoch), none shared by two pairs in practice."""
    digest = hashlib.blake2b(f"{seed}:{epoch}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def _is_int(value: object) -> TypeGuard[int]:
    """An int, numpy's included, and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _checked_flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TrainerConfigError(f"{_NAME}({name}={value!r}): must be True or False")
    return value


def _checked_lengths(lengths: Any) -> list[int]:
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__len__"):
        raise TrainerConfigError(
            f"{_NAME}(lengths=...): give one token count per sample (a list of ints), "
            f"not {type(lengths).__name__}"
        )
    values = lengths.tolist() if callable(getattr(lengths, "tolist", None)) else list(lengths)
    if not values:
        raise TrainerConfigError(f"{_NAME}(lengths=[]): no samples")
    for index, value in enumerate(values):
        if not _is_int(value) or value < 1:
            raise TrainerConfigError(
                f"{_NAME}(lengths=...): lengths[{index}] is {value!r}; each length is the "
                "number of tokens of its sample, an int >= 1"
            )
    return [int(value) for value in values]


def _checked_max_tokens(max_tokens: object, lengths: list[int]) -> int:
    if not _is_int(max_tokens):
        raise TrainerConfigError(f"{_NAME}(max_tokens={max_tokens!r}): must be an int")
    longest = max(range(len(lengths)), key=lengths.__getitem__)
    if lengths[longest] > max_tokens:
        over = sum(length > max_tokens for length in lengths)
        shortest = min(lengths)
        which = (
            f"no sample fits: the shortest has {shortest} tokens"
            if shortest > max_tokens
            else f"{over} of {len(lengths)} samples are longer"
        )
        raise TrainerConfigError(
            f"{_NAME}(max_tokens={max_tokens}): sample {longest} has {lengths[longest]} tokens, "
            f"more than a batch may hold, and every sample must fit in a batch of its own "
            f"({which}); raise max_tokens to at least {lengths[longest]}, or truncate the "
            "longer samples"
        )
    return int(max_tokens)


def _greedy(lengths: list[int], max_tokens: int, *, packed: bool) -> list[tuple[int, int]]:
    """``[start, stop)`` spans of the ascending ``lengths``, each as long as the budget
    allows (padded: the last, longest length times the count)."""
    spans: list[tuple[int, int]] = []
    start = total = 0
    for position, length in enumerate(lengths):
        total += length
        cost = total if packed else length * (position - start + 1)
        if cost > max_tokens:
            spans.append((start, position))
            start, total = position, length
    spans.append((start, len(lengths)))
    return spans


def _split_to_multiple(
    formed: list[tuple[int, int]], num_processes: int, sampler: str
) -> list[tuple[int, int]]:
    """``spans`` with the ones of most samples halved until their number is a multiple of
    ``num_processes`` (``sampler`` names the sampler in the error)."""
    spans = list(formed)
    while len(spans) % num_processes:
        widest = max(range(len(spans)), key=lambda at: spans[at][1] - spans[at][0])
        start, stop = spans[widest]
        if stop - start < 2:
            raise TrainerConfigError(
                f"{sampler} on {num_processes} processes: its {len(formed)} batches "
                f"cannot be split into a multiple of {num_processes} (every batch already holds "
                f"one sample), so the processes would not get as many batches without a sample "
                "read twice; give more samples, or a max_tokens that lets batches hold several"
            )
        middle = (start + stop) // 2
        spans[widest : widest + 1] = [(start, middle), (middle, stop)]
    return spans


def budget_sampler(loader: Any) -> TokenBudgetBatchSampler | None:
    """The ``TokenBudgetBatchSampler`` that makes ``loader``'s batches, inside the wrappers
    Accelerate puts around it (``BatchSamplerShard``, ``SkipBatchSampler``), or None."""
    found = getattr(loader, "batch_sampler", None)
    for _ in range(8):
        if found is None or isinstance(found, TokenBudgetBatchSampler):
            return found
        found = getattr(found, "batch_sampler", None)
    return None


def plan_budget(loader: Any, epoch: int | None = None) -> None:
    """Tell a prepared ``loader``'s token-budget sampler (if it has one) the number of
    processes Accelerate deals its batches to (read from Accelerate's ``BatchSamplerShard``;
    1 when there is none), and the ``epoch`` to plan. Accelerate passes the epoch on only
    where the sampler is the loader's own batch sampler (one process)."""
    sampler = budget_sampler(loader)
    if sampler is None:
        return
    processes, found = 1, getattr(loader, "batch_sampler", None)
    while found is not None and found is not sampler:
        processes = max(processes, int(getattr(found, "num_processes", 1)))
        found = getattr(found, "batch_sampler", None)
    sampler.set_num_processes(processes)
    if epoch is not None:
        sampler.set_epoch(epoch)
