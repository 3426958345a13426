"""TorchMetricsAdapter: any torchmetrics metric behind the same interface."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torchmetrics
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as sk
from torch import Tensor
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from accmt_metrics import F1, Accuracy, MeanSquaredError, MetricError, TorchMetricsAdapter

from ._data import classification, cuts, feed


class ExactMatch(torchmetrics.Metric):
    """A text metric: lists of strings in, a dict out, no opinion on which way is better."""

    higher_is_better = None

    def __init__(self) -> None:
        super().__init__()
        self.add_state("matches", torch.tensor(0), dist_reduce_fx="sum")
        self.add_state("total", torch.tensor(0), dist_reduce_fx="sum")

    def update(self, predictions: list[str], references: list[str]) -> None:
        self.matches += sum(p == r for p, r in zip(predictions, references, strict=True))
        self.total += len(references)

    def compute(self) -> dict[str, Tensor]:
        return {"matches": self.matches, "rate": self.matches / self.total}


@settings(max_examples=25, deadline=None)
@given(data=classification(), at=st.data())
def test_wrapped_metrics_match_the_built_ins_and_scikit_learn(
    data: tuple[Tensor, ...], at: st.DataObject
) -> None:
    scores, labels, classes = data
    cut = at.draw(cuts(len(labels)))
    accuracy = TorchMetricsAdapter(MulticlassAccuracy(num_classes=classes, average="micro"))
    assert feed(accuracy, scores, labels, cut).compute() == {
        "multiclass_accuracy": pytest.approx(feed(Accuracy(), scores, labels).compute()["accuracy"])
    }
    # torchmetrics leaves out of its macro average the classes absent from both predictions
    # and references, as scikit-learn's labels=None (and our F1 without num_classes) do.
    f1 = TorchMetricsAdapter(MulticlassF1Score(num_classes=classes), name="f1")
    expected = sk.f1_score(labels, scores.argmax(1), average="macro", zero_division=0.0)
    assert feed(f1, scores, labels, cut).compute() == {"f1": pytest.approx(expected, rel=1e-6)}
    assert feed(F1(), scores, labels, cut).compute() == {"f1": pytest.approx(expected, rel=1e-12)}


def test_name_and_direction_come_from_the_wrapped_metric() -> None:
    accuracy = TorchMetricsAdapter(MulticlassAccuracy(num_classes=3))
    assert (accuracy.name, accuracy.greater_is_better) == ("multiclass_accuracy", True)
    mse = TorchMetricsAdapter(torchmetrics.MeanSquaredError())
    assert (mse.name, mse.greater_is_better) == ("mean_squared_error", False)
    with pytest.raises(
        MetricError, match=r"TorchMetricsAdapter\(ExactMatch\): .*greater_is_better="
    ):
        TorchMetricsAdapter(ExactMatch())
    with pytest.raises(MetricError, match=r"expected a torchmetrics\.Metric"):
        TorchMetricsAdapter(MeanSquaredError())  # type: ignore[arg-type]


def test_padding_is_dropped_before_the_wrapped_metric_sees_it() -> None:
    generator = torch.Generator().manual_seed(3)
    predictions, targets = (
        torch.randn(10, generator=generator),
        torch.randn(10, generator=generator),
    )
    reference = MeanSquaredError()
    reference.add_batch(predictions[[0, 1, 2, 3, 5, 6]], targets[[0, 1, 2, 3, 5, 6]])
    adapter = TorchMetricsAdapter(torchmetrics.MeanSquaredError(), name="mse", num_samples=7)
    adapter.add_batch(predictions[:4], targets[:4])
    adapter.add_batch(predictions[4:], targets[4:], mask=torch.arange(4, 10) != 4)
    assert adapter.compute() == pytest.approx(reference.compute(), rel=1e-6)
    assert adapter.compute() == adapter.compute()


def test_lists_dicts_and_per_class_tensors_come_out_flat(tmp_path: Path) -> None:
    text = TorchMetricsAdapter(ExactMatch(), name="exact", greater_is_better=True, num_samples=3)
    text.add_batch(["a", "b"], ["a", "c"])
    text.add_batch(["d", "x"], ["d", "y"])  # "x" is padding; counted it would lower the rate
    assert text.compute() == {"exact_matches": 2.0, "exact_rate": pytest.approx(2 / 3)}
    torch.save(text.state_dict(), tmp_path / "text.pt")
    restored = TorchMetricsAdapter(
        ExactMatch(), name="exact", greater_is_better=True, num_samples=3
    )
    restored.load_state_dict(torch.load(tmp_path / "text.pt", weights_only=True))
    assert restored.compute() == text.compute()

    per_class = TorchMetricsAdapter(MulticlassAccuracy(num_classes=3, average=None), name="acc")
    per_class.add_batch(torch.tensor([0, 1, 1, 2]), torch.tensor([0, 1, 2, 2]))
    assert per_class.compute() == {"acc_0": 1.0, "acc_1": 1.0, "acc_2": 0.5}


def test_bad_batches_and_empty_compute() -> None:
    adapter = TorchMetricsAdapter(torchmetrics.MeanSquaredError())
    with pytest.raises(MetricError, match="predictions have 3 rows but references have 2"):
        adapter.add_batch(torch.ones(3), torch.ones(2))
    with pytest.raises(MetricError, match="must be a tensor or a sequence, got float"):
        adapter.add_batch(1.0, 1.0)
    with pytest.raises(MetricError, match="before any sample"):
        adapter.compute()


def test_torchmetrics_is_needed_only_to_build_an_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    metric = torchmetrics.MeanSquaredError()
    monkeypatch.setitem(sys.modules, "torchmetrics", None)
    with pytest.raises(ImportError, match="pip install torchmetrics"):
        TorchMetricsAdapter(metric)
