"""Streams (``IterableDataset``s): checked as training data before anything is built, and
split across processes to evaluate or predict with every sample once."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from accelerate import Accelerator
from accelerate.data_loader import prepare_data_loader
from torch.utils.data import DataLoader, IterableDataset

from .._errors import TrainerConfigError
from ._loaders import LoaderOptions, length_or_none


def check_stream(train_data: Any, options: LoaderOptions, max_steps: int | None) -> None:
    """A stream (an ``IterableDataset``) trains in its own order, and one without a length
    needs ``max_steps`` to size its schedule. (A curriculum's stages refuse streams.)"""
    if not isinstance(train_data, IterableDataset):
        return
    name = type(train_data).__name__
    if options.shuffle_train:
        raise TrainerConfigError(
            f"Trainer(shuffle_train=True): the training data is a stream ({name}, an "
            "IterableDataset), which has no indices to shuffle; shuffle inside the stream "
            "(a shuffle buffer, say) and leave shuffle_train out"
        )
    for option in ("sampler", "batch_sampler"):
        if getattr(options, option) is not None:
            raise TrainerConfigError(
                f"Trainer({option}=...): the training data is a stream ({name}, an "
                "IterableDataset), which gives its samples in its own order; leave it out"
            )
    if length_or_none(train_data) is None and max_steps is None:
        raise TrainerConfigError(
            f"Trainer.fit(train_dataset=...): the stream {name} has no length (__len__), so "
            "the run cannot tell how many optimizer steps it takes; give "
            "HyperParameters(max_steps=...) (its epochs then end where the stream ends)"
        )


class _EveryNthBatch(IterableDataset[Any]):
    """The batches ``rank``, ``rank + processes``, ... of ``loader``'s one-process order."""

    def __init__(self, loader: DataLoader[Any], rank: int, processes: int) -> None:
        self.loader, self.rank, self.processes = loader, rank, processes

    def __iter__(self) -> Iterator[Any]:
        return itertools.islice(iter(self.loader), self.rank, None, self.processes)


def prepare_stream_evaluation(
    accelerator: Accelerator, loader: DataLoader[Any], placement: bool | None
) -> DataLoader[Any]:
    """A stream's loader to evaluate or predict on this process: every process reads the
    stream and takes batch k of its one-process order where k % processes is its rank, as
    Accelerate deals a map-style dataset's batches, so every sample is evaluated once and the
    batches' order is known; the last round leaves some processes with one batch fewer.
    (Accelerate's own split of a stream evens the processes out by repeating samples.)"""
    share = _EveryNthBatch(loader, accelerator.process_index, accelerator.num_processes)
    prepared: DataLoader[Any] = prepare_data_loader(
        DataLoader(share, batch_size=None),
        accelerator.device,
        num_processes=1,
        process_index=0,
        put_on_device=placement is not False,
        dispatch_batches=False,
        non_blocking=True,
    )
    return prepared


@contextlib.contextmanager
def streams_split(
    accelerator: Accelerator, loaders: Sequence[DataLoader[Any]], dispatch: bool
) -> Iterator[None]:
    """While the training loaders are prepared (Accelerate reads its settings as it prepares
    a loader): streams are split across processes as ``dispatch`` says, not by Accelerate's
    default, which dispatches every stream from the main process, where batches of a padding
    collator, differing in shape, cannot be joined; and a stream that keeps its own place
    (:func:`resumes_from_state`) is read, on one process, through torchdata's
    ``StatefulDataLoader``, whose state Accelerate's checkpoints then hold."""
    if not all(isinstance(loader.dataset, IterableDataset) for loader in loaders):
        yield
        return
    config = accelerator.dataloader_config
    # On several processes a stream's own place runs ahead of the checkpoint's: Accelerate's
    # dispatcher reads a round ahead of what it dealt (its own counters it corrects, a
    # stream's state it cannot), and its split wraps the stream. There it is read again.
    one = accelerator.num_processes == 1
    stateful = one and all(resumes_from_state(loader.dataset) for loader in loaders)
    former = config.dispatch_batches, config.use_stateful_dataloader
    config.dispatch_batches, config.use_stateful_dataloader = dispatch, stateful or former[1]
    try:
        with warnings.catch_warnings():
            # torchdata 0.11's StatefulDataLoader calls torch.set_vital, which torch 2.13
            # deprecates with a warning that is neither the user's nor ours to act on.
            warnings.filterwarnings("ignore", "'set_vital' is deprecated", UserWarning)
            yield
    finally:
        config.dispatch_batches, config.use_stateful_dataloader = former


def resumes_from_state(dataset: Any) -> bool:
    """Whether a run resumes ``dataset`` from its own ``state_dict`` (torchdata's protocol,
    which its ``StatefulDataLoader`` saves and restores) rather than by reading it again: a
    stream with ``state_dict`` and ``load_state_dict``, where torchdata is installed."""
    keeps_state = all(
        callable(getattr(dataset, method, None)) for method in ("state_dict", "load_state_dict")
    )
    return keeps_state and importlib.util.find_spec("torchdata") is not None


def reads_from_state(loader: Any) -> bool:
    """Whether a prepared loader resumes from its saved state (no batch is skipped)."""
    return bool(getattr(loader, "use_stateful_dataloader", False))
