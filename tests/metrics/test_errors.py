"""Bad input raises a MetricError that names the metric."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch

from accmt_metrics import (
    F1,
    Accuracy,
    Mean,
    MeanAbsoluteError,
    MeanSquaredError,
    Metric,
    MetricError,
    Perplexity,
    Precision,
    Recall,
)

SCORES = torch.randn(4, 3)
LABELS = torch.tensor([0, 1, 2, 1])


def raises(prefix: str, match: str) -> pytest.RaisesContext[MetricError]:
    return pytest.raises(MetricError, match=re.escape(prefix) + ": .*" + match)


def test_the_message_of_a_shape_mismatch() -> None:
    with pytest.raises(MetricError) as caught:
        Accuracy().add_batch(SCORES[:3], LABELS)
    assert (
        str(caught.value) == "Accuracy('accuracy'): predictions have 3 rows but references have 4"
    )
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("metric", "predictions", "references", "match"),
    [
        (Accuracy(), SCORES, LABELS.float(), "references must be integer class labels"),
        (Accuracy(), SCORES.long(), LABELS, "floating-point scores"),
        (Accuracy(), SCORES.argmax(1).float(), LABELS, "integer class labels of shape"),
        (Accuracy(top_k=2), LABELS, LABELS, "integer class labels of shape .n,. or floating"),
        (Accuracy(top_k=4), SCORES, LABELS, "top_k=4 but the scores have 3 classes"),
        (F1(name="f1_macro"), SCORES, LABELS[:, None], "references must be integer"),
        (Precision(), torch.randn(4, 3, 2), LABELS, "predictions must be"),
        (Recall(), [0, 1, 2, 1], LABELS, "predictions must be a torch.Tensor, got list"),
        (MeanSquaredError(), SCORES, SCORES[:, :2], r"shape \(4, 3\) but references"),
        (MeanAbsoluteError(), SCORES > 0, SCORES, "must be real numbers"),
        (MeanSquaredError(), torch.tensor(1.0), torch.tensor(1.0), "one row per sample"),
        (Perplexity(), torch.randn(4, 5, 7), torch.randint(0, 7, (4, 6)), "do not fit targets"),
        (Perplexity(), torch.randint(0, 7, (4, 7)), LABELS, "floating-point logits"),
        (
            Perplexity(),
            torch.randn(4, 7),
            torch.tensor([0, 1, 9, -100]),
            "a target is outside the vocabulary of 7",
        ),
    ],
)
def test_bad_batches_raise_naming_the_metric(
    metric: Metric, predictions: torch.Tensor, references: torch.Tensor, match: str
) -> None:
    with raises(repr(metric), match):
        metric.add_batch(predictions, references)


@pytest.mark.parametrize(
    "metric", [Accuracy(), F1(), MeanSquaredError(), Mean(name="loss"), Perplexity()]
)
def test_compute_before_any_batch(metric: Metric) -> None:
    with raises(repr(metric), "compute.. was called before any sample was added"):
        metric.compute()


@pytest.mark.parametrize(
    ("mask", "match"),
    [
        (torch.ones(4), "mask must be a bool tensor"),
        ([True, True, True, True], "mask must be a bool tensor"),
        (torch.ones(3, dtype=torch.bool), r"mask has shape \(3,\) but the batch has 4 samples"),
        (torch.ones(4, 1, dtype=torch.bool), r"mask has shape \(4, 1\)"),
    ],
)
def test_bad_masks(mask: object, match: str) -> None:
    with raises("Accuracy('top')", match):
        Accuracy(name="top").add_batch(SCORES, LABELS, mask=mask)  # type: ignore[arg-type]


def test_num_samples_beyond_what_was_added() -> None:
    metric = Accuracy(num_samples=5)
    metric.add_batch(SCORES, LABELS)
    with raises("Accuracy('accuracy')", "num_samples=5 but 4 samples were added"):
        metric.compute()


@pytest.mark.parametrize(
    ("value", "match"),
    [("4", "num_samples must be an int or None, got '4'"), (True, "got True"), (-1, "negative")],
)
def test_a_bad_num_samples_raises_when_it_is_set(value: object, match: str) -> None:
    with raises("Accuracy('accuracy')", match):
        Accuracy(num_samples=value)  # type: ignore[arg-type]
    metric = Accuracy()
    with raises("Accuracy('accuracy')", match):
        metric.num_samples = value  # type: ignore[assignment]


def test_num_samples_cannot_change_while_batches_are_held() -> None:
    metric = Accuracy(num_samples=4)
    metric.add_batch(SCORES, LABELS)
    metric.num_samples = 4  # the same value is harmless
    with raises("Accuracy('accuracy')", "num_samples changed from 4 to 3 after 1 batch"):
        metric.num_samples = 3
    metric.reset()
    metric.num_samples = 3
    metric.add_batch(SCORES, LABELS)
    first_three = Accuracy()
    first_three.add_batch(SCORES[:3], LABELS[:3])
    assert metric.compute() == first_three.compute()


def test_labels_outside_the_classes() -> None:
    metric = F1(num_classes=2)
    with raises("F1('f1')", r"label 2 is outside the classes 0 .. 1 \(num_classes: 2\)"):
        metric.add_batch(torch.tensor([0, 1, 1, 0]), LABELS)
    with raises("F1('f1')", "the scores have 3 classes but num_classes=2"):
        metric.add_batch(SCORES, LABELS)
    with raises("Precision('precision')", r"label 5 is outside the classes 0 .. 2 \(the scores"):
        Precision().add_batch(SCORES, torch.tensor([0, 5, 1, 1]))
    with raises("Recall('recall')", "class labels must not be negative, got -1"):
        Recall().add_batch(torch.tensor([0, 1, 1, 0]), torch.tensor([0, -1, 1, 1]))


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Accuracy(top_k=0), "top_k must be a positive int"),
        (lambda: F1("weighted"), "average must be 'micro' or 'macro'"),  # type: ignore[arg-type]
        (lambda: Recall(num_classes=0), "num_classes must be a positive int"),
    ],
)
def test_bad_configuration(build: Callable[[], Metric], match: str) -> None:
    with pytest.raises(MetricError, match=match):
        build()


def test_mean_inputs() -> None:
    mean = Mean(name="loss")
    with raises("Mean('loss')", "takes values and no references"):
        mean.add_batch(torch.ones(3), torch.ones(3))
    with raises("Mean('loss')", "weight has 2 entries but there are 3 values"):
        mean.add_batch(torch.ones(3), weight=torch.ones(2))
    with raises("Mean('loss')", r"scalar or one value per sample \(1-D\), got shape \(2, 2\)"):
        mean.update(torch.ones(2, 2))
    with raises("Mean('loss')", "must be a number or a tensor, got str"):
        mean.update("1.0")  # type: ignore[arg-type]
    mean.update(1.0, weight=-1)
    with raises("Mean('loss')", "a weight is negative"):
        mean.compute()
    mean.reset()
    mean.update(1.0, weight=0)
    with raises("Mean('loss')", "the weights add up to zero"):
        mean.compute()


def test_perplexity_with_every_token_ignored() -> None:
    metric = Perplexity(causal=False)
    metric.add_batch(torch.randn(2, 3, 5), torch.full((2, 3), -100))
    with raises("Perplexity('perplexity')", "no token to score"):
        metric.compute()


def test_a_mask_that_drops_everything() -> None:
    metric = Accuracy()
    metric.add_batch(SCORES, LABELS, mask=torch.zeros(4, dtype=torch.bool))
    with raises("Accuracy('accuracy')", "the mask drops every one of the 4 samples added"):
        metric.compute()
