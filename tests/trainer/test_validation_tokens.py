"""A validation loss summed over items with ``num_items`` is token-weighted: the set's loss is
the sum of its losses over the sum of its items, not a mean of batch means, so that for a
causal LM its ``exp`` is the set's perplexity. (On 2 processes:
tests/distributed/test_validation_tokens.py.)"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from accmt_trainer import HyperParameters, StepOutputError, Trainer

from .conftest import Classifier, blobs

sys.path.insert(0, str(Path(__file__).parent / "workers"))
import causal_lm_validation

HPS = HyperParameters(epochs=1, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.0})


def trainer(tmp_path: Path) -> Trainer:
    return Trainer(
        HPS,
        tmp_path / "run",
        log_with=None,
        progress_bar=False,
        checkpoint_every=None,
        disable_model_saving=True,
    )


@pytest.mark.transformers
def test_exp_of_a_gpt2_s_token_weighted_validation_loss_is_its_perplexity() -> None:
    found, _ = causal_lm_validation.run()
    expected = causal_lm_validation.by_hand()
    for where in ("fit", "evaluate"):
        values = found[where]
        assert values["loss"] == pytest.approx(expected, rel=1e-6), where
        assert math.exp(values["loss"]) == pytest.approx(values["perplexity"], rel=1e-6), where
    # Each batch's own mean, averaged over the batches (the loss without num_items), is
    # another figure, 1.4e-4 away from it here (100 times the tolerance above): exp of it is
    # not the perplexity.
    means, _ = causal_lm_validation.run(summed=False)
    assert means["fit"]["perplexity"] == pytest.approx(found["fit"]["perplexity"], rel=1e-12)
    assert abs(means["fit"]["loss"] - expected) > 2e-5 * expected


class Summed(Classifier):
    """Validation losses summed over the batch's samples; ``items(batch_index, labels)`` says
    what ``num_items`` is (None: a mean loss)."""

    def __init__(self, items: Any) -> None:
        super().__init__()
        self.items, self.batches = items, 0

    def validation_step(self, key: str, batch: Any) -> Any:
        features, labels = batch
        summed = torch.nn.functional.cross_entropy(self.model(features), labels, reduction="sum")
        items = self.items(self.batches, labels)
        self.batches += 1
        if items is None:
            return {"loss": summed / len(labels)}
        return {"loss": summed, "num_items": items}


def per_sample_loss(module: Classifier, data: Any) -> float:
    features, labels = data.tensors
    with torch.no_grad():
        losses = torch.nn.functional.cross_entropy(module.model(features), labels, reduction="none")
    return float(losses.double().mean())


@pytest.mark.parametrize("as_tensor", [False, True])
def test_the_set_s_loss_is_the_mean_over_its_items(tmp_path: Path, as_tensor: bool) -> None:
    data = blobs(21, seed=1)  # batches of 8, 8 and 5
    count = (lambda _, labels: torch.tensor(len(labels))) if as_tensor else (lambda _, y: len(y))
    module = Summed(count)
    state = trainer(tmp_path).fit(module, blobs(16), data)
    expected = per_sample_loss(module, data)
    assert state.additional_metrics["validation"]["loss"] == pytest.approx(expected, rel=1e-6)
    evaluated = trainer(tmp_path).evaluate(module, data)
    assert evaluated["loss"] == pytest.approx(expected, rel=1e-6)
    # The mean of the three batch means weighs the last 5 samples as 8: another figure.
    means = trainer(tmp_path).evaluate(Summed(lambda *_: None), data)["loss"]
    assert abs(means - expected) > 1e-4


@pytest.mark.parametrize(
    ("items", "match"),
    [
        (lambda *_: "8", r"Summed.validation_step\('validation', batch\) returned num_items='8'"),
        (lambda *_: torch.ones(2), r"returned num_items=tensor\(\[1., 1.\]\)"),
    ],
)
def test_bad_num_items_are_named_before_training(tmp_path: Path, items: Any, match: str) -> None:
    run = trainer(tmp_path)
    with pytest.raises(StepOutputError, match=match):
        run.fit(Summed(items), blobs(16), blobs(8, seed=1))
    assert run.state.global_step == 0


class ItemsAlone(Classifier):
    def validation_step(self, key: str, batch: Any) -> Any:
        return {"num_items": len(batch[1]), "accuracy": (self.model(batch[0]), batch[1])}


def test_num_items_without_a_loss_is_named(tmp_path: Path) -> None:
    with pytest.raises(StepOutputError, match="returned num_items but no loss"):
        trainer(tmp_path).fit(ItemsAlone(), blobs(16), blobs(8, seed=1))


def test_a_set_whose_batches_mix_summed_and_mean_losses_is_named(tmp_path: Path) -> None:
    module = Summed(lambda batch, labels: len(labels) if batch == 0 else None)
    with pytest.raises(
        StepOutputError,
        match=r"returned no num_items at batch 2, where the "
        r"set's first batches returned summed losses with num_items",
    ):
        trainer(tmp_path).evaluate(module, blobs(21, seed=1))


def test_items_adding_up_to_0_over_the_set_are_named(tmp_path: Path) -> None:
    with pytest.raises(StepOutputError, match="returned num_items adding up to 0 over the whole"):
        trainer(tmp_path).evaluate(Summed(lambda *_: 0), blobs(21, seed=1))
