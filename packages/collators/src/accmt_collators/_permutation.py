"""DataCollatorForPermutationLanguageModeling: XLNet's spans, masks and factorisation orders."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ._base import is_token_sequence
from ._errors import CollatorError
from ._keyed_random import Stream, draw, high_word, low_word, row_keys, unit
from ._padding import PaddingPlan, optional_positive
from ._plain import KeyPath, place
from ._ragged import Ragged
from ._seeding import SeededCollator
from ._tokenizer import MaskingTokenizer, PaddingSide, mask_token_id, special_ids_tensor


class DataCollatorForPermutationLanguageModeling(SeededCollator):
    """Collates token sequences for permutation language modeling (XLNet).

    As transformers' collator of the same name, on torch alone. In each sample, spans of 1 to
    ``max_span_length`` tokens are masked, one span in each stretch of ``span /
    plm_probability`` tokens; special tokens and padding never are. The batch holds
    ``input_ids``, ``perm_mask`` (which token may attend to which, from a random
    factorisation order per sample), ``target_mapping`` and ``labels`` (-100 where not
    masked). The padded length must be even (XLNet's two halves): pass
    ``pad_to_multiple_of=2`` to make it so.

    The masked spans are a function of (``seed``, epoch, the sample's tokens), as in
    :class:`DataCollatorForLanguageModeling` (see there for :meth:`set_epoch`); the
    factorisation order also of the batch's padded length, which XLNet's scheme is built on.

    Args:
        tokenizer: see :class:`MaskingTokenizer` (a transformers tokenizer will do).
        plm_probability: the ratio of a span's length to the stretch it is drawn in.
        max_span_length: the longest span of masked tokens.
        return_tensors: ``"pt"`` (torch tensors) or ``"np"`` (numpy arrays; needs numpy).
        pad_to_multiple_of: round the padded length up to a multiple of this.
        seed: the seed of the spans and orders; None as in DataCollatorForLanguageModeling.
    """

    def __init__(
        self,
        tokenizer: MaskingTokenizer,
        plm_probability: float = 1 / 6,
        max_span_length: int = 5,
        return_tensors: str = "pt",
        *,
        pad_to_multiple_of: int | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(tokenizer, return_tensors, seed)
        self.plm_probability = self._check_probability(
            "plm_probability", plm_probability, allow_zero=False
        )
        self.max_span_length = optional_positive(self._owner, "max_span_length", max_span_length)
        self.pad_to_multiple_of = pad_to_multiple_of
        self.mask_token_id = mask_token_id(tokenizer, self._owner, "")
        plan = PaddingPlan(self._owner, tokenizer, True, None, pad_to_multiple_of)
        self.padder = self._padder(plan)

    def _collate(self, samples: Sequence[Any]) -> Any:
        """Collate ``samples`` (tokenized mappings, nested or not, or token sequences)."""
        if len(samples) > 0 and is_token_sequence(samples[0]):
            return self._collate_tokenized([{"input_ids": sample} for sample in samples], ())
        return super()._collate(samples)

    def _collate_tokenized(
        self, features: Sequence[Mapping[str, Any]], path: KeyPath
    ) -> dict[str, Any]:
        # Like transformers, only the token ids are read; the other keys are dropped.
        group = self.padder.pad([{"input_ids": f["input_ids"]} for f in features], path)
        inputs, length = group.fields["input_ids"], group.length
        if length % 2:
            raise CollatorError(
                f"{self._owner}: samples[*]{place((*path, 'input_ids'))} pad to {length} "
                "tokens, but permutation language modeling needs an even length (XLNet's two "
                "halves); pass pad_to_multiple_of=2"
            )
        places = group.ids.places(length, group.side)
        keys = row_keys(inputs, places, group.real, self.seeding.salt(path))
        functional = torch.isin(inputs, special_ids_tensor(self.tokenizer))
        pad = getattr(self.tokenizer, "pad_token_id", None)
        if pad is not None:
            functional |= inputs == pad
        masked = self._spans(group.ids, keys, length, group.side)
        masked &= group.real
        masked &= ~functional
        labels = torch.where(masked, inputs, -100)
        inputs[masked] = self.mask_token_id
        order = self._factorisation_order(keys, length)
        order.masked_fill_(~masked & ~functional, -1)
        # perm_mask[j, k] = order[j] <= order[k] and k masked; unmasked k get -2, below every
        # order (>= -1). Compared straight into float32: one pass over (rows, length, length).
        # (In float32: torch compares int64 into a float32 output several times slower.)
        order_f = order.to(torch.float32)
        seen = torch.where(masked, order_f, -2.0)
        perm_mask = torch.empty((len(keys), length, length))
        torch.le(order_f[:, :, None], seen[:, None, :], out=perm_mask)
        # Written out per row, as transformers does, although every row is the identity: a
        # broadcast view of one identity (stride 0) would halve the batch's bytes, but it is
        # not a dense tensor, and torch.distributed's gloo broadcast, for one, sends the memory
        # behind it (one identity and what follows), not its values.
        target_mapping = torch.zeros((len(keys), length, length))
        target_mapping.diagonal(dim1=1, dim2=2).fill_(1)
        return {
            "input_ids": inputs,
            "perm_mask": perm_mask,
            "target_mapping": target_mapping,
            "labels": labels,
        }

    def _spans(
        self, ids: Ragged, keys: torch.Tensor, length: int, side: PaddingSide
    ) -> torch.Tensor:
        """(samples, length): the columns the spans cover, sweeping each sample from its first
        token (the caller clears the padding)."""
        # The shortest stretch holds a 1-token span, so no sample has more stretches than this.
        most = ids.longest // int(1 / self.plm_probability) + 1
        bits = draw(keys[:, None], torch.arange(most)[None, :], Stream.SPAN)
        assert self.max_span_length is not None
        span = 1 + (unit(low_word(bits)) * self.max_span_length).to(torch.int64)
        stretch = (span.to(torch.float64) / self.plm_probability).to(torch.int64)
        begin = stretch.cumsum(1) - stretch
        start = begin + (unit(high_word(bits)) * (stretch - span + 1)).to(torch.int64)
        lengths = ids.length_tensor[:, None]
        used = (begin < lengths).to(torch.int64)
        if side == "left":
            start += length - lengths  # from places in the sample to columns of the batch
        # +1 where a span starts, -1 where it ends: a running sum > 0 is inside one.
        edges = torch.zeros((len(keys), length + 1), dtype=torch.int64)
        edges.scatter_add_(1, start.clamp(max=length), used)
        edges.scatter_add_(1, (start + span).clamp(max=length), -used)
        return edges.cumsum(1)[:, :length] > 0

    def _factorisation_order(self, keys: torch.Tensor, length: int) -> torch.Tensor:
        """(samples, length): XLNet's order, one random permutation shared by both halves."""
        half = length // 2
        bits = draw(keys[:, None], torch.arange(half)[None, :], Stream.ORDER)
        permutation = torch.argsort(bits, dim=1, stable=True)
        return torch.cat([permutation, permutation + half], dim=1)

    def _options(self) -> dict[str, Any]:
        return {
            **super()._options(),
            "plm_probability": self.plm_probability,
            "max_span_length": self.max_span_length,
            "seed": self.seed,
        }
