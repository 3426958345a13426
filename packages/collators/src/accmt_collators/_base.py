"""What the six collators share: the walk through nested samples, and their checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._errors import CollatorError
from ._features import GroupPadder
from ._nesting import StructureWalk
from ._output import as_numpy, checked_return_tensors
from ._padding import PaddingOption, PaddingPlan
from ._plain import KeyPath
from ._tokenizer import PaddingTokenizer, pad_token_id


class Collator:
    """A callable from a list of samples to a batch.

    Samples may nest tokenized mappings (those holding ``input_ids``) inside dicts, tuples
    and lists; each such place is collated by the subclass on its own, everything else by
    torch's ``default_collate``.
    """

    def __init__(self, tokenizer: Any, return_tensors: str) -> None:
        self.return_tensors = checked_return_tensors(self._owner, return_tensors)
        self.tokenizer = tokenizer

    @property
    def _owner(self) -> str:
        return type(self).__name__

    def __call__(self, samples: Sequence[Any]) -> Any:
        """Collate ``samples`` (a list of dataset items) into one batch."""
        batch = self._collate(samples)
        return as_numpy(batch) if self.return_tensors == "np" else batch

    def _collate(self, samples: Sequence[Any]) -> Any:
        """The batch, as torch tensors."""
        return StructureWalk(self._owner, self._collate_tokenized)(samples)

    def _padder(self, plan: PaddingPlan) -> GroupPadder:
        # numpy makes Python floats float64 where torch makes float32: an "np" batch holds
        # what transformers' "np" batch holds.
        return GroupPadder(self._owner, self.tokenizer, plan, float64=self.return_tensors == "np")

    def _collate_tokenized(self, features: Sequence[Mapping[str, Any]], path: KeyPath) -> Any:
        raise NotImplementedError

    def _check_probability(self, name: str, value: float, *, allow_zero: bool = True) -> float:
        low_ok = value >= 0 if allow_zero else value > 0
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not low_ok
            or value > 1
        ):
            interval = "[0, 1]" if allow_zero else "(0, 1]"
            raise CollatorError(f"{self._owner}: {name} must be in {interval}, got {value!r}")
        return float(value)

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in self._options().items())
        return f"{self._owner}({options})"

    def _options(self) -> dict[str, Any]:
        return {"tokenizer": self.tokenizer}


def is_token_sequence(sample: Any) -> bool:
    """A bare sequence of token ids: a list of ints, or a 1-D integer tensor or array.

    The language-modeling collators take such samples as ``{'input_ids': sample}`` (as
    transformers' do) rather than as a structure to walk.
    """
    if isinstance(sample, (list, tuple)):
        return len(sample) > 0 and isinstance(sample[0], int) and not isinstance(sample[0], bool)
    dtype = getattr(sample, "dtype", None)
    is_float = getattr(dtype, "is_floating_point", None) or getattr(dtype, "kind", "") == "f"
    return getattr(sample, "ndim", None) == 1 and dtype is not None and not is_float


class PaddingCollator(Collator):
    """A collator with transformers' padding options (the three padding-only collators)."""

    def __init__(
        self,
        tokenizer: PaddingTokenizer,
        padding: PaddingOption,
        max_length: int | None,
        pad_to_multiple_of: int | None,
        return_tensors: str,
    ) -> None:
        super().__init__(tokenizer, return_tensors)
        self.plan = PaddingPlan(self._owner, tokenizer, padding, max_length, pad_to_multiple_of)
        self.padding = padding
        self.max_length = max_length
        self.pad_to_multiple_of = pad_to_multiple_of
        self.padder = self._padder(self.plan)
        if self.plan.pads:
            pad_token_id(tokenizer, self._owner)  # say now, not at the first ragged batch

    def _options(self) -> dict[str, Any]:
        return {
            **super()._options(),
            "padding": self.padding,
            "max_length": self.max_length,
            "pad_to_multiple_of": self.pad_to_multiple_of,
        }
