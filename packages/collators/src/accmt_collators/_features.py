"""Padding a batch of tokenized samples: what transformers' ``tokenizer.pad`` does, on tensors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ._errors import CollatorError
from ._padding import PaddingPlan
from ._plain import KeyPath, collate_beside_tokens, place
from ._ragged import Ragged
from ._tokenizer import (
    PaddingSide,
    PaddingTokenizer,
    adds_attention_mask,
    pad_token_id,
    pad_token_type_id,
    padding_side,
)


class PaddedGroup:
    """One tokenized place of the samples (say ``sample['source']``), padded.

    ``fields`` holds the output tensors in the first sample's key order; ``ids`` the token
    ids as rows, ``real`` (samples, length) marks where each sample's own tokens sit.
    """

    def __init__(
        self, fields: dict[str, Any], ids: Ragged, real: torch.Tensor, side: PaddingSide
    ) -> None:
        self.fields = fields
        self.ids = ids
        self.real = real
        self.side = side

    @property
    def length(self) -> int:
        return int(self.real.shape[1])


class GroupPadder:
    """Pads tokenized samples for one collator (its tokenizer, padding plan and name).

    ``float64``: Python floats next to the tokens become float64 (numpy's choice), not
    float32 (torch's).
    """

    def __init__(
        self, owner: str, tokenizer: PaddingTokenizer, plan: PaddingPlan, *, float64: bool = False
    ) -> None:
        self.owner = owner
        self.tokenizer = tokenizer
        self.plan = plan
        self.float64 = float64

    def pad(
        self, features: Sequence[Mapping[str, Any]], path: KeyPath, *, leave: tuple[str, ...] = ()
    ) -> PaddedGroup:
        """Pad ``input_ids``, ``attention_mask``, ``token_type_ids`` and ``special_tokens_mask``
        (adding an attention mask as transformers does); the keys in ``leave`` are left out for
        the caller; any other key is collated as it is."""
        keys = [key for key in features[0] if key not in leave]
        self._check_keys(features, keys, path)
        ids = Ragged.from_rows([f["input_ids"] for f in features], self.owner, (*path, "input_ids"))
        length = self._target_length(ids, path)
        side = padding_side(self.tokenizer, self.owner)
        real = ids.real_positions(length, side)
        fields: dict[str, Any] = {}
        for key in keys:
            if key == "input_ids":
                needs_pad = min(ids.lengths, default=length) < length
                pad = pad_token_id(self.tokenizer, self.owner) if needs_pad else 0
                fields[key] = ids.padded(length, side, pad, real)
            elif key in _PAD_VALUES:
                fields[key] = self._pad_alongside(features, key, ids, real, side, path)
            else:
                fields[key] = collate_beside_tokens(
                    [f[key] for f in features], self.owner, (*path, key), float64=self.float64
                )
        if "attention_mask" not in fields and adds_attention_mask(self.tokenizer):
            fields["attention_mask"] = real.to(torch.int64)
        return PaddedGroup(fields, ids, real, side)

    def column(self, features: Sequence[Mapping[str, Any]], key: str, path: KeyPath) -> list[Any]:
        """Every sample's value of ``key``, or an error naming the first sample without it."""
        self._check_keys(features, [key], path)
        return [feature[key] for feature in features]

    def _check_keys(
        self, features: Sequence[Mapping[str, Any]], keys: list[str], path: KeyPath
    ) -> None:
        wanted = set(keys)
        for index, feature in enumerate(features):
            if feature.keys() >= wanted:
                continue
            missing = [key for key in keys if key not in feature]
            if missing:
                raise CollatorError(
                    f"{self.owner}: samples[{index}]{place(path)} lacks {missing}, which "
                    f"samples[0]{place(path)} has; every sample must hold the same keys"
                )

    def _target_length(self, ids: Ragged, path: KeyPath) -> int:
        plan = self.plan
        if not plan.pads and len(set(ids.lengths)) > 1:
            raise CollatorError(
                f"{self.owner}: padding=False, but samples[*]{place((*path, 'input_ids'))} "
                f"have different lengths ({sorted(set(ids.lengths))}): pad them (padding=True) "
                "or make them one length when tokenizing"
            )
        length = plan.target_length(ids.longest)
        if ids.longest > length:
            index = next(i for i, n in enumerate(ids.lengths) if n > length)
            raise CollatorError(
                f"{self.owner}: samples[{index}]{place((*path, 'input_ids'))} has "
                f"{ids.lengths[index]} tokens, more than max_length={plan.max_length}; truncate "
                f"when tokenizing (truncation=True, max_length={plan.max_length})"
            )
        return length

    def _pad_alongside(
        self,
        features: Sequence[Mapping[str, Any]],
        key: str,
        ids: Ragged,
        real: torch.Tensor,
        side: PaddingSide,
        path: KeyPath,
    ) -> torch.Tensor:
        rows = Ragged.from_rows([f[key] for f in features], self.owner, (*path, key))
        if not rows.same_lengths_as(ids):
            index = next(i for i, n in enumerate(rows.lengths) if n != ids.lengths[i])
            raise CollatorError(
                f"{self.owner}: samples[{index}]{place((*path, key))} has "
                f"{rows.lengths[index]} entries but its input_ids has {ids.lengths[index]}"
            )
        if key == "attention_mask" and rows.all_equal(1):
            # The usual mask, all ones, is the real positions: no items to convert.
            return real.to(torch.int64)
        value = pad_token_type_id(self.tokenizer) if key == "token_type_ids" else _PAD_VALUES[key]
        return rows.padded(real.shape[1], side, value, real)


# The per-token fields that padding extends, and with what (transformers' tokenizer._pad).
_PAD_VALUES = {"attention_mask": 0, "token_type_ids": 0, "special_tokens_mask": 1}
