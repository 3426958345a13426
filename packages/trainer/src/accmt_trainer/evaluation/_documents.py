"""Flattened batches, evaluated and predicted per document.

A flattening collator (accmt-collators' ``DataCollatorWithFlattening``) joins a batch's
documents into rows, ``position_ids`` restarting at each one. When every sample carries its
int ``index`` (its place in the dataset), the batch also holds ``document_spans``, an int64
tensor of shape ``(documents, 4)``: ``(index, row, start, length)`` per document, in the
batch's order. The Trainer takes that key out of the batch before any step sees it, so that
``model(**batch)`` works, and cuts what a step returns back into documents: a tensor whose
first two dimensions are the batch's rows and width (per token, as the model's logits and the
batch's labels are) becomes one entry per document, in the order of their indices; a tensor
or list with one entry per document is put in that order. Metrics then see one row per
document, as with padded batches, and ``predict`` returns one prediction per document.

A flattened batch without ``position_ids`` runs its documents as one sequence through a
model: each attends to the ones before it and takes positions after theirs. It is refused
before the first step: from the collator's ``flattens_sequences`` marker and its
``return_position_ids`` when the loader is made, and from the batch's keys where it holds
``document_spans``. (accmt-trainer does not import accmt-collators: the marker is read by
duck typing.)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping
from typing import Any

import attrs
import torch
from torch.nn.utils.rnn import pad_sequence

from .._errors import TrainerConfigError

DOCUMENT_SPANS = "document_spans"
"""The key of a flattened batch's documents: ``(index, row, start, length)`` per document."""
IGNORED = -100
"""What an integer tensor's per-document rows are padded with (the label padding is
ignored with), as a padding collator pads labels."""


def without_documents(batch: Any, where: str) -> Any:
    """``batch`` without ``document_spans`` (a shallow copy; the same object when it has
    none), refused where it is flattened without ``position_ids``. ``where`` names the step
    the batch was for."""
    if not isinstance(batch, Mapping) or DOCUMENT_SPANS not in batch:
        return batch
    if "position_ids" not in batch:
        raise TrainerConfigError(
            f"{where}: the batch is flattened (it holds {DOCUMENT_SPANS!r}) but has no "
            "'position_ids', so a model would see each row as one sequence: every document "
            "would attend to the ones before it; give the collator return_position_ids=True"
        )
    if isinstance(batch, MutableMapping):
        rest = copy.copy(batch)
        del rest[DOCUMENT_SPANS]
        return rest
    return {key: value for key, value in batch.items() if key != DOCUMENT_SPANS}


def take_documents(batch: Any, where: str) -> tuple[Any, Documents | None]:
    """``batch`` without ``document_spans``, and its documents (None for a batch that is not
    flattened, or whose samples carried no ``index``)."""
    rest = without_documents(batch, where)
    if rest is batch:
        return batch, None
    return rest, Documents.of(batch[DOCUMENT_SPANS], batch["position_ids"], where)


@attrs.frozen
class Documents:
    """A flattened batch's documents, in the order of their dataset indices."""

    spans: list[tuple[int, int, int]]
    """``(row, start, length)`` of each document, ordered by index."""
    order: torch.Tensor
    """The documents' positions in the batch's order, ordered by index."""
    rows: int
    width: int

    @classmethod
    def of(cls, spans: Any, positions: Any, where: str) -> Documents:
        shape = tuple(getattr(positions, "shape", ()))
        if not isinstance(spans, torch.Tensor) or spans.ndim != 2 or spans.shape[1] != 4:
            raise TrainerConfigError(
                f"{where}: the batch's {DOCUMENT_SPANS!r} must be an int64 tensor of shape "
                f"(documents, 4), (index, row, start, length) per document, got {spans!r}"
            )
        if len(shape) != 2:
            raise TrainerConfigError(
                f"{where}: a flattened batch's 'position_ids' must be of shape (rows, width), "
                f"got {shape}"
            )
        listed = spans.tolist()  # one wait for the device per batch: the cut needs the numbers
        ranked = sorted(range(len(listed)), key=lambda k: listed[k][0])
        return cls(
            spans=[(listed[k][1], listed[k][2], listed[k][3]) for k in ranked],
            order=torch.tensor(ranked, dtype=torch.long),
            rows=shape[0],
            width=shape[1],
        )

    def per_token(self, value: Any) -> bool:
        """Whether ``value`` is a tensor laid out as the batch's tokens: ``(rows, width,
        ...)``."""
        return isinstance(value, torch.Tensor) and tuple(value.shape[:2]) == (
            self.rows,
            self.width,
        )

    def per_document(self, value: Any) -> bool:
        """Whether ``value`` has one entry per document (a tensor's first dimension, a
        list's length)."""
        if isinstance(value, torch.Tensor):
            return value.ndim > 0 and value.shape[0] == len(self.spans)
        return isinstance(value, list) and len(value) == len(self.spans)

    def cut(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """Each document's tokens of a per-token tensor, ordered by index."""
        return [tokens[row, start : start + length] for row, start, length in self.spans]

    def ordered(self, value: torch.Tensor | list[Any]) -> torch.Tensor | list[Any]:
        """A per-document tensor or list, put in the order of the indices."""
        if isinstance(value, list):
            return [value[k] for k in self.order.tolist()]
        return value.index_select(0, self.order.to(value.device))

    def metric_arguments(self, arguments: tuple[Any, ...]) -> tuple[Any, ...]:
        """A metric's ``add_batch`` arguments with one row per document: a per-token tensor
        becomes ``(documents, longest, ...)``, padded with -100 (integers), 0 or False; a
        per-document one is ordered; anything else is left as it is."""
        return tuple(self._metric_argument(argument) for argument in arguments)

    def _metric_argument(self, value: Any) -> Any:
        if self.per_token(value):
            return pad_sequence(self.cut(value), batch_first=True, padding_value=_padding(value))
        if self.per_document(value):
            return self.ordered(value)
        return value

    def predictions(self, output: Any) -> Any:
        """``predict_step``'s output per document: a per-token tensor becomes a list of each
        document's tensor (its own length), a per-document tensor or list is ordered; dicts
        and tuples are walked."""
        if self.per_token(output):
            return self.cut(output)
        if self.per_document(output):
            return self.ordered(output)
        if isinstance(output, dict):
            return {key: self.predictions(value) for key, value in output.items()}
        if isinstance(output, tuple):
            return tuple(self.predictions(value) for value in output)
        return output


def _padding(tensor: torch.Tensor) -> float:
    if tensor.dtype == torch.bool:
        return False
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex:
        return 0.0
    return IGNORED
