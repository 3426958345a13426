"""An optimizer step is the mean over the items of its whole window: a summed loss with
``num_items`` gives the same step however the batch is split (batch x accumulation), as one
batch holding every sequence; a window shorter than the accumulation (an epoch's last) is the
mean over its own batches. (On 2 processes: tests/distributed/test_token_steps.py.)"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from accmt_callbacks import Callback
from accmt_trainer import HyperParameters, Monitor, StepOutputError, Trainer

from .conftest import Classifier, blobs

sys.path.insert(0, str(Path(__file__).parent / "workers"))
import token_steps


def test_every_split_steps_as_one_batch_of_all_the_tokens() -> None:
    differences = token_steps.run()[0]
    assert set(differences) == {
        "tokens 8x1",
        "tokens 4x2",
        "tokens 2x4",
        "tokens 1x8",
        "partial window 2x4",
    }
    assert max(differences.values()) < 1e-5, differences


def test_a_mean_loss_would_not(tmp_path: Path) -> None:
    # What the direct computation tells apart: the per-batch mean over its own tokens, as
    # Accelerate averages it, is another step (the check above can fail).
    class MeanTokens(token_steps.TokenModule):
        def training_step(self, batch: dict[str, torch.Tensor]) -> Any:
            summed = super().training_step(batch)
            return summed["loss"] / summed["num_items"]

    model, _ = token_steps.trained(MeanTokens(), token_steps.sequences(), 2, 4, lr=1.0)
    assert token_steps.largest_difference(model, token_steps.token_reference()) > 1e-3


def fit(tmp_path: Path, module: Classifier, **options: Any) -> list[dict[str, float]]:
    hps = HyperParameters(epochs=1, batch_size=8, optimizer="SGD", optimizer_kwargs={"lr": 0.1})
    trainer = Trainer(
        hps, tmp_path, log_with=None, progress_bar=False, checkpoint_every=None, **options
    )
    logged: list[dict[str, float]] = []
    trainer.log = lambda values, step=None: logged.append(dict(values))  # type: ignore[method-assign]
    trainer.fit(module, blobs(32))
    return logged


class Summed(Classifier):
    """Each batch's loss summed over its samples, and a weight per batch chosen by the test."""

    def __init__(self, items: Any) -> None:
        super().__init__()
        self.items, self.batches = items, 0
        self.seen: list[tuple[float, float]] = []

    def training_step(self, batch: Any) -> Any:
        features, labels = batch
        loss = torch.nn.functional.cross_entropy(self.model(features), labels, reduction="sum")
        items = self.items(self.batches)
        self.batches += 1
        if items is None:
            return loss
        if isinstance(items, (int, torch.Tensor)) and torch.as_tensor(items).numel() == 1:
            self.seen.append((float(loss.detach()), float(items)))
        return {"loss": loss, "num_items": items}


def test_the_logged_training_loss_is_the_item_weighted_mean(tmp_path: Path) -> None:
    module = Summed(lambda batch: torch.tensor(8 + batch))
    logged = fit(tmp_path, module, log_every=2)
    losses = [values["train/loss"] for values in logged if "train/loss" in values]
    windows = [module.seen[0:2], module.seen[2:4]]
    expected = [sum(s for s, _ in w) / sum(n for _, n in w) for w in windows]
    assert losses == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    ("items", "match"),
    [
        (lambda batch: 8 if batch == 0 else None, r"no num_items at batch 2.*on none"),
        (lambda batch: None if batch == 0 else 8, r"a num_items at batch 2.*mean losses"),
        (lambda batch: 0, r"adding up to 0 over a whole optimizer step \(optimizer step 1"),
        (lambda batch: -1, r"num_items=-1"),
        (lambda batch: "8", r"num_items='8'"),
        (lambda batch: torch.ones(2), r"num_items=tensor"),
    ],
    ids=["dropped", "added", "zero", "negative", "text", "not one number"],
)
def test_bad_num_items_are_named(tmp_path: Path, items: Any, match: str) -> None:
    module = Summed(items)
    with pytest.raises(StepOutputError, match=match):
        fit(tmp_path, module)
    assert module.batches <= 2  # named at the batch that gave it, or before the first step


def test_a_later_step_without_items_leaves_the_weights_as_they_were(tmp_path: Path) -> None:
    class Records(Callback):
        def __init__(self) -> None:
            self.weights: list[torch.Tensor] = []

        def on_after_optimizer_step(self, optimizer: Any) -> None:
            self.weights.append(self.trainer.model[0].weight.detach().clone())

    class AllPadding(Summed):
        """Batch 3 is all padding: a summed loss over no item, 0."""

        def training_step(self, batch: Any) -> Any:
            output = super().training_step(batch)
            if self.batches == 3:
                output["loss"] = output["loss"] * 0
            return output

    records = Records()
    # Plain SGD: a step's update is its gradient alone; step 3's is 0 (not 0/0).
    fit(tmp_path, AllPadding(lambda batch: 0 if batch == 2 else 8), callbacks=[records])
    assert torch.equal(records.weights[2], records.weights[1])
    assert not torch.equal(records.weights[3], records.weights[2])
    assert all(bool(torch.isfinite(weights).all()) for weights in records.weights)


def test_a_dict_must_hold_the_loss(tmp_path: Path) -> None:
    class Unknown(Classifier):
        def training_step(self, batch: Any) -> Any:
            return {"loss": super().training_step(batch), "tokens": 3}

    with pytest.raises(StepOutputError, match=r"keys \['loss', 'tokens'\]"):
        fit(tmp_path, Unknown())


@pytest.mark.parametrize("accumulation", [1, 2])
def test_no_step_s_loss_or_items_outlive_the_step(tmp_path: Path, accumulation: int) -> None:
    # Kept per-step scalars (loss windows, throughput, the non-finite guard) pinned small blocks
    # amid the heap a step's logits are freed into: the heap grew by 100-250 MiB on a small GPT-2.
    # With accumulation, a window's num_items are added in place too, not held to its end.
    class Watched(Summed):
        def training_step(self, batch: Any) -> Any:
            output = super().training_step(batch)
            self.kept = [StorageWeakRef(output[key].untyped_storage()) for key in output]
            return output

    class Checks(Callback):
        def __init__(self) -> None:
            self.alive: list[int] = []

        def on_before_training_step(self, batch: Any) -> None:
            kept = getattr(module, "kept", [])
            self.alive.append(sum(not reference.expired() for reference in kept))

    module, checks = Watched(lambda batch: torch.tensor(8)), Checks()
    fit(
        tmp_path,
        module,
        callbacks=[checks],
        monitor=Monitor(throughput=True),
        log_every=3,
        grad_accumulation_steps=accumulation,
    )
    assert checks.alive == [0, 0, 0, 0]
