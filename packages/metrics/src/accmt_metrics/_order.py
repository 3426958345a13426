"""Where a process's samples stand in the order a prepared Accelerate dataloader deals them.

Accelerate deals global batches round-robin: local batch ``k`` of process ``p`` of ``world`` is
global batch ``k * world + p`` (``BatchSamplerShard`` with or without ``split_batches`` or
``even_batches``; ``IterableDatasetShard`` and ``DataLoaderDispatcher`` slice each global batch
the same way). With ``even_batches`` (the default) the last round is filled up with samples
from the start of the dataset, so every position from the dataset's length on is padding.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def rows_before(limit: int, added_before: int, rows: int, process: int, world: int) -> int:
    """How many leading rows of this process's next batch of ``rows`` stand before ``limit``.

    ``added_before`` counts the samples this process added before the batch. Every round but
    the last deals batches of one size, and in the last round Accelerate gives every process a
    slice of one size (``rows``), the slices of the lower processes first; so the batch starts
    at ``added_before * world + process * rows``. Where the last round is short
    (``even_batches=False``) this start may be too low, never too high, and then every sample
    is real anyway: the rule never drops a real sample of Accelerate's dataloaders. On one
    process it is exact for batches of any sizes.
    """
    start = added_before * world + process * rows
    return max(0, min(rows, limit - start))


def interleaved_positions(batch_sizes: Sequence[Sequence[int]]) -> list[Tensor]:
    """The global position of every sample of every process, batches dealt round-robin.

    ``batch_sizes[p]`` lists the sizes of the batches process ``p`` added, in the order it added
    them. Local batch ``k`` of process ``p`` is taken to be global batch ``k * world + p`` (a
    process with fewer batches simply has no entry for the later rounds). Returns, per process,
    an int64 tensor holding the position of each of its samples, in the order they were added;
    together the positions are ``0 .. total - 1``.
    """
    # How far each batch moves, from where it starts among its own process's samples to where
    # it starts in the global order: one number per batch, so plain Python does it best.
    starts: list[list[int]] = [[] for _ in batch_sizes]
    moves: list[list[int]] = [[] for _ in batch_sizes]
    held = [0] * len(batch_sizes)
    position = 0
    for round_ in range(max((len(sizes) for sizes in batch_sizes), default=0)):
        for process, sizes in enumerate(batch_sizes):
            if round_ < len(sizes):
                starts[process].append(held[process])
                moves[process].append(position - held[process])
                held[process] += sizes[round_]
                position += sizes[round_]
    return [
        _shifted_range(total, at, by) for total, at, by in zip(held, starts, moves, strict=True)
    ]


def _shifted_range(total: int, starts: list[int], moves: list[int]) -> Tensor:
    """``arange(total)``, each batch (starting at ``starts[k]``) moved by ``moves[k]``.

    The moves are written as steps where each batch starts and summed up, which costs a few
    tensor operations whatever the number of batches.
    """
    steps = [move - before for move, before in zip(moves, [0, *moves][:-1], strict=True)]
    jumps = torch.zeros(total + 1, dtype=torch.int64)
    jumps.index_add_(
        0, torch.tensor(starts, dtype=torch.int64), torch.tensor(steps, dtype=torch.int64)
    )
    return torch.arange(total, dtype=torch.int64) + torch.cumsum(jumps[:total], dim=0)
