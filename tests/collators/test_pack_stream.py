"""pack_stream: documents of a stream packed best-fit into rows of ``max_length`` from a window
at a time, each document's tokens once, and a place kept across a resume, exactly: the rows
after a resume are the rows of an uninterrupted iteration (from a stream's own state, or by
reading the stream again)."""

from __future__ import annotations

import gc
import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import DataLoader, IterableDataset

from accmt_collators import CollatorError, DataCollatorWithFlattening, pack_stream


def corpus(lengths: list[int] | tuple[int, ...]) -> list[dict[str, Any]]:
    """Documents of ``lengths``: document ``i``'s tokens are ``1000 * i + 1, ...`` (so each
    token names its document), each with its ``index``."""
    return [
        {"input_ids": [1000 * i + k + 1 for k in range(n)], "index": i}
        for i, n in enumerate(lengths)
    ]


def shape(rows: list[list[dict[str, Any]]]) -> list[list[tuple[int, list[int]]]]:
    """Rows as plain values, to compare: each document's index and tokens."""
    return [[(d["index"], d["input_ids"].tolist()) for d in row] for row in rows]


class PlacedStream(IterableDataset[dict[str, Any]]):
    """A source that keeps its place (torchdata's protocol) and counts what it hands out."""

    def __init__(self, documents: list[dict[str, Any]]) -> None:
        self.documents = documents
        self.position = 0
        self.given = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while self.position < len(self.documents):
            self.position += 1
            self.given += 1
            yield self.documents[self.position - 1]

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.position = state["position"]


LENGTHS = (7, 3, 12, 5, 9, 16, 2, 11, 4, 8, 1, 6, 14)


def test_best_fit_decreasing_within_each_window() -> None:
    # Window 1 (7, 3, 12, 5, 9): 12 opens a row (room 4), 9 another (room 7), 7 fills it,
    # 5 opens a third, 3 goes where it leaves least room, beside 12. Window 2 (16, 2, 11, 4,
    # 9 ...) is packed on its own: no document of window 1 waits for it.
    stream = pack_stream(corpus(LENGTHS[:10]), 16, window=5)
    rows = [[d["index"] for d in row] for row in stream]
    assert rows == [[1, 2], [0, 4], [3], [5], [7, 8], [6, 9]]


@given(
    lengths=st.lists(st.integers(1, 30), min_size=0, max_size=25),
    max_length=st.integers(1, 24),
    window=st.integers(1, 8),
)
def test_rows_fit_and_every_token_comes_once(
    lengths: list[int], max_length: int, window: int
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = list(pack_stream(corpus(lengths), max_length, window=window))
    assert all(sum(len(d["input_ids"]) for d in row) <= max_length for row in rows)
    got = sorted(token for row in rows for d in row for token in d["input_ids"].tolist())
    expected = sorted(t for d in corpus(lengths) for t in d["input_ids"][:max_length])
    assert got == expected
    # Each window that cuts says so once, with how many documents and tokens.
    windows = [lengths[i : i + window] for i in range(0, len(lengths), window)]
    cuts = [[n - max_length for n in w if n > max_length] for w in windows]
    said = [str(warning.message) for warning in caught]
    assert len(said) == sum(1 for c in cuts if c)
    for message, c in zip(said, [c for c in cuts if c], strict=True):
        assert f"{len(c)} document(s) longer than max_length={max_length}" in message
        assert f"{sum(c)} token(s) dropped" in message
    # Rows never mix windows, and best fit opens a row only for a document no open row of
    # its window can take: at most one of a window's rows is half empty or less.
    for number, w in enumerate(windows):
        window_rows = [row for row in rows if row[0]["index"] // window == number]
        assert all(d["index"] // window == number for row in window_rows for d in row)
        used = sum(min(n, max_length) for n in w)
        assert len(window_rows) <= 2 * -(-used // max_length)


def test_labels_and_indices_ride_along_and_other_keys_are_left_out() -> None:
    documents = [
        {"input_ids": torch.tensor([5, 6, 7]), "labels": [1, 2, 3], "attention_mask": [1] * 3},
        {"input_ids": [8, 9], "labels": torch.tensor([4, 5])},
    ]
    (row,) = list(pack_stream(documents, 8))
    assert [sorted(d) for d in row] == [["input_ids", "labels"]] * 2
    batch = DataCollatorWithFlattening(max_length=8)([row])
    assert batch["labels"].tolist() == [[-100, 2, 3, -100, 5, -100, -100, -100]]
    assert "document_spans" not in batch


def full_and_resumed(
    make: Any, max_length: int, window: int
) -> tuple[list[Any], list[list[Any]], list[dict[str, Any]], list[int]]:
    """The rows of an uninterrupted iteration, and for every place k, the first k rows of one
    iteration followed by the rows of a fresh pack_stream loaded with its state there (the
    state passed through JSON: plain values); also the states and how many documents each
    resumed source gave."""
    full = shape(list(pack_stream(make(), max_length, window=window)))
    resumed, states, reads = [], [], []
    for k in range(len(full) + 1):
        first = pack_stream(make(), max_length, window=window)
        rows = iter(first)
        head = [next(rows) for _ in range(k)]
        state = json.loads(json.dumps(first.state_dict()))
        source = make()
        second = pack_stream(source, max_length, window=window)
        second.load_state_dict(state)
        resumed.append(shape(head) + shape(list(second)))
        states.append(state)
        reads.append(getattr(source, "given", -1))
    return full, resumed, states, reads


@pytest.mark.parametrize("source", ["replayed", "stateful"])
def test_a_resume_at_any_row_gives_the_uninterrupted_rows(source: str) -> None:
    documents = corpus(LENGTHS)
    if source == "replayed":
        full, resumed, states, _ = full_and_resumed(lambda: documents, 16, 4)
    else:
        full, resumed, states, reads = full_and_resumed(lambda: PlacedStream(documents), 16, 4)
        # From its own state the stream goes on from the current window's start: nothing
        # before it is read again.
        assert reads == [len(documents) - state["documents"] for state in states]
        assert {state["source"] is None for state in states} == {True, False}
    assert len({(s["documents"], s["rows"]) for s in states}) == len(states) > 6
    assert all(rows == full for rows in resumed)


def test_a_plain_iterator_is_read_once_and_replayed_from_a_new_one() -> None:
    documents = corpus(LENGTHS)
    stream = pack_stream(iter(documents), 16, window=4)
    rows = iter(stream)
    head = shape([next(rows) for _ in range(5)])
    state = stream.state_dict()
    # Window 1 (7, 3, 12, 5) packs into 2 rows, window 2 (9, 16, 2, 11) into 3: the five
    # rows given end the second window, which starts after 4 documents.
    assert state == {"documents": 4, "rows": 3}
    rest = shape(list(rows))
    assert list(stream) == []  # the iterator is spent: a second pass has nothing
    again = pack_stream(iter(documents), 16, window=4)
    again.load_state_dict(state)
    assert shape(list(again)) == rest
    assert head + rest == shape(list(pack_stream(documents, 16, window=4)))


def test_state_after_the_end_resumes_to_nothing_and_a_new_pass_starts_over() -> None:
    documents = corpus(LENGTHS[:6])
    stream = pack_stream(documents, 16, window=4)
    first = shape(list(stream))
    state = stream.state_dict()
    assert state == {"documents": 6, "rows": 0}
    stream.load_state_dict(state)
    assert list(stream) == []
    assert shape(list(stream)) == first  # the next pass is a new epoch


def test_a_stateful_loader_resumes_the_same_batches() -> None:
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    documents = corpus(LENGTHS * 2)
    collate = DataCollatorWithFlattening(max_length=16)

    def loader(source: PlacedStream) -> Any:
        return stateful.StatefulDataLoader(
            pack_stream(source, 16, window=5), batch_size=2, collate_fn=collate
        )

    full = [batch["input_ids"].tolist() for batch in loader(PlacedStream(documents))]
    interrupted = loader(PlacedStream(documents))
    batches = iter(interrupted)
    head = [next(batches)["input_ids"].tolist() for _ in range(3)]
    state = interrupted.state_dict()
    resumed = loader(PlacedStream(documents))
    resumed.load_state_dict(state)
    assert head + [batch["input_ids"].tolist() for batch in resumed] == full


def test_several_workers_are_refused_unless_the_stream_is_sharded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # After a worker's error torch joins each worker with this timeout (5 s), which the
    # workers wait out: a shorter one keeps the test fast and changes nothing else.
    monkeypatch.setattr(torch.utils.data._utils, "MP_STATUS_CHECK_INTERVAL", 0.05)
    batches = iter(DataLoader(pack_stream(corpus(LENGTHS), 16), batch_size=None, num_workers=2))
    with pytest.raises(CollatorError, match="2 DataLoader workers would each read the whole"):
        next(batches)
    del batches  # its workers are shut down now, with the short timeout
    gc.collect()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: pack_stream([], 0), "max_length must be an int >= 1, got 0"),
        (lambda: pack_stream([], 8, window=0), "window must be an int >= 1, got 0"),
        (lambda: pack_stream([], True), "max_length must be an int >= 1, got True"),
        (lambda: pack_stream({"input_ids": [1]}, 8), "stream must be an iterable of documents"),
        (
            lambda: list(pack_stream([{"input_ids": [1]}, {"ids": [2]}], 8)),
            r"the stream's document 1 has no 'input_ids'",
        ),
        (
            lambda: list(pack_stream([{"input_ids": [1]}] * 3 + [{"input_ids": []}], 8, window=2)),
            r"the stream's document 3\['input_ids'\] is empty",
        ),
        (
            lambda: pack_stream([], 8).load_state_dict({"documents": 1}),
            r"load_state_dict expects .* keys \['documents', 'rows'\], got \['documents'\]",
        ),
        (
            lambda: pack_stream([], 8).load_state_dict({"documents": -1, "rows": 0}),
            r"load_state_dict: state\['documents'\] must be an int >= 0",
        ),
        (
            lambda: _resumed_past_the_end(),
            "resuming after 5 documents, but the stream holds only 2 now",
        ),
    ],
)
def test_bad_input_is_named(call: Any, message: str) -> None:
    with pytest.raises(CollatorError, match=f"pack_stream: {message}"):
        call()


def _resumed_past_the_end() -> list[Any]:
    stream = pack_stream(corpus((1, 2)), 8)
    stream.load_state_dict({"documents": 5, "rows": 0})
    return list(stream)
