"""Accuracy (top-k), and Precision, Recall and F1 averaged over classes (micro or macro)."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Literal

import torch
from torch import Tensor

from ._base import Metric, MetricOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack
from ._dtypes import is_integer

Average = Literal["micro", "macro"]


class _Classification(Metric):
    """Single-label classification: references are class labels, one per sample."""

    def _labels(self, references: Tensor) -> Tensor:
        if references.ndim != 1 or not is_integer(references.dtype):
            raise self.error(
                "references must be integer class labels of shape (n,), got "
                f"{references.dtype} of shape {tuple(references.shape)}"
            )
        return references.long()

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
            return predictions.long()
        return self._scores(predictions).argmax(dim=1)


class Accuracy(_Classification):
    """The fraction of samples whose label is among the ``top_k`` highest scores.

    ``add_batch(predictions, references)``: references are integer labels of shape ``(n,)``;
    predictions are either integer labels of shape ``(n,)`` (``top_k`` must then be 1) or
    floating-point scores (logits or probabilities) of shape ``(n, num_classes)``. With
    ``top_k=1`` the prediction is the first highest score (``argmax``); with ties at the k-th
    place, which of the tied classes count is ``torch.topk``'s choice.

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

    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
        labels = self._labels(references)
        if self.top_k == 1:
            correct = self._predicted_labels(predictions) == labels.to(predictions.device)
            return (correct,)
        scores = self._scores(predictions)
        if scores.shape[1] < self.top_k:
            raise self.error(f"top_k={self.top_k} but the scores have {scores.shape[1]} classes")
        best = scores.topk(self.top_k, dim=1).indices
        return ((best == labels.to(best.device).unsqueeze(1)).any(dim=1),)

    def reduce(self, *columns: Tensor) -> float:
        (correct,) = columns
        return int(correct.sum()) / correct.numel()


_AVERAGED_DOC = """
    ``add_batch(predictions, references)``: references are integer labels of shape ``(n,)``;
    predictions are integer labels of shape ``(n,)`` or floating-point scores of shape
    ``(n, num_classes)``, of which the first highest is the prediction.

    ``average="macro"`` (the default) is the unweighted mean over classes of the per-class
    score; ``"micro"`` pools the counts of every class first. The classes are ``0 ..
    num_classes - 1`` when ``num_classes`` is given (a label outside raises), else every label
    present in the predictions or the references of any process, as scikit-learn's
    ``labels=None`` over the pooled samples. A class whose score divides by zero scores
    ``zero_division`` (scikit-learn's ``zero_division=0.0``).
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

    def per_sample(self, predictions: Tensor, references: Tensor) -> tuple[Tensor, ...]:
        labels = self._labels(references)
        predicted = self._predicted_labels(predictions)
        return predicted, labels.to(predicted.device)

    def reduce(self, *columns: Tensor) -> float:
        predicted, labels = columns
        if self.num_classes is not None:
            low, high = torch.stack(
                [
                    torch.minimum(predicted.min(), labels.min()),
                    torch.maximum(predicted.max(), labels.max()),
                ]
            ).tolist()
            if low < 0 or high >= self.num_classes:
                raise self.error(
                    f"label {low if low < 0 else high} is outside the classes 0 .. "
                    f"{self.num_classes - 1} (num_classes={self.num_classes})"
                )
            count = self.num_classes
        else:
            # The labels present anywhere in predictions or references, as scikit-learn's
            # labels=None, mapped to 0 .. count - 1.
            present = torch.unique(torch.cat([predicted, labels]))
            predicted = torch.searchsorted(present, predicted)
            labels = torch.searchsorted(present, labels)
            count = present.numel()
        true_positives = torch.bincount(labels[predicted == labels], minlength=count)
        predicted_counts = torch.bincount(predicted, minlength=count)
        true_counts = torch.bincount(labels, minlength=count)
        numerator, denominator = self._ratio(
            true_positives.double(), predicted_counts.double(), true_counts.double()
        )
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
