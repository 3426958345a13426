"""A flattened batch taken apart per document (``evaluation/_documents.py``): its
``document_spans`` taken out of the batch, per-token outputs cut back into documents in the
order of their indices, per-document outputs put in that order, the rest left alone. (With a
model and the Trainer: tests/accmt/test_flattened_batches.py.)"""

from __future__ import annotations

import pytest
import torch

from accmt_trainer import TrainerConfigError
from accmt_trainer.data._checks import check_flattening
from accmt_trainer.evaluation._documents import take_documents

# Two rows of 6: documents with indices 7, 3 and 5, in the batch's order; row 0 holds index 7
# (4 tokens) then index 5 (2), row 1 index 3 (5 tokens, then a token of padding).
SPANS = torch.tensor([[7, 0, 0, 4], [3, 1, 0, 5], [5, 0, 4, 2]])


def flattened() -> dict[str, object]:
    return {
        "input_ids": torch.arange(12).reshape(2, 6),
        "position_ids": torch.tensor([[0, 1, 2, 3, 0, 1], [0, 1, 2, 3, 4, 0]]),
        "use_cache": False,
        "document_spans": SPANS,
    }


def test_the_spans_leave_the_batch_and_the_documents_come_in_index_order() -> None:
    batch = flattened()
    rest, documents = take_documents(batch, "step")
    assert documents is not None
    assert sorted(rest) == ["input_ids", "position_ids", "use_cache"]
    assert "document_spans" in batch  # the loader's batch is left as it was
    tokens = rest["input_ids"]
    assert [piece.tolist() for piece in documents.cut(tokens)] == [
        [6, 7, 8, 9, 10],
        [4, 5],
        [0, 1, 2, 3],
    ]
    # Per-token tensors become one padded row per document: -100, 0 or False.
    labels, logits = documents.metric_arguments((tokens, tokens[..., None].float()))
    assert labels.tolist() == [[6, 7, 8, 9, 10], [4, 5, -100, -100, -100], [0, 1, 2, 3, -100]]
    assert logits[1, :, 0].tolist() == [4.0, 5.0, 0.0, 0.0, 0.0]
    assert documents.metric_arguments((tokens > 2,))[0][1].tolist() == [
        True,
        True,
        False,
        False,
        False,
    ]
    # One entry per document (in the batch's order) is put in index order; others stay.
    scores, other = torch.tensor([70.0, 30.0, 50.0]), torch.ones(4)
    assert documents.metric_arguments((scores, other))[0].tolist() == [30.0, 50.0, 70.0]
    assert documents.metric_arguments((scores, other))[1] is other
    predicted = documents.predictions({"ids": tokens, "names": ["a", "b", "c"], "n": (scores,)})
    assert [piece.tolist() for piece in predicted["ids"]] == [
        [6, 7, 8, 9, 10],
        [4, 5],
        [0, 1, 2, 3],
    ]
    assert predicted["names"] == ["b", "c", "a"]
    assert predicted["n"][0].tolist() == [30.0, 50.0, 70.0]


def test_a_batch_that_is_not_flattened_is_left_as_it_is() -> None:
    batch = {"input_ids": torch.ones(2, 3)}
    assert take_documents(batch, "step") == (batch, None)
    assert take_documents(batch, "step")[0] is batch
    pair = (torch.ones(2), torch.zeros(2))
    assert take_documents(pair, "step")[0] is pair


def test_a_flattened_batch_without_position_ids_is_refused() -> None:
    batch = flattened()
    del batch["position_ids"]
    with pytest.raises(TrainerConfigError, match=r"M.validation_step.*no 'position_ids'"):
        take_documents(batch, "M.validation_step")


def test_spans_of_another_shape_are_named() -> None:
    batch = {**flattened(), "document_spans": torch.tensor([1, 0, 0, 4])}
    with pytest.raises(TrainerConfigError, match=r"\(documents, 4\)"):
        take_documents(batch, "step")


def test_a_flattening_collate_fn_must_give_position_ids() -> None:
    class Flattening:
        flattens_sequences = True

        def __init__(self, positions: bool) -> None:
            self.return_position_ids = positions

    class Loader:
        def __init__(self, collate_fn: object) -> None:
            self.collate_fn = collate_fn

    check_flattening(Loader(Flattening(True)), "here")
    check_flattening(Loader(None), "here")
    check_flattening(object(), "here")
    with pytest.raises(TrainerConfigError, match=r"here: .*Flattening.*return_position_ids=True"):
        check_flattening(Loader(Flattening(False)), "here")
