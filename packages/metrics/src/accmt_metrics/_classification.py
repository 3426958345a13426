"""Accuracy (top-k), and Precision, Recall and F1 averaged over classes (micro or macro).

All four keep counts only: Accuracy two numbers, the others three per class.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import torch
from torch import Tensor

from ._base import MetricOptions
from ._dtypes import is_integer
from ._summed import Statistic, SummedMetric

if TYPE_CHECKING:
    from typing_extensions import Unpack

Average = Literal["micro", "macro"]


class _Classification(SummedMetric):
    """Single-label classification: references are class labels, one per sample."""

    def _labels(self, references: Tensor, predictions: Tensor) -> Tensor:
        """The references as int64 labels on the predictions' device."""
        dtype = references.dtype
        if references.ndim != 1 or dtype.is_floating_point or dtype.is_complex:
            raise self.error(
                "references must be integer class labels of shape (n,), got "
                f"{references.dtype} of shape {tuple(references.shape)}"
            )
        if references.get_device() != predictions.get_device():
            references = references.to(predictions.device)
        return references if dtype is torch.int64 else references.long()

    def _scores(self, predictions: Tensor) -> Tensor:
        if predictions.ndim != 2 or not predictions.dtype.is_floating_point:
            raise self.error(
                "predictions must be integer class labels of shape (n,) or floating-point "
                f"scores of shape (n, num_classes), got {predictions.dtype} of shape "
                f"{tuple(predictions.shape)}"
            )
        return predictions

    def _predicted_labels(self, predictions: Tensor) -> Tensor:
        if predictions.ndim == 1 and is_integer(predictions.dtype):
            return predictions if predictions.dtype == torch.int64 else predictions.long()
        return self._scores(predictions).argmax(dim=1)


class Accuracy(_Classification):
    """The fraction of samples whose label is among the ``top_k`` highest scores.

    ``add_batch(predictions, references)``: references are integer labels of shape ``(n,)``;
    predictions are either integer labels of shape ``(n,)`` (``top_k`` must then be 1) or
    floating-point scores (logits or probabilities) of shape ``(n, num_classes)``. With
    ``top_k=1`` the prediction is the first highest score (``argmax``); with ties at the k-th
    place, which of the tied classes count is ``torch.topk``'s choice.

    Keeps two exact counts (correct, seen), whatever the number of samples.

    ``compute()`` returns ``{name: accuracy}``; the name defaults to ``"accuracy"``, or
    ``"top{k}_accuracy"`` when ``top_k > 1``.
    """

    default_name = "accuracy"
    default_greater_is_better = True

    def __init__(
        self,
        top_k: int = 1,
        **options: Unpack[MetricOptions],
    ) -> None:
        if options.get("name") is None and isinstance(top_k, int) and top_k > 1:
            options["name"] = f"top{top_k}_accuracy"
        super().__init__(**options)
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise self.error(f"top_k must be a positive int, got {top_k!r}")
        self.top_k = top_k

    def statistics(self, predictions: Tensor, references: Tensor) -> Sequence[Statistic]:
        labels = self._labels(references, predictions)
        if self.top_k == 1:
            correct = self._predicted_labels(predictions) == labels
        else:
            scores = self._scores(predictions)
            if scores.shape[1] < self.top_k:
                raise self.error(
                    f"top_k={self.top_k} but the scores have {scores.shape[1]} classes"
                )
            # A row's top-k indices are distinct, so each row matches its label at most once.
            correct = scores.topk(self.top_k, dim=1).indices == labels.unsqueeze(1)
        return correct.sum(), labels.shape[0]

    def result(self, *totals: Tensor) -> float:
        correct, seen = totals
        return int(correct) / int(seen)


_AVERAGED_DOC = """
    ``add_batch(predictions, references)``: references are integer labels of shape ``(n,)``;
    predictions are integer labels of shape ``(n,)`` or floating-point scores of shape
    ``(n, num_classes)``, of which the first highest is the prediction. Labels are class
    indices, ``0 .. num_classes - 1``.

    ``average="macro"`` (the default) is the unweighted mean over classes of the per-class
    score; ``"micro"`` pools the counts of every class first. The classes are ``0 ..
    num_classes - 1`` when ``num_classes`` is given, else every label present in the
    predictions or the references of any process, as scikit-learn's ``labels=None`` over the
    pooled samples. A class whose score divides by zero scores ``zero_division``
    (scikit-learn's ``zero_division=0.0``).

    Keeps three exact counts per class (true positives, predicted, true), whatever the number
    of samples. The number of classes comes from ``num_classes`` or from the scores' width;
    with neither (integer predictions and no ``num_classes``) each batch's largest label is
    read, which waits for the device once per batch. A label outside the classes raises a
    :class:`MetricError` on the CPU; on CUDA it trips a device-side assert, as checking first
    would wait for the device at every batch.
"""


class _Averaged(_Classification):
    """Per-class counts, pooled over every sample, then averaged over classes."""

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        # Each score's docstring is its one line, then what all of them share.
        cls.__doc__ = (
            f"{cls.__doc__}\n{_AVERAGED_DOC}\n    ``compute()`` returns "
            f"``{{name: {cls.default_name}}}``; the name defaults to ``{cls.default_name!r}``.\n"
        )

    def __init__(
        self,
        average: Average = "macro",
        num_classes: int | None = None,
        *,
        zero_division: float = 0.0,
        **options: Unpack[MetricOptions],
    ) -> None:
        super().__init__(**options)
        if average not in ("micro", "macro"):
            raise self.error(f"average must be 'micro' or 'macro', got {average!r}")
        if num_classes is not None and (
            isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1
        ):
            raise self.error(f"num_classes must be a positive int or None, got {num_classes!r}")
        self.average: Average = average
        self.num_classes = num_classes
        self.zero_division = float(zero_division)
        self._ones = torch.ones(0, dtype=torch.int64)

    def statistics(self, predictions: Tensor, references: Tensor) -> Sequence[Statistic]:
        """The batch's counts per class: a (3, classes) int64 tensor whose rows are true
        positives, predictions and references."""
        labels, predicted, classes = self._prepared(predictions, references)
        counts = torch.zeros(3, classes, dtype=torch.int64, device=labels.device)
        self._count(counts, predicted, labels)
        return (counts,)

    def _add(self, predictions: Tensor, references: Tensor) -> None:
        # The same counts as statistics(), added straight into the running totals.
        labels, predicted, classes = self._prepared(predictions, references)
        self._count(self._running_counts(classes, labels.device), predicted, labels)

    def _prepared(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, Tensor, int]:
        """The labels, the predicted labels, and the number of classes to count."""
        labels = self._labels(references, predictions)
        predicted = self._predicted_labels(predictions)
        return labels, predicted, self._classes(predictions, predicted, labels)

    def _count(self, counts: Tensor, predicted: Tensor, labels: Tensor) -> None:
        """Add each class's true positives, predictions and references to ``counts``."""
        ones = self._ones_for(labels.shape[0], labels.device)
        try:
            counts[2].index_add_(0, labels, ones)
            counts[1].index_add_(0, predicted, ones)
        except IndexError:
            raise self._outside(counts.shape[1], predicted, labels) from None
        counts[0].index_add_(0, labels, (predicted == labels).long())

    def _classes(self, predictions: Tensor, predicted: Tensor, labels: Tensor) -> int:
        """How many classes this batch needs counts for."""
        if self.num_classes is not None:
            if predictions.ndim == 2 and predictions.shape[1] > self.num_classes:
                raise self.error(
                    f"the scores have {predictions.shape[1]} classes but "
                    f"num_classes={self.num_classes}"
                )
            return self.num_classes
        if predictions.ndim == 2:
            return int(predictions.shape[1])
        low, high = torch.aminmax(torch.cat([predicted, labels]))
        if int(low) < 0:
            raise self.error(f"class labels must not be negative, got {int(low)}")
        return int(high) + 1

    def _running_counts(self, classes: int, device: torch.device) -> Tensor:
        """The running counts, made or widened to at least ``classes``."""
        counts = self._totals[0] if self._totals else None
        assert counts is None or isinstance(counts, Tensor)
        if counts is not None and counts.shape[1] >= classes:
            return counts
        grown = torch.zeros(3, classes, dtype=torch.int64, device=device)
        if counts is not None:
            grown[:, : counts.shape[1]] = counts
        self._totals = [grown]
        return grown

    def _ones_for(self, rows: int, device: torch.device) -> Tensor:
        ones = self._ones
        if ones.shape[0] < rows or ones.device != device:
            ones = self._ones = torch.ones(max(rows, 1024), dtype=torch.int64, device=device)
        return ones[:rows]

    def _outside(self, classes: int, predicted: Tensor, labels: Tensor) -> Exception:
        values = torch.cat([predicted, labels])
        bad = values[(values < 0) | (values >= classes)].tolist()
        source = "num_classes" if self.num_classes is not None else "the scores' width"
        return self.error(
            f"label {bad[0] if bad else '?'} is outside the classes 0 .. {classes - 1} "
            f"({source}: {classes})"
        )

    def result(self, *totals: Tensor) -> float:
        (counts,) = totals
        true_positives, predicted, true = counts.double()
        if self.num_classes is None:
            # The labels present anywhere in predictions or references, as scikit-learn's
            # labels=None.
            present = (predicted + true) > 0
            true_positives, predicted, true = (
                true_positives[present],
                predicted[present],
                true[present],
            )
        numerator, denominator = self._ratio(true_positives, predicted, true)
        if self.average == "micro":
            numerator, denominator = numerator.sum(), denominator.sum()
        zero = torch.full_like(numerator, self.zero_division)
        scores = torch.where(denominator > 0, numerator / denominator.clamp(min=1), zero)
        return float(scores.mean())

    @abc.abstractmethod
    def _ratio(
        self, true_positives: Tensor, predicted: Tensor, true: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Per class, the numerator and the denominator of the score, from the counts of true
        positives, of predictions and of references of that class."""


class Precision(_Averaged):
    """Of the samples predicted as a class, the fraction that are of that class."""

    default_name = "precision"

    def _ratio(
        self, true_positives: Tensor, predicted: Tensor, true: Tensor
    ) -> tuple[Tensor, Tensor]:
        return true_positives, predicted


class Recall(_Averaged):
    """Of the samples of a class, the fraction predicted as that class."""

    default_name = "recall"

    def _ratio(
        self, true_positives: Tensor, predicted: Tensor, true: Tensor
    ) -> tuple[Tensor, Tensor]:
        return true_positives, true


class F1(_Averaged):
    """The harmonic mean of precision and recall: 2 TP / (2 TP + FP + FN)."""

    default_name = "f1"

    def _ratio(
        self, true_positives: Tensor, predicted: Tensor, true: Tensor
    ) -> tuple[Tensor, Tensor]:
        return 2 * true_positives, predicted + true
