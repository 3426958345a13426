"""What the collators read from a tokenizer, and nothing more.

A tokenizer is any object with these attributes: a transformers tokenizer has them all, and a
small object holding the few that a collator reads will do (the package never imports
transformers).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import torch

from ._errors import CollatorError

# transformers marks "no limit" with a huge model_max_length (int(1e30)); past this, none is set.
_NO_LIMIT = 10**20
# The attributes a tokenizer may name special tokens by, when it has no ``all_special_ids``.
_SPECIAL_ID_ATTRIBUTES = (
    "pad_token_id",
    "mask_token_id",
    "cls_token_id",
    "sep_token_id",
    "bos_token_id",
    "eos_token_id",
    "unk_token_id",
)

PaddingSide = Literal["left", "right"]


class PaddingTokenizer(Protocol):
    """What the padding collators read: the pad token and the side to pad on.

    Optional, read when present: ``pad_token_type_id`` (default 0), ``model_input_names``
    (whether to add an ``attention_mask``; default yes) and ``model_max_length`` (the length
    ``padding="max_length"`` pads to when ``max_length`` is not given).
    """

    pad_token_id: int | None
    padding_side: str


class MaskingTokenizer(PaddingTokenizer, Protocol):
    """What the masking collators read besides: the mask token.

    Also read: ``all_special_ids`` (else every ``*_token_id`` attribute set), the vocabulary
    size (``len(tokenizer)``, else ``vocab_size``) for random replacements, and for whole-word
    masking without ``offset_mapping`` in the samples, ``convert_ids_to_tokens``.
    """

    mask_token_id: int | None


def pad_token_id(tokenizer: PaddingTokenizer, owner: str) -> int:
    """The pad token's id, or an error that says how to give the tokenizer one."""
    value = getattr(tokenizer, "pad_token_id", None)
    if not isinstance(value, int) or value < 0:
        raise CollatorError(
            f"{owner}: the tokenizer has no pad token (pad_token_id is {value!r}), so the "
            "samples cannot be padded. Set one, e.g. tokenizer.pad_token = tokenizer.eos_token, "
            "or add one with tokenizer.add_special_tokens({'pad_token': '[PAD]'})"
        )
    return value


def padding_side(tokenizer: PaddingTokenizer, owner: str) -> PaddingSide:
    side = getattr(tokenizer, "padding_side", "right")
    if side not in ("left", "right"):
        raise CollatorError(
            f"{owner}: tokenizer.padding_side must be 'left' or 'right', got {side!r}"
        )
    return "left" if side == "left" else "right"


def pad_token_type_id(tokenizer: PaddingTokenizer) -> int:
    return int(getattr(tokenizer, "pad_token_type_id", 0))


def adds_attention_mask(tokenizer: PaddingTokenizer) -> bool:
    """Whether padding adds an ``attention_mask`` to samples that lack one (as transformers)."""
    names = getattr(tokenizer, "model_input_names", None)
    return names is None or "attention_mask" in names


def model_max_length(tokenizer: PaddingTokenizer) -> int | None:
    value = getattr(tokenizer, "model_max_length", None)
    return value if isinstance(value, int) and 0 < value <= _NO_LIMIT else None


def mask_token_id(tokenizer: MaskingTokenizer, owner: str, fix: str) -> int:
    value = getattr(tokenizer, "mask_token_id", None)
    if not isinstance(value, int) or value < 0:
        raise CollatorError(
            f"{owner}: the tokenizer has no mask token (mask_token_id is {value!r}). Add one "
            f"with tokenizer.add_special_tokens({{'mask_token': '[MASK]'}}){fix}"
        )
    return value


def special_token_ids(tokenizer: Any) -> list[int]:
    """The ids never masked: ``all_special_ids``, else every ``*_token_id`` the tokenizer sets."""
    listed = getattr(tokenizer, "all_special_ids", None)
    if listed is not None:
        return [int(token) for token in listed]
    found = (getattr(tokenizer, name, None) for name in _SPECIAL_ID_ATTRIBUTES)
    return sorted({token for token in found if isinstance(token, int) and token >= 0})


def special_ids_tensor(tokenizer: Any) -> torch.Tensor:
    """``special_token_ids`` as a tensor, made once per distinct set of ids."""
    return _as_tensor(tuple(special_token_ids(tokenizer)))


@functools.lru_cache(maxsize=64)
def _as_tensor(ids: tuple[int, ...]) -> torch.Tensor:
    return torch.tensor(ids, dtype=torch.int64)


def vocabulary_size(tokenizer: Any, owner: str) -> int:
    """How many ids a random replacement draws from (transformers: ``len(tokenizer)``)."""
    try:
        return len(tokenizer)
    except TypeError:
        size = getattr(tokenizer, "vocab_size", None)
        if isinstance(size, int) and size > 0:
            return size
    raise CollatorError(
        f"{owner}: random replacements need the vocabulary size; the "
        "tokenizer has neither len() nor vocab_size"
    )


def continuation_flags(tokenizer: Any, size: int, owner: str) -> Sequence[bool]:
    """For each id, whether its token continues the word before (WordPiece's '##' prefix)."""
    convert = getattr(tokenizer, "convert_ids_to_tokens", None)
    if convert is None:
        raise CollatorError(
            f"{owner}: whole-word masking needs word boundaries: tokenize with "
            "return_offsets_mapping=True so that each sample holds 'offset_mapping', or give "
            "a tokenizer with convert_ids_to_tokens (WordPiece, whose '##' marks a word's rest)"
        )
    return [str(token).startswith("##") for token in convert(list(range(size)))]
