"""How long a batch is padded to: transformers' padding options, checked when set."""

from __future__ import annotations

from typing import Any, Literal

from ._errors import CollatorError
from ._tokenizer import PaddingTokenizer, model_max_length

Strategy = Literal["longest", "max_length", "do_not_pad"]
_STRATEGIES: dict[Any, Strategy] = {
    True: "longest",
    "longest": "longest",
    "max_length": "max_length",
    False: "do_not_pad",
    "do_not_pad": "do_not_pad",
}


def optional_positive(owner: str, name: str, value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise CollatorError(f"{owner}: {name} must be a positive int or None, got {value!r}")
    return value


class PaddingPlan:
    """The padding options of one collator, resolved to a target length per batch.

    ``padding``: True or "longest" pads to the batch's longest sample, "max_length" to
    ``max_length`` (or the tokenizer's ``model_max_length``), False or "do_not_pad" not at
    all. ``pad_to_multiple_of`` rounds the target up.
    """

    def __init__(
        self,
        owner: str,
        tokenizer: PaddingTokenizer,
        padding: bool | str,
        max_length: int | None,
        pad_to_multiple_of: int | None,
    ) -> None:
        self.owner = owner
        # PaddingStrategy of transformers is a str enum: its members compare equal to these.
        strategy = _STRATEGIES.get(padding if isinstance(padding, bool) else str(padding))
        if strategy is None:
            raise CollatorError(
                f"{owner}: padding must be True, 'longest', 'max_length', "
                f"False or 'do_not_pad', got {padding!r}"
            )
        self.strategy: Strategy = strategy
        self.max_length = optional_positive(owner, "max_length", max_length)
        self.multiple = optional_positive(owner, "pad_to_multiple_of", pad_to_multiple_of)
        if strategy == "max_length" and max_length is None:
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
