"""DataCollatorForTokenClassification: pad the inputs, and the per-token labels with them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._base import PaddingCollator
from ._errors import CollatorError
from ._padding import PaddingOption
from ._plain import KeyPath, place
from ._ragged import Ragged
from ._tokenizer import PaddingTokenizer


class DataCollatorForTokenClassification(PaddingCollator):
    """Pads tokenized samples and their per-token ``labels`` (or ``label``) to one length.

    As transformers' collator of the same name, on torch alone. Labels are padded with
    ``label_pad_token_id`` (-100, which PyTorch's losses ignore) on the tokenizer's padding
    side, to the length of the padded ``input_ids``. The other arguments are those of
    :class:`DataCollatorWithPadding`.
    """

    def __init__(
        self,
        tokenizer: PaddingTokenizer,
        padding: PaddingOption = True,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        label_pad_token_id: int = -100,
        return_tensors: str = "pt",
    ) -> None:
        super().__init__(tokenizer, padding, max_length, pad_to_multiple_of, return_tensors)
        self.label_pad_token_id = label_pad_token_id

    def _collate_tokenized(
        self, features: Sequence[Mapping[str, Any]], path: KeyPath
    ) -> dict[str, Any]:
        name = "label" if "label" in features[0] else "labels"
        if name not in features[0]:
            return self.padder.pad(features, path).fields
        group = self.padder.pad(features, path, leave=(name,))
        labels = Ragged.from_rows(
            self.padder.column(features, name, path), self._owner, (*path, name)
        )
        if labels.longest > group.length:
            index = labels.lengths.index(labels.longest)
            raise CollatorError(
                f"{self._owner}: samples[{index}]{place((*path, name))} has {labels.longest} "
                f"labels, more than the {group.length} positions the inputs are padded to"
                + (f" (max_length={self.max_length})" if self.max_length else "")
            )
        # One label per token: the inputs' real places serve (else padded makes its own).
        real = group.real if labels.same_lengths_as(group.ids) else None
        group.fields[name] = labels.padded(group.length, group.side, self.label_pad_token_id, real)
        return group.fields

    def _options(self) -> dict[str, Any]:
        return {**super()._options(), "label_pad_token_id": self.label_pad_token_id}
