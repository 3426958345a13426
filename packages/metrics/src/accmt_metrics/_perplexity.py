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
    as in Hugging Face labels) are not scored.

    ``causal`` says how the logits line up with the targets along dimension 1, the sequence:

    - ``causal=True``: a causal language model's logits and labels as the model takes them
      (Hugging Face's ``labels`` are the ``input_ids``, padding -100): the logits at position
      ``t`` predict the token at ``t + 1``, so the metric scores ``logits[:, :-1]`` against
      ``targets[:, 1:]``. Both come unshifted, of the same length.
    - ``causal=False``: the logits at each position score the target at that position (a causal
      model's shifted by hand, a masked language model's).
    - ``None`` (the default) is refused for targets with a sequence dimension: a shifted pair
      and an unshifted one have the same shapes, so a forgotten shift cannot be told from the
      tensors and would give a silently wrong figure. Targets of shape ``(n,)`` need no choice.

    The negative log-likelihoods are computed by ``cross_entropy`` in the logits' dtype (float16
    and bfloat16 are first widened to float32) and summed in float64. Keeps two numbers: that
    sum and the exact count of scored tokens, so ``log`` of the result is the token-weighted
    mean loss (``cross_entropy(..., reduction="sum")`` over the set divided by its tokens). On
    the CPU a target outside the vocabulary raises a :class:`MetricError`; on CUDA it trips
    ``cross_entropy``'s device-side assert, as checking first would wait for the device at
    every batch.

    ``compute()`` returns ``{name: perplexity}``; the name defaults to ``"perplexity"``.
    """

    default_name = "perplexity"
    default_greater_is_better = False

    def __init__(
        self,
        ignore_index: int = -100,
        *,
        causal: bool | None = None,
        **options: Unpack[MetricOptions],
    ) -> None:
        super().__init__(**options)
        if causal is not None and not isinstance(causal, bool):
            raise self.error(f"causal must be True, False or None, got {causal!r}")
        self.ignore_index = ignore_index
        self.causal = causal

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
                + (" (causal=True takes both unshifted: the metric shifts)" if self.causal else "")
            )
        predictions, references = self._aligned(predictions, references)
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

    def _aligned(self, logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """The logits and the targets they score, position by position."""
        if targets.ndim < 2:
            if self.causal:
                raise self.error(
                    f"causal=True shifts along the sequence (dimension 1), but targets of shape "
                    f"{tuple(targets.shape)} have none: give (n, sequence_length) labels"
                )
            return logits, targets
        if self.causal is None:
            raise self.error(
                f"targets of shape {tuple(targets.shape)} are sequences, and a causal model's "
                "logits shifted by hand have the same shapes as unshifted ones: say "
                "Perplexity(causal=True) for logits and labels as a causal language model "
                "takes them (the metric scores logits[:, :-1] against labels[:, 1:]), or "
                "Perplexity(causal=False) for logits already aligned with their targets"
            )
        if self.causal:
            return logits[:, :-1], targets[:, 1:]
        return logits, targets

    def result(self, *totals: Tensor) -> float:
        nll, tokens = totals
        count = int(tokens)
        if count == 0:
            raise self.error(f"there is no token to score: every target is {self.ignore_index}")
        return math.exp(float(nll) / count)
