"""The exchanges between processes that a ``compute()`` makes.

A metric that keeps sums sends them, with its sample counts, in one ``all_gather_object``: a few
small CPU tensors and ints per process. A metric that keeps the samples themselves first learns
every process's batch sizes, column dtypes and shapes that way, then gathers every column, packed
as bytes, in a single padded ``all_gather``. All are made on the default ``torch.distributed``
group; on NCCL the tensors go through the current CUDA device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
import torch.distributed as dist
from torch import Tensor

from accmt_decorators import NoProcessGroupError, ProcessInfo, current_process

from ._errors import MetricError


class ColumnSpec(NamedTuple):
    """The dtype and the per-sample shape of one stored column."""

    dtype: torch.dtype
    sample_shape: tuple[int, ...]


def process_group_world(sync: bool) -> ProcessInfo | None:
    """The job to synchronise with, or ``None`` when this process computes alone.

    A metric synchronises when ``sync`` is true and the job has several processes. Several
    processes known only from the launcher's environment, with no ``torch.distributed`` group to
    exchange through, would each silently compute over their own share, so that raises.
    """
    if not sync:
        return None
    process = current_process()
    if process.num_processes == 1:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        raise NoProcessGroupError(
            f"a metric's compute() must combine the samples of {process.num_processes} "
            f"processes (found through {process.source}) but torch.distributed is not "
            "initialised. Create an Accelerator or call torch.distributed.init_process_group() "
            "first, or build the metric with sync=False to compute over this process's samples."
        )
    return process


def gather_objects(local: Any, process: ProcessInfo | None) -> list[Any]:
    """Every process's ``local`` (picklable, small, tensors on the CPU), in process order."""
    if process is None:
        return [local]
    gathered: list[Any] = [None] * process.num_processes
    dist.all_gather_object(gathered, local)
    return gathered


def common_columns(
    held: Sequence[tuple[int, tuple[ColumnSpec, ...]]], error: Callable[[str], MetricError]
) -> tuple[ColumnSpec, ...]:
    """The columns every process agrees on, from ``(process, columns)`` of the processes that
    hold samples: dtypes promoted, shapes equal."""
    first_rank, first = held[0]
    dtypes = [spec.dtype for spec in first]
    for rank, columns in held[1:]:
        if len(columns) != len(first) or any(
            a.sample_shape != b.sample_shape for a, b in zip(columns, first, strict=True)
        ):
            raise error(
                f"process {rank} holds columns {list(columns)} but process {first_rank} holds "
                f"{list(first)}; every process must add samples of the same shape"
            )
        dtypes = [
            torch.promote_types(d, spec.dtype) for d, spec in zip(dtypes, columns, strict=True)
        ]
    return tuple(ColumnSpec(d, spec.sample_shape) for d, spec in zip(dtypes, first, strict=True))


def communication_device(local: torch.device) -> torch.device:
    """Where tensors must be for the default group's backend: the current CUDA device on NCCL,
    the CPU on gloo and MPI, and where they already are for any other backend."""
    backend = str(dist.get_backend()).lower()
    if "gloo" in backend or "mpi" in backend:
        if "nccl" in backend and local.type == "cuda":
            return local
        return torch.device("cpu")
    if "nccl" in backend:
        return torch.device("cuda", torch.cuda.current_device())
    return local


def gather_rows(
    columns: Sequence[Tensor],
    specs: Sequence[ColumnSpec],
    totals: Sequence[int],
    process: ProcessInfo,
    device: torch.device,
) -> list[Tensor]:
    """Every process's rows (``totals[p]`` of them on process ``p``), process 0's first, each
    column on every process.

    The columns are cast to the agreed dtypes, viewed as bytes and packed side by side, padded
    to the longest process and gathered in one ``all_gather``; the padding is cut off again on
    arrival.
    """
    rows = totals[process.process_index]
    device = communication_device(device)
    packed: list[Tensor] = []
    for column, spec in zip(columns, specs, strict=True):
        width = math.prod(spec.sample_shape)
        flat = column.to(device=device, dtype=spec.dtype).reshape(rows, width).contiguous()
        packed.append(flat.view(torch.uint8) if spec.dtype != torch.bool else flat.byte())
    if packed:
        local = torch.cat(packed, dim=1)
    else:
        local = torch.zeros(rows, 0, dtype=torch.uint8, device=device)
    padded = torch.zeros(max(totals), local.shape[1], dtype=torch.uint8, device=device)
    padded[:rows] = local
    received = [torch.empty_like(padded) for _ in totals]
    dist.all_gather(received, padded)
    everything = torch.cat([part[:total] for part, total in zip(received, totals, strict=True)])
    gathered: list[Tensor] = []
    offset = 0
    for spec in specs:
        width = math.prod(spec.sample_shape) * _itemsize(spec.dtype)
        raw = everything[:, offset : offset + width].contiguous()
        offset += width
        value = raw.bool() if spec.dtype == torch.bool else raw.view(spec.dtype)
        gathered.append(value.reshape(everything.shape[0], *spec.sample_shape))
    return gathered


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()
