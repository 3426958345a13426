"""Trainer.predict on one process: structures, the folder form and what it refuses; and
load_weights without a Trainer. (On several processes: tests/distributed/test_inference.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from accelerate import Accelerator
from safetensors.torch import load_file, save_file

from accmt_metrics import Accuracy
from accmt_trainer import (
    HyperParameters,
    Trainer,
    TrainerConfigError,
    iter_predictions,
    load_predictions,
    load_weights,
)

from .conftest import Classifier, blobs

BATCH_SIZE = 4  # trainer()'s: predict's batches, and check_structure's reference's


def trainer(folder: Path) -> Trainer:
    hps = HyperParameters.from_dict({"epochs": 1, "batch_size": BATCH_SIZE})
    return Trainer(hps, folder, log_with=None, progress_bar=False)


class Predictor(Classifier):
    def predict_step(self, batch: Any) -> Any:
        features, labels = batch
        logits = self.model(features)
        # Sequences of each batch's own length: they cannot be concatenated as one tensor.
        padded = logits.new_zeros(len(labels), 1 + int(labels.sum())).add_(1)
        ragged = [features[i, : 1 + i % 2] for i in range(len(labels))]
        return {"logits": logits, "more": (labels, padded, ragged)}


def batch_by_batch(model: torch.nn.Module, features: torch.Tensor) -> torch.Tensor:
    """The model's outputs over ``features`` in predict's batches: the same rows in the same
    shapes, so the same kernels, bit for bit. (One forward over the whole set is not: MKL and
    oneDNN pick their kernels by shape and CPU, and a (18, 2) input may round the last bits
    otherwise than (4, 2) ones.)"""
    training = model.training
    model.eval()  # as predict runs it
    with torch.no_grad():
        outputs = [model(features[i : i + BATCH_SIZE]) for i in range(0, len(features), BATCH_SIZE)]
    model.train(training)
    return torch.cat(outputs)


def check_structure(predictions: Any, data: Any, model: torch.nn.Module) -> None:
    features, labels = data.tensors
    logits = predictions["logits"]
    # Bit for bit: every sample once, in dataset order, each row computed as predict did.
    assert torch.equal(logits, batch_by_batch(model, features))
    kept_labels, padded, ragged = predictions["more"]
    assert torch.equal(kept_labels, labels)
    assert isinstance(padded, list)
    assert len(padded) == len(labels)
    assert [len(row) for row in ragged] == [1 + (i % 4) % 2 for i in range(len(labels))]


def test_outputs_keep_their_structure_in_dataset_order(tmp_path: Path) -> None:
    data, module = blobs(18), Predictor()
    predictions = trainer(tmp_path).predict(module, data)
    check_structure(predictions, data, module.model)


def test_the_folder_form_writes_shards_that_load_back(tmp_path: Path) -> None:
    data, module = blobs(18), Predictor()
    run = trainer(tmp_path)
    in_memory = run.predict(module, data)
    folder = run.predict(module, data, output_dir=tmp_path / "out", max_shard_size=256)
    assert folder == tmp_path / "out"
    assert len(list(folder.glob("shard-*.safetensors"))) > 1
    assert not list(tmp_path.glob(".tmp-*"))  # the staging folder went into place
    loaded = load_predictions(folder)
    check_structure(loaded, data, module.model)
    assert torch.equal(loaded["logits"], in_memory["logits"])
    batches = list(iter_predictions(folder))
    assert [len(batch["logits"]) for batch in batches] == [4, 4, 4, 4, 2]


@pytest.mark.parametrize(
    ("index", "message"),
    [
        (
            {
                "format": "accmt-predictions/1",
                "structure": "tensor",
                "batches": ["../x.safetensors"],
            },
            "must list .safetensors files of the folder",
        ),
        (
            {"format": "accmt-predictions/1", "structure": "tensor", "batches": ["evil.pkl"]},
            "must list .safetensors files of the folder",
        ),
        ({"format": "pickle", "structure": "tensor", "batches": []}, "is not of the format"),
    ],
)
def test_a_crafted_index_is_refused(tmp_path: Path, index: Any, message: str) -> None:
    (tmp_path / "predictions.json").write_text(json.dumps(index))
    with pytest.raises(TrainerConfigError, match=message):
        load_predictions(tmp_path)


class Bad(Classifier):
    def __init__(self, output: Any) -> None:
        super().__init__()
        self.output = output

    def predict_step(self, batch: Any) -> Any:
        return self.output(batch)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (lambda batch: batch[0].sum(), "0-dimensional tensor"),
        (lambda batch: {"a": batch[0], "b": batch[1][:1]}, "different numbers of samples"),
        (lambda batch: {1: batch[0]}, "dicts with string keys"),
        (lambda batch: "text", "is a str"),
    ],
)
def test_outputs_that_cannot_be_put_together_are_named(
    tmp_path: Path, output: Any, message: str
) -> None:
    with pytest.raises(TrainerConfigError, match=message):
        trainer(tmp_path).predict(Bad(output), blobs(8))


def test_a_module_without_predict_step_is_refused_before_any_batch(tmp_path: Path) -> None:
    with pytest.raises(TrainerConfigError, match="must override predict_step"):
        trainer(tmp_path).predict(Classifier(), blobs(8))


def test_load_weights_without_a_trainer(tmp_path: Path) -> None:
    run = Trainer(
        HyperParameters.from_dict({"epochs": 1, "batch_size": 8}),
        tmp_path / "run",
        log_with=None,
        progress_bar=False,
        max_shard_size=200,  # several shards and an index
        metrics=[Accuracy()],
    )
    trained = Classifier()
    run.fit(trained, blobs(32), blobs(16))
    saved = tmp_path / "run" / "best_valid_loss"
    assert (saved / "model.safetensors.index.json").is_file()
    fresh = Classifier()
    assert load_weights(fresh, saved).name == "model.safetensors.index.json"
    mine, theirs = fresh.model.state_dict(), trained.model.state_dict()
    assert all(torch.equal(mine[name], theirs[name]) for name in theirs)
    checkpoint = tmp_path / "run" / "checkpoints" / "checkpoint_000001"
    assert load_weights(Classifier().model, checkpoint).parent.name == "accelerate"


def test_load_weights_reads_safetensors_only(tmp_path: Path) -> None:
    (tmp_path / "model.bin").write_bytes(b"not read")
    with pytest.raises(TrainerConfigError, match="only safetensors"):
        load_weights(Classifier(), tmp_path / "model.bin")
    save_file({"x": torch.zeros(1)}, str(tmp_path / "a.safetensors"))
    index = {"weight_map": {"0.weight": "a.safetensors", "0.bias": "evil.bin"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(TrainerConfigError, match=r"shards must be \.safetensors files"):
        load_weights(Classifier(), tmp_path)


class TiedHead(torch.nn.Module):
    """An LM's shape: the output layer shares the embedding's weight."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embedding.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.embedding(tokens))
        return logits


def test_tied_weights_saved_once_load_into_both_names(tmp_path: Path) -> None:
    saved = TiedHead()
    Accelerator(cpu=True).save_model(saved, tmp_path)  # stores the tied weight once
    assert list(load_file(str(tmp_path / "model.safetensors"))) == ["embedding.weight"]
    fresh = TiedHead()
    load_weights(fresh, tmp_path)
    assert torch.equal(fresh.head.weight, saved.embedding.weight)
    untied = TiedHead()
    untied.head.weight = torch.nn.Parameter(torch.zeros(10, 4))  # no longer shares it
    with pytest.raises(TrainerConfigError, match=r"missing \['head.weight'\]"):
        load_weights(untied, tmp_path)
