"""Each built-in against a straightforward reference computation on random inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as sk

from accmt_metrics import (
    F1,
    Accuracy,
    Mean,
    MeanAbsoluteError,
    MeanSquaredError,
    Perplexity,
    Precision,
    Recall,
)

from ._data import classification, cuts, feed, split

SETTINGS = settings(max_examples=40, deadline=None)
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
AVERAGED = {Precision: sk.precision_score, Recall: sk.recall_score, F1: sk.f1_score}


@SETTINGS
@given(data=classification(), at=st.data())
def test_accuracy_matches_scikit_learn(data: tuple[torch.Tensor, ...], at: st.DataObject) -> None:
    scores, labels, _ = data
    cut = at.draw(cuts(len(labels)))
    expected = sk.accuracy_score(labels.numpy(), scores.argmax(dim=1).numpy())
    assert feed(Accuracy(), scores, labels, cut).compute() == {"accuracy": expected}
    # Labels instead of scores give the same.
    assert feed(Accuracy(), scores.argmax(dim=1), labels, cut).compute() == {"accuracy": expected}


@SETTINGS
@given(data=classification(min_classes=3, distinct_scores=True), k=st.integers(1, 2))
def test_top_k_accuracy_matches_scikit_learn(data: tuple[torch.Tensor, ...], k: int) -> None:
    scores, labels, classes = data
    expected = sk.top_k_accuracy_score(
        labels.numpy(), scores.numpy(), k=k, labels=list(range(classes))
    )
    result = feed(Accuracy(top_k=k), scores, labels, [len(labels) // 2]).compute()
    assert result == {("accuracy" if k == 1 else f"top{k}_accuracy"): pytest.approx(expected)}


@SETTINGS
@given(
    data=classification(),
    at=st.data(),
    average=st.sampled_from(["micro", "macro"]),
    with_classes=st.booleans(),
    as_labels=st.booleans(),
    kind=st.sampled_from(sorted(AVERAGED, key=lambda c: c.__name__)),
)
def test_precision_recall_f1_match_scikit_learn(
    data: tuple[torch.Tensor, ...],
    at: st.DataObject,
    average: str,
    with_classes: bool,
    as_labels: bool,
    kind: type[F1],
) -> None:
    scores, labels, classes = data
    predicted = scores.argmax(dim=1)
    expected = AVERAGED[kind](
        labels.numpy(),
        predicted.numpy(),
        average=average,
        labels=list(range(classes)) if with_classes else None,
        zero_division=0.0,
    )
    metric = kind(average, classes if with_classes else None)  # type: ignore[arg-type]
    # Integer predictions without num_classes: the counts grow with the largest label seen.
    predictions = predicted if as_labels else scores
    result = feed(metric, predictions, labels, at.draw(cuts(len(labels)))).compute()
    assert result == {kind.default_name: pytest.approx(expected, rel=1e-12, abs=1e-15)}


def test_classes_are_those_present_unless_num_classes_is_given() -> None:
    # Class 2 is never predicted nor present: it lowers the macro average only when counted.
    predicted, labels = torch.tensor([0, 1, 1, 3]), torch.tensor([0, 1, 0, 3])
    inferred = F1("macro")
    inferred.add_batch(predicted, labels)
    counted = F1("macro", num_classes=4)
    counted.add_batch(predicted, labels)
    assert inferred.compute()["f1"] == pytest.approx(
        sk.f1_score(labels, predicted, average="macro", zero_division=0.0)
    )
    assert counted.compute()["f1"] == pytest.approx(
        sk.f1_score(labels, predicted, average="macro", labels=[0, 1, 2, 3], zero_division=0.0)
    )
    assert counted.compute()["f1"] < inferred.compute()["f1"]


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from([(1,), (17,), (9, 3), (5, 2, 2)]),
    integer_references=st.booleans(),
    at=st.data(),
)
def test_mse_and_mae_match_scikit_learn(
    seed: int, shape: tuple[int, ...], integer_references: bool, at: st.DataObject
) -> None:
    generator = torch.Generator().manual_seed(seed)
    predictions = torch.randn(shape, generator=generator) * 10
    references = torch.randn(shape, generator=generator) * 10
    if integer_references:
        references = references.round().long()
    cut = at.draw(cuts(shape[0]))
    flat_predictions = predictions.double().reshape(shape[0], -1).numpy()
    flat_references = references.double().reshape(shape[0], -1).numpy()
    for metric, reference in (
        (MeanSquaredError(), sk.mean_squared_error),
        (MeanAbsoluteError(), sk.mean_absolute_error),
    ):
        expected = reference(flat_references, flat_predictions)
        result = feed(metric, predictions, references, cut).compute()
        assert result == {metric.name: pytest.approx(expected, rel=1e-12)}


@SETTINGS
@given(
    values=st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=30),
    data=st.data(),
)
def test_mean_matches_numpy_weighted_average(values: list[float], data: st.DataObject) -> None:
    weights = data.draw(st.lists(st.floats(0.01, 64), min_size=len(values), max_size=len(values)))
    expected = np.average(values, weights=weights)
    # Scalars one at a time, as a running loss is fed.
    running = Mean(name="loss")
    for value, weight in zip(values, weights, strict=True):
        running.update(torch.tensor(value, dtype=torch.float64), weight=weight)
    assert running.compute() == {"loss": pytest.approx(expected, rel=1e-12, abs=1e-12)}
    # Per-sample values with per-sample weights, in batches.
    batched = Mean()
    for batch_values, batch_weights in split(
        [torch.tensor(values, dtype=torch.float64), torch.tensor(weights, dtype=torch.float64)],
        data.draw(cuts(len(values))),
    ):
        batched.add_batch(batch_values, weight=batch_weights)
    assert batched.compute() == {"mean": pytest.approx(expected, rel=1e-12, abs=1e-12)}
    # Unweighted, each value counts once.
    plain = Mean()
    plain.add_batch(torch.tensor(values, dtype=torch.float64))
    assert plain.compute() == {"mean": pytest.approx(np.mean(values), rel=1e-12, abs=1e-12)}


def reference_perplexity(logits: np.ndarray, targets: np.ndarray, ignore: int) -> float:
    flat_logits = logits.reshape(-1, logits.shape[-1]).astype(np.float64)
    flat_targets = targets.reshape(-1)
    scored = flat_targets != ignore
    top = flat_logits.max(axis=1, keepdims=True)
    log_normaliser = np.log(np.exp(flat_logits - top).sum(axis=1)) + top[:, 0]
    picked = flat_logits[np.arange(len(flat_targets)), np.where(scored, flat_targets, 0)]
    nll = (log_normaliser - picked)[scored]
    return math.exp(nll.mean())


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from([(6,), (4, 5), (3, 2, 4)]),
    vocabulary=st.integers(2, 9),
    at=st.data(),
)
def test_perplexity_matches_a_numpy_log_softmax(
    seed: int, shape: tuple[int, ...], vocabulary: int, at: st.DataObject
) -> None:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(*shape, vocabulary, generator=generator, dtype=torch.float64) * 3
    targets = torch.randint(0, vocabulary, shape, generator=generator)
    targets[0].view(-1)[0] = 0  # at least one scored token
    ignored = torch.rand(shape, generator=generator) < 0.3
    ignored.view(-1)[0] = False
    targets[ignored] = -100
    expected = reference_perplexity(logits.numpy(), targets.numpy(), -100)
    result = feed(Perplexity(causal=False), logits, targets, at.draw(cuts(shape[0]))).compute()
    assert result == {"perplexity": pytest.approx(expected, rel=1e-12)}
    # float32 logits: cross_entropy in float32, so only float32 agreement.
    single = feed(Perplexity(causal=False), logits.float(), targets).compute()
    assert single["perplexity"] == pytest.approx(expected, rel=1e-5)


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size() -> None:
    metric = Perplexity(ignore_index=0, causal=False)
    metric.add_batch(torch.zeros(3, 4, 11), torch.randint(1, 11, (3, 4)))
    assert metric.compute()["perplexity"] == pytest.approx(11.0)


@pytest.mark.parametrize("device", DEVICES)
def test_results_are_plain_floats_on_every_device(device: str) -> None:
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(50, 4, generator=generator)
    labels = torch.randint(0, 4, (50,), generator=generator)
    targets = torch.randn(50, generator=generator)
    expected = {
        "accuracy": sk.accuracy_score(labels, scores.argmax(1)),
        "f1": sk.f1_score(labels, scores.argmax(1), average="macro", zero_division=0.0),
        "mse": sk.mean_squared_error(targets, scores[:, 0]),
    }
    on = torch.device(device)
    accuracy, f1, mse = Accuracy(), F1(), MeanSquaredError()
    accuracy.add_batch(scores.to(on), labels.to(on))
    f1.add_batch(scores.to(on), labels.to(on))
    mse.add_batch(scores[:, 0].to(on), targets.to(on))
    results = {**accuracy.compute(), **f1.compute(), **mse.compute()}
    assert results == pytest.approx(expected, rel=1e-6)
    assert all(type(value) is float for value in results.values())
