"""The Trainer on flattened batches (accmt-collators' ``DataCollatorWithFlattening``): an
optimizer step with ``num_items`` equals the step on padded batches, and fit's validation
counts documents as padded batches do; ``evaluate`` gives the padded batches' loss and
metrics, the metrics fed one row per document; ``predict`` gives one prediction per document,
in dataset order; and a flattened batch without ``position_ids`` is refused before any step.
(On 2 processes: tests/distributed/test_flattened_inference.py.)"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch

from accmt_collators import DataCollatorWithFlattening
from accmt_trainer import HyperParameters, Trainer, TrainerConfigError, load_predictions
from tests.trainer._tiny_gpt2 import LENGTHS

sys.path.insert(0, str(Path(__file__).parents[1] / "distributed" / "workers"))
import flattened_worker as worker

pytestmark = pytest.mark.transformers
FLATTENED = ("one row", "rows of 16")


def stepped(way: str) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """The weights after one SGD step (lr 1) over 8 documents: 2 batches of 4, accumulated;
    and fit's validation of every document after it."""
    with tempfile.TemporaryDirectory() as folder:
        runner = worker.trainer(folder, way, grad_accumulation_steps=2, shuffle_train=False)
        module = worker.CausalLM(dropout=0.0)
        state = runner.fit(module, worker.documents(LENGTHS[:8]), worker.documents())
        assert state.global_step == 1
        weights = {k: v.detach().clone() for k, v in module.model.state_dict().items()}
        return weights, state.additional_metrics["validation"]


def test_a_step_on_flattened_batches_with_num_items_equals_the_padded_step() -> None:
    padded, validated = stepped("padded")
    before = worker.CausalLM(dropout=0.0).model.state_dict()
    assert max(float((padded[k] - before[k]).abs().max()) for k in padded) > 1e-3
    assert validated["documents"] == len(LENGTHS)
    for way in FLATTENED:
        weights, found = stepped(way)
        differences = {k: float((weights[k] - padded[k]).abs().max()) for k in padded}
        assert max(differences.values()) < 1e-5, (way, differences)
        # fit's validation, per document as padded (of weights equal within 1e-5).
        assert found["documents"] == len(LENGTHS), way
        assert found["scored"] == validated["scored"], way
        assert found["loss"] == pytest.approx(validated["loss"], rel=1e-5), way


@pytest.fixture(scope="module")
def inferred() -> dict[str, Any]:
    return worker.run()


def test_evaluate_gives_the_padded_loss_and_metrics_per_document(inferred: Any) -> None:
    padded = inferred["padded"]["evaluate"]
    expected = worker.alone_loss(worker.alone())
    assert padded["loss"] == pytest.approx(expected, rel=1e-6)
    assert padded["documents"] == len(LENGTHS)
    for way in FLATTENED:
        found = inferred[way]["evaluate"]
        assert set(found) == set(padded), way
        # Each document scores its tokens after the first, as padded; a row would not.
        assert found["documents"] == len(LENGTHS), way
        assert found["scored"] == padded["scored"] == sum(n - 1 for n in LENGTHS), way
        for name in ("loss", "perplexity"):
            assert found[name] == pytest.approx(padded[name], rel=1e-6), (way, name)


def test_predict_gives_one_prediction_per_document_in_dataset_order(inferred: Any) -> None:
    alone = worker.alone()
    for way in ("padded", *FLATTENED):
        predicted = [torch.tensor(rows) for rows in inferred[way]["predict"]]
        assert [len(rows) for rows in predicted] == list(LENGTHS), way
        for index, (rows, expected) in enumerate(zip(predicted, alone, strict=True)):
            assert torch.allclose(rows, expected, atol=1e-5), (way, index)


def test_predictions_written_in_shards_read_back_per_document(tmp_path: Path) -> None:
    runner = worker.trainer(str(tmp_path), "rows of 16")
    module, data = worker.CausalLM(), worker.documents()
    folder = runner.predict(module, data, output_dir=tmp_path / "predicted", max_shard_size=4096)
    stored = load_predictions(folder)
    assert isinstance(stored, list)
    assert [len(rows) for rows in stored] == list(LENGTHS)
    for rows, expected in zip(stored, runner.predict(module, data), strict=True):
        assert torch.equal(rows, expected)


class Counting(worker.CausalLM):
    """Counts the steps that ran."""

    steps = 0

    def training_step(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        Counting.steps += 1
        return super().training_step(batch)

    def validation_step(self, key: str, batch: dict[str, Any]) -> dict[str, Any]:
        Counting.steps += 1
        return super().validation_step(key, batch)

    def predict_step(self, batch: dict[str, Any]) -> torch.Tensor:
        Counting.steps += 1
        return super().predict_step(batch)


@pytest.mark.parametrize("call", ["fit", "evaluate", "predict"])
def test_a_flattening_collate_fn_without_position_ids_is_refused_before_a_step(
    tmp_path: Path, call: str
) -> None:
    module, data = Counting(), worker.documents()
    Counting.steps = 0
    runner = Trainer(
        HyperParameters(epochs=1, batch_size=4),
        tmp_path,
        collate_fn=DataCollatorWithFlattening(return_position_ids=False),
        log_with=None,
        progress_bar=False,
        cpu=True,
        checkpoint_every=None,
    )
    where = {"fit": "the training data", "evaluate": "set 'test'", "predict": r"\(data=\.\.\.\)"}
    with pytest.raises(TrainerConfigError, match=rf"{where[call]}.*return_position_ids=True"):
        getattr(runner, call)(module, data)
    assert Counting.steps == 0


def test_a_flattened_batch_without_position_ids_is_refused_at_the_batch(tmp_path: Path) -> None:
    class OwnCollator(Counting):
        """The module's own collate_fn: the Trainer sees no marker, only the batch."""

        def collate_fn(self, samples: list[Any]) -> Any:
            return DataCollatorWithFlattening(return_position_ids=False)(samples)

    Counting.steps = 0
    runner = worker.trainer(str(tmp_path), "padded")
    with pytest.raises(TrainerConfigError, match=r"validation_step.*no 'position_ids'"):
        runner.evaluate(OwnCollator(), worker.documents())
    assert Counting.steps == 0
