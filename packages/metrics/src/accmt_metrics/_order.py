"""Where each process's samples stand in the order a prepared Accelerate dataloader deals them."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def interleaved_positions(batch_sizes: Sequence[Sequence[int]]) -> list[Tensor]:
    """The global position of every sample of every process, batches dealt round-robin.

    ``batch_sizes[p]`` lists the sizes of the batches process ``p`` added, in the order it added
    them. Local batch ``k`` of process ``p`` is taken to be global batch ``k * world + p`` (a
    process with fewer batches simply has no entry for the later rounds), which is how
    Accelerate's ``BatchSamplerShard`` deals the batches of a prepared dataloader, with or without
    ``split_batches``. Returns, per process, an int64 tensor holding the position of each of its
    samples, in the order they were added; together the positions are ``0 .. total - 1``.
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
