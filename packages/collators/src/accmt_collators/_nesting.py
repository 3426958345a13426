"""The walk through a sample's structure: dicts, tuples and lists, to any depth.

Each place that holds a tokenized mapping (a mapping with ``input_ids``) is padded on its own
by the collator; every other leaf goes through torch's ``default_collate``. So a dataset item
``(source_encoding, target_encoding, label)`` collates to ``(padded_source, padded_target,
labels)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._errors import CollatorError
from ._plain import KeyPath, collate_plain, place

CollateTokenized = Callable[[Sequence[Mapping[str, Any]], KeyPath], Any]


def describe(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"a mapping with keys {list(value)}"
    return f"a {type(value).__name__}"


class StructureWalk:
    """Collates samples place by place; tokenized places go to ``collate_tokenized``."""

    def __init__(self, owner: str, collate_tokenized: CollateTokenized) -> None:
        self.owner = owner
        self.collate_tokenized = collate_tokenized
        self.tokenized_places = 0

    def __call__(self, samples: Sequence[Any]) -> Any:
        if len(samples) == 0:
            raise CollatorError(f"{self.owner}: got an empty batch")
        batch = self._walk(samples, ())
        if self.tokenized_places == 0:
            raise CollatorError(
                f"{self.owner}: no tokenized mapping (one holding 'input_ids') in the samples; "
                f"samples[0] is {describe(samples[0])}"
            )
        return batch

    def _walk(self, values: Sequence[Any], path: KeyPath) -> Any:
        first = values[0]
        if isinstance(first, Mapping):
            self._check_kind(values, Mapping, path)
            if "input_ids" in first:
                self._check_tokenized(values, path)
                self.tokenized_places += 1
                return self.collate_tokenized(values, path)
            return {key: self._walk(self._column(values, key, path), (*path, key)) for key in first}
        if isinstance(first, (tuple, list)):
            self._check_kind(values, (tuple, list), path)
            self._check_lengths(values, path)
            items = [self._walk([v[i] for v in values], (*path, i)) for i in range(len(first))]
            if isinstance(first, tuple) and hasattr(first, "_fields"):
                return type(first)(*items)  # a namedtuple
            return tuple(items) if isinstance(first, tuple) else items
        return collate_plain(values, self.owner, path)

    def _check_kind(self, values: Sequence[Any], kind: Any, path: KeyPath) -> None:
        first = type(values[0])
        for index, value in enumerate(values):
            # The type check first: isinstance of an abstract class is slow, batches are long.
            if type(value) is not first and not isinstance(value, kind):
                raise CollatorError(
                    f"{self.owner}: samples[{index}]{place(path)} is {describe(value)}, but "
                    f"samples[0]{place(path)} is {describe(values[0])}"
                )

    def _check_tokenized(self, values: Sequence[Mapping[str, Any]], path: KeyPath) -> None:
        for index, value in enumerate(values):
            if "input_ids" not in value:
                raise CollatorError(
                    f"{self.owner}: samples[{index}]{place(path)} has no 'input_ids' (its keys "
                    f"are {list(value)}), but samples[0]{place(path)} has"
                )

    def _column(self, values: Sequence[Mapping[str, Any]], key: Any, path: KeyPath) -> list[Any]:
        for index, value in enumerate(values):
            if key not in value:
                raise CollatorError(
                    f"{self.owner}: samples[{index}]{place(path)} lacks the key "
                    f"{key!r} that samples[0]{place(path)} has"
                )
        return [value[key] for value in values]

    def _check_lengths(self, values: Sequence[Sequence[Any]], path: KeyPath) -> None:
        for index, value in enumerate(values):
            if len(value) != len(values[0]):
                raise CollatorError(
                    f"{self.owner}: samples[{index}]{place(path)} has {len(value)} items but "
                    f"samples[0]{place(path)} has {len(values[0])}. A field that is not "
                    "tokenized must have the same length in every sample; put ragged token "
                    "sequences in a mapping with 'input_ids' to have them padded"
                )
