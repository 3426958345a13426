"""Perplexity of a language model, from its logits and the target tokens."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from ._base import MetricOptions
from ._dtypes import is_integer
from ._summed import Statistic, SummedMetric

if TYPE_CHECKING:
    from typing_extensions import Unpack


class Perplexity(SummedMetric):
    """``exp`` of the mean negative log-likelihood per token, over every token of every sample.

    ``add_batch(logits, targets)``: ``targets`` are token ids of shape ``(n, ...)`` (usually
    ``(n, sequence_length)``) and ``logits`` are unnormalised scores of shape
    ``targets.shape + (vocabulary,)``. One sample is one row of the batch (one sequence), which
    is what ``num_samples`` and ``mask`` count. Targets equal to ``ignore_index`` (default -100,
    as in Hugging Face labels) are not scored. The logits are used as given: for a causal
    language model, shift them first (``logits[:, :-1]`` against ``labels[:, 1:]``).

    The negative log-likelihoods are computed by ``cross_entropy`` in the logits' dtype (float16
    and bfloat16 are first widened to float32) and summed in float64. Keeps two numbers: that
    sum and the exact count of scored tokens. On the CPU a target outside the vocabulary raises
    a :class:`MetricError`; on CUDA it trips ``cross_entropy``'s device-side assert, as checking
    first would wait for the device at every batch.

    ``compute()`` returns ``{name: perplexity}``; the name defaults to ``"perplexity"``.
    """

    default_name = "perplexity"
    default_greater_is_better = False

    def __init__(
        self,
        ignore_index: int = -100,
        **options: Unpack[MetricOptions],
    ) -> None:
        super().__init__(**options)
        self.ignore_index = ignore_index

    def statistics(self, predictions: Tensor, references: Tensor) -> Sequence[Statistic]:
        if not predictions.dtype.is_floating_point or not is_integer(references.dtype):
            raise self.error(
                "predictions must be floating-point logits and references integer token ids, "
                f"got {predictions.dtype} and {references.dtype}"
            )
        if predictions.ndim != references.ndim + 1 or predictions.shape[:-1] != references.shape:
            raise self.error(
                f"logits of shape {tuple(predictions.shape)} do not fit targets of shape "
                f"{tuple(references.shape)}: the logits must be the targets' shape plus one "
                "dimension for the vocabulary"
            )
        vocabulary = predictions.shape[-1]
        logits = predictions.reshape(-1, vocabulary)
        if logits.dtype in (torch.float16, torch.bfloat16):
            logits = logits.float()
        if references.get_device() != logits.get_device():
            references = references.to(logits.device)
        targets = references.reshape(-1)
        if targets.dtype != torch.int64:
            targets = targets.long()
        try:
            nll = F.cross_entropy(logits, targets, reduction="none", ignore_index=self.ignore_index)
        except (IndexError, RuntimeError) as error:  # a target outside the vocabulary, on CPU
            raise self.error(
                f"a target is outside the vocabulary of {vocabulary} "
                f"(ignore_index={self.ignore_index}): {error}"
            ) from None
        # Ignored targets have a loss of 0, so only the count needs them left out.
        return nll.sum(dtype=torch.float64), (targets != self.ignore_index).sum()

    def result(self, *totals: Tensor) -> float:
        nll, tokens = totals
        count = int(tokens)
        if count == 0:
            raise self.error(f"there is no token to score: every target is {self.ignore_index}")
        return math.exp(float(nll) / count)
