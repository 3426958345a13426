"""DataCollatorForSeq2Seq: pad the inputs and, on their own, the target labels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ._base import PaddingCollator
from ._errors import CollatorError
from ._padding import PaddingOption
from ._plain import KeyPath, place
from ._ragged import Ragged
from ._tokenizer import PaddingTokenizer, padding_side


class DataCollatorForSeq2Seq(PaddingCollator):
    """Pads tokenized samples, and their ``labels`` (or ``label``) to the longest labels.

    As transformers' collator of the same name, on torch alone. Labels are padded with
    ``label_pad_token_id`` on the tokenizer's padding side: to the longest labels of the
    batch, or to ``max_length`` with ``padding="max_length"``, rounded up to
    ``pad_to_multiple_of``; they come out as ``labels`` (``None`` when the samples have
    none). With a ``model`` that has ``prepare_decoder_input_ids_from_labels`` (the
    encoder-decoder models of transformers), the batch also gets ``decoder_input_ids``
    (the model is given the labels as a tensor, also with ``return_tensors="np"``: a torch
    model shifts tensors).
    The other arguments are those of :class:`DataCollatorWithPadding`.
    """

    def __init__(
        self,
        tokenizer: PaddingTokenizer,
        model: Any | None = None,
        padding: PaddingOption = True,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        label_pad_token_id: int = -100,
        return_tensors: str = "pt",
    ) -> None:
        super().__init__(tokenizer, padding, max_length, pad_to_multiple_of, return_tensors)
        self.model = model
        self.label_pad_token_id = label_pad_token_id

    def _collate_tokenized(
        self, features: Sequence[Mapping[str, Any]], path: KeyPath
    ) -> dict[str, Any]:
        name = "label" if "label" in features[0] else "labels"
        labels = self.padder.column(features, name, path) if name in features[0] else None
        if labels is not None and all(label is None for label in labels):
            labels = None
        fields = self.padder.pad(features, path, leave=(name,)).fields
        if labels is None:
            fields["labels"] = None
            return fields
        fields["labels"] = self._pad_labels(labels, (*path, name))
        prepare = getattr(self.model, "prepare_decoder_input_ids_from_labels", None)
        if prepare is not None:
            fields["decoder_input_ids"] = prepare(labels=fields["labels"])
        return fields

    def _pad_labels(self, labels: list[Any], path: KeyPath) -> torch.Tensor:
        missing = [index for index, label in enumerate(labels) if label is None]
        if missing:
            raise CollatorError(
                f"{self._owner}: samples[{missing[0]}]{place(path)} is None, "
                "but other samples have labels"
            )
        rows = Ragged.from_rows(labels, self._owner, path)
        if not self.plan.pads and len(set(rows.lengths)) > 1:
            raise CollatorError(
                f"{self._owner}: padding=False, but samples[*]{place(path)} have different "
                f"lengths ({sorted(set(rows.lengths))}); pad them (padding=True)"
            )
        length = self._labels_length(rows.longest)
        if rows.longest > length:
            index = rows.lengths.index(rows.longest)
            raise CollatorError(
                f"{self._owner}: samples[{index}]{place(path)} has {rows.longest} labels, more "
                f"than max_length={self.max_length}; truncate the targets when tokenizing"
            )
        side = padding_side(self.tokenizer, self._owner)
        return rows.padded(length, side, self.label_pad_token_id)

    def _labels_length(self, longest: int) -> int:
        if not self.plan.pads:
            return longest
        # transformers pads labels to max_length only when it was given, not to the model's.
        if self.plan.strategy == "max_length" and self.max_length is not None:
            return self.plan.round_up(self.max_length)
        return self.plan.round_up(longest)

    def _options(self) -> dict[str, Any]:
        return {
            **super()._options(),
            "model": self.model,
            "label_pad_token_id": self.label_pad_token_id,
        }
