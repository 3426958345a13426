"""pack_stream: a stream of documents packed best-fit into rows of ``max_length``, resumable."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
from torch.utils.data import IterableDataset, get_worker_info

from ._errors import CollatorError
from ._flattening import best_fit_decreasing, read_document, say_cut

OWNER = "pack_stream"


def pack_stream(
    stream: Iterable[Mapping[str, Any]],
    max_length: int,
    *,
    window: int = 1024,
    sharded: bool = False,
) -> PackedStream:
    """An iterable dataset of rows of at most ``max_length`` tokens, packed best-fit
    decreasing from a window of ``window`` documents of ``stream`` at a time.

    Args:
        stream: an iterable of documents: mappings holding ``input_ids`` (a list of ints or a
            1-D integer tensor), optionally ``labels`` of the same length and an int ``index``
            (the document's place in the corpus, which the collator turns into
            ``document_spans``). Other keys are left out of the rows.
        max_length: the most tokens a row holds. A longer document is cut to it; one
            warning per window says how many documents were cut and how many tokens dropped.
        window: how many documents are read, then packed together: a larger window packs
            tighter (fewer, fuller rows), holds more documents in memory and, on a resume,
            reads more documents again.
        sharded: ``True`` says that ``stream`` gives each DataLoader worker its own documents
            (it splits itself by ``torch.utils.data.get_worker_info()``). Without it, more
            than one DataLoader worker is refused: each worker would read the whole stream
            and every row would come as many times as there are workers.

    Each item is one row: a list of documents (``input_ids``, and ``labels`` and ``index``
    where the document had them, cut to ``max_length``), which
    ``DataCollatorWithFlattening(max_length=max_length)`` lays out as one row of its batch,
    as it is (no packing again), padded to ``max_length``: the batch is the collator's
    (``position_ids`` per document, ``use_cache=False``, ``document_spans``). Within a
    window, rows come in the order best fit opens them (the longest documents' first).

    The dataset keeps its place (torchdata's ``Stateful`` protocol, which its
    ``StatefulDataLoader`` calls): ``state_dict()`` gives the position of the rows handed
    out so far, as plain ints (the documents read before the current window, and the rows
    of that window already given), and ``load_state_dict()`` makes the next iteration go on
    from there, exactly: it reads the current window's documents again and packs them
    again, which gives the same rows. Where ``stream`` itself has ``state_dict()`` and
    ``load_state_dict()``, its state at the window's start is kept too (as the stream gives
    it) and loaded on a resume; its state is asked for after each window is read, and before
    the first window the stream is taken to be at its start. Otherwise the resume is a
    replay: the stream is iterated again from its start and the documents read before the
    window are read and dropped, which costs reading them again and needs a stream that
    gives the same documents each time it is iterated. An iteration that is not a resume
    starts from the stream's start (a new epoch).

    With several processes, every process given the same stream packs the same rows: under
    accmt's Trainer each keeps its own share of the batches (Accelerate's
    ``IterableDatasetShard``) or the main process sends them. Elsewhere, give each process
    a stream of its own documents.
    """
    return PackedStream(stream, max_length, window=window, sharded=sharded)


class PackedStream(IterableDataset[list[dict[str, Any]]]):
    """The iterable dataset :func:`pack_stream` returns."""

    def __init__(
        self, stream: Iterable[Mapping[str, Any]], max_length: int, *, window: int, sharded: bool
    ) -> None:
        for name, value in (("max_length", max_length), ("window", window)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CollatorError(f"{OWNER}: {name} must be an int >= 1, got {value!r}")
        if not isinstance(stream, Iterable) or isinstance(stream, (str, bytes, Mapping)):
            raise CollatorError(
                f"{OWNER}: stream must be an iterable of documents (mappings with "
                f"'input_ids'), got a {type(stream).__name__}"
            )
        self.stream = stream
        self.max_length = max_length
        self.window = window
        self.sharded = sharded
        self.stateful_source = callable(getattr(stream, "state_dict", None)) and callable(
            getattr(stream, "load_state_dict", None)
        )
        self._position = self._start()
        self._resume: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return (
            f"pack_stream({type(self.stream).__name__}, max_length={self.max_length}, "
            f"window={self.window}, sharded={self.sharded})"
        )

    def state_dict(self) -> dict[str, Any]:
        """Where the rows handed out so far end: ``documents`` (read before the current
        window), ``rows`` (of that window already given) and, for a stream with a state of
        its own, ``source`` (its state at the window's start; None: its start)."""
        return copy.deepcopy(self._position)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Makes the next iteration go on from ``state`` (a ``state_dict()``)."""
        expected = {"documents", "rows"} | ({"source"} if self.stateful_source else set())
        if not isinstance(state, Mapping) or set(state) != expected:
            keys = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise CollatorError(
                f"{OWNER}: load_state_dict expects a state_dict() of this stream, with the "
                f"keys {sorted(expected)}, got {keys}"
            )
        for key in ("documents", "rows"):
            value = state[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise CollatorError(
                    f"{OWNER}: load_state_dict: state[{key!r}] must be an int >= 0, got {value!r}"
                )
        self._resume = copy.deepcopy(dict(state))
        self._position = copy.deepcopy(dict(state))

    def __iter__(self) -> Iterator[list[dict[str, Any]]]:
        info = get_worker_info()
        if info is not None and info.num_workers > 1 and not self.sharded:
            raise CollatorError(
                f"{OWNER}: {info.num_workers} DataLoader workers would each read the whole "
                "stream and give every row once each; use num_workers=0 or 1, or give a "
                "stream that splits itself by torch.utils.data.get_worker_info() and say so "
                "with pack_stream(..., sharded=True)"
            )
        start = self._resume or self._start()
        self._resume = None
        self._position = copy.deepcopy(start)
        return self._rows(start)

    def _rows(self, start: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
        documents = self._documents(start)
        read, skip = start["documents"], start["rows"]
        source = start.get("source")
        while True:
            window = []
            for document in documents:
                window.append(read_document(OWNER, f"the stream's document {read}", document))
                read += 1
                if len(window) == self.window:
                    break
            if not window:
                return
            # The stream's state after this window: where the next window starts.
            following = self._source_state()
            for row in self._pack(window, read - len(window))[skip:]:
                skip += 1
                self._position = self._start(read - len(window), skip, source)
                yield row
            skip, source = 0, following
            self._position = self._start(read, 0, source)

    def _start(self, documents: int = 0, rows: int = 0, source: Any = None) -> dict[str, Any]:
        """A position: ``rows`` given of the window that starts after ``documents``."""
        position: dict[str, Any] = {"documents": documents, "rows": rows}
        if self.stateful_source:
            position["source"] = source
        return position

    def _source_state(self) -> Any:
        if not self.stateful_source:
            return None
        return copy.deepcopy(self.stream.state_dict())  # type: ignore[attr-defined]

    def _documents(self, start: dict[str, Any]) -> Iterator[Any]:
        """The stream's documents from ``start``: loaded into a stateful stream, else replayed."""
        if self.stateful_source:
            if start["source"] is not None:
                self.stream.load_state_dict(start["source"])  # type: ignore[attr-defined]
            return iter(self.stream)
        documents = iter(self.stream)
        for count in range(start["documents"]):
            if next(documents, _END) is _END:
                raise CollatorError(
                    f"{OWNER}: resuming after {start['documents']} documents, but the stream "
                    f"holds only {count} now: a replayed stream must give the same documents "
                    "each time it is iterated"
                )
        return documents

    def _pack(
        self, window: list[tuple[torch.Tensor, torch.Tensor | None, int | None]], first: int
    ) -> list[list[dict[str, Any]]]:
        """The window's documents, cut to ``max_length``, packed best-fit decreasing."""
        width = self.max_length
        cut = {
            f"document {first + k}": len(ids) - width
            for k, (ids, _, _) in enumerate(window)
            if len(ids) > width
        }
        say_cut(OWNER, "document(s)", cut, width, stacklevel=3)
        documents = []
        for ids, labels, index in window:
            document: dict[str, Any] = {"input_ids": ids[:width]}
            if labels is not None:
                document["labels"] = labels[:width]
            if index is not None:
                document["index"] = index
            documents.append(document)
        rows = best_fit_decreasing([len(document["input_ids"]) for document in documents], width)
        return [[documents[place] for place in row] for row in rows]


_END = object()
