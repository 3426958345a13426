"""Streams (``IterableDataset``s): checked as training data before anything is built, split
across processes to train (each process its own shards, or dispatched from the main one) and
resumed from each process's own place where they keep one, and split across processes to
evaluate or predict with every sample once."""

from __future__ import annotations

import collections
import contextlib
import copy
import importlib.util
import itertools
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
from accelerate import Accelerator
from accelerate.data_loader import DataLoaderDispatcher, prepare_data_loader
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
    (:func:`resumes_from_state`) is read through torchdata's ``StatefulDataLoader``, whose
    state each process's checkpoint part then holds (:func:`keep_places`).

    Such a loader is prepared without its workers, which :func:`keep_places` gives it after:
    Accelerate asks a new ``StatefulDataLoader`` for its state as it wraps it, which starts
    the workers and has them read ahead from the stream's start, into an iterator that a
    resume throws away (and that a run resumed between epochs would read its next epoch
    from, as the workers saw the stream before it was told the epoch)."""
    if not all(isinstance(loader.dataset, IterableDataset) for loader in loaders):
        yield
        return
    config = accelerator.dataloader_config
    stateful = all(resumes_from_state(loader.dataset) for loader in loaders)
    held = [_Workers.take(loader) if stateful else None for loader in loaders]
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
        for loader, workers in zip(loaders, held, strict=True):
            if workers is not None:
                workers.give(loader)


@attrs.frozen
class _Workers:
    """A DataLoader's worker processes, as its settings say them."""

    num_workers: int
    prefetch_factor: int | None
    context: Any

    @classmethod
    def take(cls, loader: DataLoader[Any]) -> _Workers | None:
        """``loader``'s workers, which it then has none of; None where it has none, or keeps
        them across epochs (``persistent_workers``, which cannot be set after the fact)."""
        if not loader.num_workers or loader.persistent_workers:
            return None
        workers = cls(loader.num_workers, loader.prefetch_factor, loader.multiprocessing_context)
        loader.multiprocessing_context = None
        loader.num_workers, loader.prefetch_factor = 0, None
        return workers

    def give(self, loader: Any) -> None:
        loader.num_workers, loader.prefetch_factor = self.num_workers, self.prefetch_factor
        loader.multiprocessing_context = self.context


def keep_places(
    accelerator: Accelerator, loaders: Sequence[DataLoader[Any]], prepared: Sequence[Any]
) -> None:
    """The prepared training loaders (``prepared``, of ``loaders``) get the workers
    :func:`streams_split` held back, except on a process that a dispatched stream is sent to,
    which reads nothing. Those that resume from their stream's state keep it per process, in
    accmt's checkpoint part of each process (:func:`stream_place`), not in Accelerate's
    ``save_state``: that writes every process's loader state under one file name
    (``dl_state_dict.bin``), so on several processes they overwrite each other, and leaves
    it out of a background checkpoint. A dispatched stream's state is made to match what was
    dealt (:class:`_DealtPlace`)."""
    for given, loader in zip(loaders, prepared, strict=True):
        base = getattr(loader, "base_dataloader", None)
        dispatched = isinstance(loader, DataLoaderDispatcher)
        reads = accelerator.is_main_process or not dispatched
        if base is not None and given.num_workers and not base.num_workers and reads:
            workers = _Workers(
                given.num_workers, given.prefetch_factor, given.multiprocessing_context
            )
            workers.give(base)
            # The iterator the wrap made for its state has no workers (and read nothing): an
            # empty state drops it, so that the first epoch makes one with them.
            base.load_state_dict({})
        if not reads_from_state(loader):
            continue
        if loader in accelerator._dataloaders:
            accelerator._dataloaders.remove(loader)
        if dispatched:
            loader._update_state_dict = _DealtPlace(loader, accelerator.num_processes)


class _DealtPlace:
    """A dispatched stream's place as of the batches dealt. Accelerate's dispatcher reads the
    next round of batches (one per process) before it deals the current one, and snapshots
    the loader's state before each read; its correction of that state counts batches, which a
    stream's own state does not (it would resume a round ahead, skipping it). The state that
    matches a dealt round is the one taken before the next round's first read: the oldest of
    the last ``processes`` snapshots. At the stream's end everything read was dealt, and the
    state is the loader's own."""

    def __init__(self, loader: Any, processes: int) -> None:
        self.loader = loader
        self.taken: collections.deque[dict[str, Any]] = collections.deque(maxlen=processes)

    def __call__(self) -> None:
        loader = self.loader
        now = copy.deepcopy(loader.base_dataloader.state_dict())
        if loader.end_of_dataloader:
            self.taken.clear()
            place = now
        else:
            self.taken.append(now)
            place = self.taken[0]
        loader.dl_state_dict = {**place, "_iterator_finished": loader.end_of_dataloader}


def stream_place(loader: Any) -> dict[str, Any] | None:
    """This process's place in the training stream that ``loader`` reads (its loader's state,
    as of the batches it gave), for a checkpoint; None when the loader keeps none."""
    if not reads_from_state(loader):
        return None
    place: dict[str, Any] = loader.state_dict()
    return place


def resumes_from_state(dataset: Any) -> bool:
    """Whether a run resumes ``dataset`` from its own ``state_dict`` (torchdata's protocol,
    which its ``StatefulDataLoader`` saves and restores) rather than by reading it again: a
    stream with ``state_dict`` and ``load_state_dict``, where torchdata is installed."""
    keeps_state = all(
        callable(getattr(dataset, method, None)) for method in ("state_dict", "load_state_dict")
    )
    return keeps_state and importlib.util.find_spec("torchdata") is not None


def reads_from_state(loader: Any) -> bool:
    """Whether a prepared loader resumes from its saved state (no batch is skipped): a
    stateful loader whose stream, as this process reads it, keeps its place (Accelerate's
    ``IterableDatasetShard``, which splits a stream that it cannot split by shard, keeps none,
    so such a stream is read again)."""
    stateful = bool(getattr(loader, "use_stateful_dataloader", False))
    return stateful and resumes_from_state(loader.dataset)
