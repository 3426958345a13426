"""DataCollatorForLanguageModeling and DataCollatorForWholeWordMask."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ._base import is_token_sequence
from ._errors import CollatorError
from ._features import PaddedGroup
from ._keyed_random import row_keys
from ._masking import TokenMasking, continues_by_offsets, word_starts
from ._padding import PaddingPlan
from ._plain import KeyPath, place
from ._ragged import Ragged
from ._seeding import SeededCollator
from ._tokenizer import (
    MaskingTokenizer,
    continuation_flags,
    mask_token_id,
    special_ids_tensor,
    vocabulary_size,
)

# Per-token fields that only steer masking; like transformers, the batch does not carry them.
_MASKING_ONLY = ("special_tokens_mask", "offset_mapping")


class DataCollatorForLanguageModeling(SeededCollator):
    """Pads token sequences and makes language-modeling labels: masked (BERT) or causal.

    As transformers' collator of the same name, on torch alone. With ``mlm=True`` each
    token is chosen with ``mlm_probability`` (special tokens and padding never are); a chosen
    token becomes the mask token with ``mask_replace_prob`` (0.8), a random token with
    ``random_replace_prob`` (0.1), and stays otherwise; ``labels`` hold the original token
    where chosen and -100 elsewhere. With ``mlm=False`` the labels are the inputs, -100
    wherever the token is the pad token, as in transformers (a model shifts them itself).
    ``whole_word_mask=True`` chooses whole words (see :class:`DataCollatorForWholeWordMask`).

    Samples are tokenized mappings (nested in dicts, tuples and lists, to any depth), or
    bare token sequences (lists of ints, 1-D tensors or arrays). A ``special_tokens_mask`` in
    the samples says which tokens are special; else the tokenizer's special ids do.

    The masks are a function of (``seed``, epoch, the sample's tokens), not of the order the
    samples come in: call :meth:`set_epoch` at the start of each epoch (accmt's Trainer does)
    and a resumed run, a run with more DataLoader workers, or a run on N processes masks
    every sample exactly as the uninterrupted one-process run did. Equal token sequences are
    masked alike within an epoch. Until ``set_epoch`` is first called, the epoch is 0 when a
    ``seed`` was given (two collators with one seed mask alike from the first batch); without
    one, each batch draws from torch's global generator, as transformers' collators do.

    Args:
        tokenizer: see :class:`MaskingTokenizer` (a transformers tokenizer will do).
        mlm: masked (True) or causal (False) language modeling.
        mlm_probability: the chance of choosing each token (or word).
        pad_to_multiple_of: round the padded length up to a multiple of this.
        return_tensors: ``"pt"`` (torch tensors) or ``"np"`` (numpy arrays; needs numpy).
        mask_replace_prob: the chance that a chosen token becomes the mask token.
        random_replace_prob: the chance that a chosen token becomes a random token.
        whole_word_mask: choose whole words, not single tokens.
        seed: the seed of the masks, from the first batch; None takes
            ``torch.initial_seed()`` at the first ``set_epoch`` (the seed the Trainer's
            ``seed=`` set).
    """

    def __init__(
        self,
        tokenizer: MaskingTokenizer,
        mlm: bool = True,
        mlm_probability: float = 0.15,
        pad_to_multiple_of: int | None = None,
        return_tensors: str = "pt",
        *,
        mask_replace_prob: float = 0.8,
        random_replace_prob: float = 0.1,
        whole_word_mask: bool = False,
        seed: int | None = None,
    ) -> None:
        super().__init__(tokenizer, return_tensors, seed)
        self.mlm = mlm
        self.mlm_probability = self._check_probability("mlm_probability", mlm_probability)
        self.mask_replace_prob = self._check_probability("mask_replace_prob", mask_replace_prob)
        self.random_replace_prob = self._check_probability(
            "random_replace_prob", random_replace_prob
        )
        if mask_replace_prob + random_replace_prob > 1:
            total = mask_replace_prob + random_replace_prob
            raise CollatorError(
                f"{self._owner}: mask_replace_prob + random_replace_prob must not exceed 1, "
                f"got {total}"
            )
        if whole_word_mask and not mlm:
            raise CollatorError(f"{self._owner}: whole_word_mask=True needs mlm=True")
        self.whole_word_mask = whole_word_mask
        self.pad_to_multiple_of = pad_to_multiple_of
        self.padder = self._padder(
            PaddingPlan(self._owner, tokenizer, True, None, pad_to_multiple_of)
        )
        self._masking = self._make_masking() if mlm else None
        self._continuation: torch.Tensor | None = None

    def _make_masking(self) -> TokenMasking:
        fix = ", or pass mlm=False for causal language modeling"
        return TokenMasking(
            self.mlm_probability,
            self.mask_replace_prob,
            self.random_replace_prob,
            mask_token_id(self.tokenizer, self._owner, fix),
            vocabulary_size(self.tokenizer, self._owner) if self.random_replace_prob else 0,
        )

    def _collate(self, samples: Sequence[Any]) -> Any:
        """Collate ``samples`` (tokenized mappings, nested or not, or token sequences)."""
        if len(samples) > 0 and is_token_sequence(samples[0]):
            batch = self._collate_tokenized([{"input_ids": sample} for sample in samples], ())
            return {"input_ids": batch["input_ids"], "labels": batch["labels"]}
        return super()._collate(samples)

    def _collate_tokenized(
        self, features: Sequence[Mapping[str, Any]], path: KeyPath
    ) -> dict[str, Any]:
        group = self.padder.pad(features, path, leave=_MASKING_ONLY)
        fields = group.fields
        ids = fields["input_ids"]
        if self._masking is None:
            fields["labels"] = self._causal_labels(ids)
            return fields
        places = group.ids.places(group.length, group.side)
        eligible = group.real & self._not_special(features, group, path)
        keys = row_keys(ids, places, group.real, self.seeding.salt(path))
        starts = None
        if self.whole_word_mask:
            starts = word_starts(places, eligible, self._continues_word(features, group, path))
        fields["input_ids"], fields["labels"] = self._masking.apply(
            ids, keys, places, eligible, starts
        )
        return fields

    def _causal_labels(self, input_ids: torch.Tensor) -> torch.Tensor:
        labels = input_ids.clone()
        pad = getattr(self.tokenizer, "pad_token_id", None)
        if pad is not None:
            labels[labels == pad] = -100
        return labels

    def _not_special(
        self, features: Sequence[Mapping[str, Any]], group: PaddedGroup, path: KeyPath
    ) -> torch.Tensor:
        """(rows, length): which tokens are not special (special ones are never masked)."""
        if "special_tokens_mask" in features[0]:
            rows = self._alongside(features, "special_tokens_mask", group, path)
            return rows.padded(group.length, group.side, 1, group.real) == 0
        ids = group.fields["input_ids"]
        return torch.isin(ids, special_ids_tensor(self.tokenizer), invert=True)

    def _continues_word(
        self, features: Sequence[Mapping[str, Any]], group: PaddedGroup, path: KeyPath
    ) -> torch.Tensor:
        """(rows, length): which tokens continue the word of the token before them."""
        if "offset_mapping" in features[0]:
            offsets = self._alongside(features, "offset_mapping", group, path)
            return continues_by_offsets(offsets.padded(group.length, group.side, 0, group.real))
        table = self._continuation_table()
        ids = group.fields["input_ids"]
        if ids.numel() and int(ids.max()) >= len(table):
            raise CollatorError(
                f"{self._owner}: samples[*]{place((*path, 'input_ids'))} hold id "
                f"{int(ids.max())}, outside the tokenizer's vocabulary of {len(table)}"
            )
        return table[ids]

    def _continuation_table(self) -> torch.Tensor:
        """For each id, whether it continues a word (WordPiece's '##'), read once."""
        if self._continuation is None:
            size = vocabulary_size(self.tokenizer, self._owner)
            flags = continuation_flags(self.tokenizer, size, self._owner)
            self._continuation = torch.tensor(flags, dtype=torch.bool)
        return self._continuation

    def _alongside(
        self, features: Sequence[Mapping[str, Any]], key: str, group: PaddedGroup, path: KeyPath
    ) -> Ragged:
        rows = Ragged.from_rows(self.padder.column(features, key, path), self._owner, (*path, key))
        if not rows.same_lengths_as(group.ids):
            raise CollatorError(
                f"{self._owner}: samples[*]{place((*path, key))} must have one "
                "entry per token of input_ids"
            )
        return rows

    def _options(self) -> dict[str, Any]:
        return {
            **super()._options(),
            "mlm": self.mlm,
            "mlm_probability": self.mlm_probability,
            "whole_word_mask": self.whole_word_mask,
            "seed": self.seed,
        }


class DataCollatorForWholeWordMask(DataCollatorForLanguageModeling):
    """Masked language modeling that chooses whole words: all tokens of a word or none.

    ``DataCollatorForLanguageModeling(whole_word_mask=True)`` under its own name (the name
    transformers 4 gave it; transformers 5 has only the argument). Each word is
    chosen with ``mlm_probability``; each token of a chosen word then follows the
    80/10/10 rule (``mask_replace_prob``, ``random_replace_prob``; transformers 5 masks every
    chosen token: pass ``mask_replace_prob=1.0`` for that).

    Words come from ``offset_mapping`` in the samples when they have it (tokenize with
    ``return_offsets_mapping=True``): a token continues a word when it starts where the one
    before it ended. Without it, from the tokenizer's vocabulary: a token whose text starts
    with '##' (WordPiece, as BERT's) continues a word. The other arguments are those of
    :class:`DataCollatorForLanguageModeling`.
    """

    def __init__(
        self,
        tokenizer: MaskingTokenizer,
        mlm: bool = True,
        mlm_probability: float = 0.15,
        pad_to_multiple_of: int | None = None,
        return_tensors: str = "pt",
        *,
        mask_replace_prob: float = 0.8,
        random_replace_prob: float = 0.1,
        seed: int | None = None,
    ) -> None:
        if not mlm:
            raise CollatorError(
                "DataCollatorForWholeWordMask: mlm must be True (whole-word "
                "masking is masked language modeling)"
            )
        super().__init__(
            tokenizer,
            mlm,
            mlm_probability,
            pad_to_multiple_of,
            return_tensors,
            mask_replace_prob=mask_replace_prob,
            random_replace_prob=random_replace_prob,
            whole_word_mask=True,
            seed=seed,
        )
