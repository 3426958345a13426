"""How long a batch is padded to: transformers' padding options, checked when set."""

from __future__ import annotations

import enum
from typing import Any, Literal

from ._errors import CollatorError
from ._tokenizer import PaddingTokenizer, model_max_length

Strategy = Literal["longest", "max_length", "do_not_pad"]
PaddingOption = bool | str | enum.Enum
"""What ``padding=`` takes: a bool, a strategy's name, or an Enum whose value is one."""
_STRATEGIES: dict[Any, Strategy] = {
    True: "longest",
    "longest": "longest",
    "max_length": "max_length",
    False: "do_not_pad",
    "do_not_pad": "do_not_pad",
}


def padding_strategy(owner: str, padding: PaddingOption) -> Strategy:
    """``padding`` as one of the three strategies.

    An ``enum.Enum`` counts by its value: transformers' ``PaddingStrategy`` (read without
    importing transformers), or any enum whose values are these strings.
    """
    value = padding.value if isinstance(padding, enum.Enum) else padding
    # By type first: True == 1 and would find "longest" by hash.
    strategy = _STRATEGIES.get(value) if isinstance(value, (bool, str)) else None
    if strategy is None:
        raise CollatorError(
            f"{owner}: padding must be True, 'longest', 'max_length', False or 'do_not_pad' "
            "(or an Enum with one of those values, such as transformers' PaddingStrategy), "
            f"got {padding!r}"
        )
    return strategy


def optional_positive(owner: str, name: str, value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise CollatorError(f"{owner}: {name} must be a positive int or None, got {value!r}")
    return value


class PaddingPlan:
    """The padding options of one collator, resolved to a target length per batch.

    ``padding``: True or "longest" pads to the batch's longest sample, "max_length" to
    ``max_length`` (or the tokenizer's ``model_max_length``), False or "do_not_pad" not at
    all; an Enum with one of these values (transformers' ``PaddingStrategy``) stands for
    its value. ``pad_to_multiple_of`` rounds the target up.
    """

    def __init__(
        self,
        owner: str,
        tokenizer: PaddingTokenizer,
        padding: PaddingOption,
        max_length: int | None,
        pad_to_multiple_of: int | None,
    ) -> None:
        self.owner = owner
        self.strategy: Strategy = padding_strategy(owner, padding)
        self.max_length = optional_positive(owner, "max_length", max_length)
        self.multiple = optional_positive(owner, "pad_to_multiple_of", pad_to_multiple_of)
        if self.strategy == "max_length" and max_length is None:
            self.max_length = model_max_length(tokenizer)
            if self.max_length is None:
                raise CollatorError(
                    f"{owner}: padding='max_length' needs max_length=..., and "
                    "the tokenizer sets no model_max_length"
                )

    @property
    def pads(self) -> bool:
        return self.strategy != "do_not_pad"

    def round_up(self, length: int) -> int:
        if self.multiple is None:
            return length
        return -(-length // self.multiple) * self.multiple

    def target_length(self, longest: int) -> int:
        """The padded length of a batch whose longest sample has ``longest`` tokens."""
        if self.strategy == "max_length":
            assert self.max_length is not None
            return self.round_up(self.max_length)
        if self.strategy == "longest":
            return self.round_up(longest)
        return longest
