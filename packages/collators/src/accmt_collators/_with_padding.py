"""DataCollatorWithPadding: pad tokenized samples to one length."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._base import PaddingCollator
from ._padding import PaddingOption
from ._plain import KeyPath
from ._tokenizer import PaddingTokenizer


class DataCollatorWithPadding(PaddingCollator):
    """Pads ``input_ids`` (and ``attention_mask``, ``token_type_ids``, ``special_tokens_mask``)
    to one length, as transformers' collator of the same name, on torch alone.

    Args:
        tokenizer: anything with ``pad_token_id`` and ``padding_side`` (a transformers
            tokenizer will do; see :class:`PaddingTokenizer`).
        padding: ``True``/``"longest"`` pads to the longest sample of the batch,
            ``"max_length"`` to ``max_length`` (else the tokenizer's ``model_max_length``),
            ``False``/``"do_not_pad"`` not at all (the samples must then be one length);
            transformers' ``PaddingStrategy``, or any Enum with one of these values, too.
        max_length: the length ``padding="max_length"`` pads to; a longer sample is an error.
        pad_to_multiple_of: round the padded length up to a multiple of this.
        return_tensors: ``"pt"`` (torch tensors) or ``"np"`` (numpy arrays; needs numpy).

    A ``label`` or ``label_ids`` key is renamed ``labels``. Samples may nest tokenized
    mappings in dicts, tuples and lists, to any depth: each is padded on its own.
    """

    def __init__(
        self,
        tokenizer: PaddingTokenizer,
        padding: PaddingOption = True,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        return_tensors: str = "pt",
    ) -> None:
        super().__init__(tokenizer, padding, max_length, pad_to_multiple_of, return_tensors)

    def _collate_tokenized(
        self, features: Sequence[Mapping[str, Any]], path: KeyPath
    ) -> dict[str, Any]:
        fields = self.padder.pad(features, path).fields
        for name in ("label", "label_ids"):
            if name in fields:
                fields["labels"] = fields.pop(name)
        return fields
