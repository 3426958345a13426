"""DataCollatorWithFlattening: a batch's sequences joined into rows, documents kept apart."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Final

import torch

from ._errors import CollatorError
from ._output import as_numpy, checked_return_tensors

IGNORE_INDEX = -100
DOCUMENT_SPANS = "document_spans"
"""The key of a flattened batch's ``(index, row, start, length)`` per document (int64, shape
``(documents, 4)``), there when the samples carry their dataset ``index``: pop it before
``model(**batch)``, which takes no such keyword."""


class DataCollatorWithFlattening:
    """Joins the batch's token sequences into one row (or rows of ``max_length``) with
    ``position_ids`` restarting at each sequence, as transformers' collator of the same name,
    on torch alone and with no tokenizer.

    Args:
        return_position_ids: return ``position_ids``, restarting at ``position_ids_start`` for
            every sequence (this is what keeps documents apart in a transformers model).
        separator_id: the label given to every sequence's first token, so that no prediction
            crosses from one document into the next.
        return_flash_attn_kwargs: also return ``cu_seq_lens_q``/``cu_seq_lens_k`` (int32, the
            cumulative lengths over the flattened batch) and ``max_length_q``/``max_length_k``
            (a Python int, the longest sequence).
        return_seq_idx: also return ``seq_idx`` (int32): each token's sequence, counted from 0
            within its row.
        max_length: ``None`` joins the whole batch into one row of shape ``(1, total)``. An int
            ``L`` lays the sequences into rows of ``L`` (best-fit decreasing), shape
            ``(rows, L)``: a longer sequence is cut to ``L`` (one warning per batch says which
            and how many tokens were dropped), and each row's free tail is padding that is a
            document of its own: ``pad_token_id`` tokens, ``position_ids`` from 0, labels -100.
        use_cache: ``False`` puts ``use_cache=False`` in the batch, so that ``model(**batch)``
            builds no KV cache: a transformers model detects packed sequences from
            ``position_ids`` only without a cache, and with one (its config's default, also
            in training) each document attends to the ones before it. ``None`` leaves the
            key out, for a model that takes no such keyword.
        position_ids_start: the position of each sequence's first token (transformers'
            argument: 2 for RoBERTa-like models that count from ``padding_idx + 1``).
        pad_token_id: the token that fills a row's tail when ``max_length`` is set.
        return_tensors: ``"pt"`` (torch tensors) or ``"np"`` (numpy arrays; needs numpy).

    Samples are mappings holding ``input_ids`` (a list of ints or a 1-D integer tensor) and
    optionally ``labels`` of the same length (else the labels are the ``input_ids``); other
    keys (an ``attention_mask``) are not used. When every sample holds an int ``index``
    (its place in the dataset), the batch also has ``document_spans``, an int64 tensor of
    shape ``(documents, 4)``: per sample, in the batch's order, ``(index, row, start,
    length)`` (its tokens are ``input_ids[row, start:start + length]``, after any cut). A
    model takes no such keyword: pop it before ``model(**batch)``.

    A sample may also be a packed row: a list (or tuple) of such documents, as
    :func:`pack_stream` yields. A batch of packed rows is laid out a row per sample, as given
    (no packing again): padded to ``max_length`` when it is set (a row holding more is
    refused), else to the batch's fullest row. A batch holds documents or rows, not both.

    ``flattens_sequences`` (a read-only class attribute, always True) says to a reader that
    cannot import this package, by duck typing (accmt's Trainer reads
    ``getattr(collate_fn, "flattens_sequences", False)``), that its batches are flattened:
    for example, to refuse ``TokenBudgetBatchSampler(packed=True)`` with a padding collator.
    """

    flattens_sequences: Final = True

    def __init__(
        self,
        *,
        return_position_ids: bool = True,
        separator_id: int = IGNORE_INDEX,
        return_flash_attn_kwargs: bool = False,
        return_seq_idx: bool = False,
        max_length: int | None = None,
        use_cache: bool | None = False,
        position_ids_start: int = 0,
        pad_token_id: int = 0,
        return_tensors: str = "pt",
    ) -> None:
        owner = type(self).__name__
        if max_length is not None and (
            isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1
        ):
            raise CollatorError(
                f"{owner}: max_length must be None or an int >= 1, got {max_length!r}"
            )
        if use_cache is not False and use_cache is not None:
            raise CollatorError(
                f"{owner}: use_cache must be False (the batch says use_cache=False, so that a "
                "transformers model keeps packed documents apart) or None (no such key, for a "
                f"model without that keyword), got {use_cache!r}: with a KV cache each packed "
                "document attends to the ones before it"
            )
        if max_length is not None and not return_position_ids:
            raise CollatorError(
                f"{owner}: max_length needs return_position_ids=True: without position_ids "
                "the documents and padding of a row are one sequence to the model"
            )
        for name, value in (
            ("separator_id", separator_id),
            ("position_ids_start", position_ids_start),
            ("pad_token_id", pad_token_id),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise CollatorError(f"{owner}: {name} must be an int, got {value!r}")
        self.return_position_ids = return_position_ids
        self.separator_id = separator_id
        self.return_flash_attn_kwargs = return_flash_attn_kwargs
        self.return_seq_idx = return_seq_idx
        self.max_length = max_length
        self.use_cache = use_cache
        self.position_ids_start = position_ids_start
        self.pad_token_id = pad_token_id
        self.return_tensors = checked_return_tensors(owner, return_tensors)

    def __call__(self, samples: Sequence[Any]) -> dict[str, Any]:
        """Collate ``samples`` (a list of dataset items) into one flattened batch."""
        batch = self._collate(samples)
        return as_numpy(batch) if self.return_tensors == "np" else batch

    def __repr__(self) -> str:
        options = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in (
                "return_position_ids",
                "separator_id",
                "return_flash_attn_kwargs",
                "return_seq_idx",
                "max_length",
                "use_cache",
                "position_ids_start",
                "pad_token_id",
                "return_tensors",
            )
        )
        return f"{type(self).__name__}({options})"

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "flattens_sequences":
            raise AttributeError(
                f"{type(self).__name__}.flattens_sequences is read-only: it says that this "
                "collator's batches are flattened, which they always are"
            )
        super().__setattr__(name, value)

    def _collate(self, samples: Sequence[Any]) -> dict[str, Any]:
        owner = type(self).__name__
        if len(samples) == 0:
            raise CollatorError(f"{owner}: the batch has no samples")
        given_rows = [isinstance(sample, (list, tuple)) for sample in samples]
        if all(given_rows):
            names, documents, rows = self._read_rows(owner, samples)
        elif any(given_rows):
            row, document = given_rows.index(True), given_rows.index(False)
            raise CollatorError(
                f"{owner}: samples[{row}] is a packed row (a list of documents) and "
                f"samples[{document}] is one document: give a batch of one kind"
            )
        else:
            names = [f"samples[{position}]" for position in range(len(samples))]
            documents = [
                read_document(owner, where, sample)
                for where, sample in zip(names, samples, strict=True)
            ]
            rows = []
        with_labels = [labels is not None for _, labels, _ in documents]
        if len(set(with_labels)) > 1:
            raise CollatorError(
                f"{owner}: {names[with_labels.index(True)]} has 'labels' and "
                f"{names[with_labels.index(False)]} has none: give labels to every sample of "
                "a batch or to none"
            )
        indexed = [index is not None for _, _, index in documents]
        if len(set(indexed)) > 1:
            raise CollatorError(
                f"{owner}: {names[indexed.index(False)]} has no 'index' and other samples have "
                "one: give every sample of a batch its dataset index or none"
            )
        tokens = [ids for ids, _, _ in documents]
        labels = [ids if given is None else given for ids, given, _ in documents]
        if rows:
            width = self.max_length or max(sum(len(tokens[d]) for d in row) for row in rows)
        elif self.max_length is None:
            rows = [list(range(len(tokens)))]
            width = sum(len(ids) for ids in tokens)
        else:
            width = self.max_length
            tokens, labels = self._cut(owner, tokens, labels)
            rows = best_fit_decreasing([len(ids) for ids in tokens], width)
        return self._lay_out(rows, width, tokens, labels, [index for _, _, index in documents])

    def _read_rows(
        self, owner: str, samples: Sequence[Any]
    ) -> tuple[
        list[str],
        list[tuple[torch.Tensor, torch.Tensor | None, int | None]],
        list[list[int]],
    ]:
        """Packed rows given as samples (lists of documents, as ``pack_stream`` yields): each
        row's documents, in order, and the rows as they are, each checked to fit."""
        names: list[str] = []
        documents = []
        rows = []
        for position, row in enumerate(samples):
            if len(row) == 0:
                raise CollatorError(f"{owner}: samples[{position}] is an empty packed row")
            rows.append(list(range(len(names), len(names) + len(row))))
            for place, sample in enumerate(row):
                names.append(f"samples[{position}][{place}]")
                documents.append(read_document(owner, names[-1], sample))
            held = sum(len(documents[d][0]) for d in rows[-1])
            if self.max_length is not None and held > self.max_length:
                raise CollatorError(
                    f"{owner}: samples[{position}] is a packed row of {held} tokens, more than "
                    f"max_length={self.max_length}: a given row is laid out as it is, not cut "
                    "(pack_stream packs rows that fit)"
                )
        return names, documents, rows

    def _cut(
        self, owner: str, tokens: list[torch.Tensor], labels: list[torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        width = self.max_length
        assert width is not None
        cut = {
            f"samples[{i}]": len(ids) - width for i, ids in enumerate(tokens) if len(ids) > width
        }
        say_cut(owner, "sequence(s)", cut, width, stacklevel=5)
        return [ids[:width] for ids in tokens], [ids[:width] for ids in labels]

    def _lay_out(
        self,
        rows: list[list[int]],
        width: int,
        tokens: list[torch.Tensor],
        labels: list[torch.Tensor],
        indices: list[int | None],
    ) -> dict[str, Any]:
        row_tokens, row_labels, row_positions, row_seq = [], [], [], []
        segment_lengths: list[int] = []
        spans = torch.zeros((len(tokens), 4), dtype=torch.long)
        for row_number, row in enumerate(rows):
            parts, part_labels, lengths = [], [], []
            start = 0
            for place in row:
                ids = tokens[place]
                parts.append(ids)
                part_labels.append(
                    torch.cat([torch.tensor([self.separator_id]), labels[place][1:]])
                )
                spans[place] = torch.tensor([indices[place] or 0, row_number, start, len(ids)])
                lengths.append(len(ids))
                start += len(ids)
            if start < width:
                parts.append(torch.full((width - start,), self.pad_token_id, dtype=torch.long))
                part_labels.append(torch.full((width - start,), IGNORE_INDEX, dtype=torch.long))
                lengths.append(width - start)
            row_tokens.append(torch.cat(parts))
            row_labels.append(torch.cat(part_labels))
            row_positions.append(
                torch.cat([torch.arange(n) + self.position_ids_start for n in lengths])
            )
            row_seq.append(
                torch.cat([torch.full((n,), k, dtype=torch.int32) for k, n in enumerate(lengths)])
            )
            segment_lengths.extend(lengths)
        batch: dict[str, Any] = {
            "input_ids": torch.stack(row_tokens),
            "labels": torch.stack(row_labels),
        }
        if self.return_position_ids:
            batch["position_ids"] = torch.stack(row_positions)
        if self.return_seq_idx:
            batch["seq_idx"] = torch.stack(row_seq)
        if self.return_flash_attn_kwargs:
            cumulative = torch.tensor([0, *segment_lengths], dtype=torch.int32).cumsum(0)
            batch["cu_seq_lens_q"] = batch["cu_seq_lens_k"] = cumulative.to(torch.int32)
            batch["max_length_q"] = batch["max_length_k"] = max(segment_lengths)
        if self.use_cache is False:
            batch["use_cache"] = False
        if indices[0] is not None:
            batch[DOCUMENT_SPANS] = spans
        return batch


def say_cut(owner: str, what: str, cut: dict[str, int], width: int, *, stacklevel: int) -> None:
    """One warning for the ``cut`` places (name: tokens dropped) cut to ``width``, if any."""
    if cut:
        which = ", ".join(f"{place} lost {dropped}" for place, dropped in cut.items())
        warnings.warn(
            f"{owner}: {len(cut)} {what} longer than max_length={width} were cut to it, "
            f"{sum(cut.values())} token(s) dropped ({which})",
            UserWarning,
            stacklevel=stacklevel,
        )


def read_document(
    owner: str, where: str, sample: Any
) -> tuple[torch.Tensor, torch.Tensor | None, int | None]:
    """A sample's ``input_ids``, ``labels`` (or None) and ``index`` (or None), checked."""
    if not isinstance(sample, Mapping):
        raise CollatorError(
            f"{owner}: {where} is a {type(sample).__name__}, not a mapping with 'input_ids'"
        )
    if "input_ids" not in sample:
        raise CollatorError(f"{owner}: {where} has no 'input_ids'")
    ids = _sequence(owner, where, "input_ids", sample["input_ids"])
    if len(ids) == 0:
        raise CollatorError(f"{owner}: {where}['input_ids'] is empty")
    labels = None
    if sample.get("labels") is not None:
        labels = _sequence(owner, where, "labels", sample["labels"])
        if len(labels) != len(ids):
            raise CollatorError(
                f"{owner}: {where}['labels'] has {len(labels)} values for "
                f"{len(ids)} input_ids: a flattened batch needs one label per token"
            )
    index = sample.get("index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
        if isinstance(index, torch.Tensor) and index.numel() == 1 and not index.is_floating_point():
            index = int(index.item())
        else:
            raise CollatorError(
                f"{owner}: {where}['index'] must be an int (the sample's place in "
                f"the dataset), got {index!r}"
            )
    return ids, labels, index


def _sequence(owner: str, where: str, name: str, value: Any) -> torch.Tensor:
    """``value`` as a 1-D int64 tensor, or a CollatorError naming the sample and field."""
    try:
        tensor = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as error:
        raise CollatorError(
            f"{owner}: {where}[{name!r}] is not a sequence of ints ({error})"
        ) from error
    if tensor.ndim == 1 and tensor.numel() == 0:
        return tensor.to(torch.long)  # an empty list is float32 to torch; its caller says empty
    if (
        tensor.ndim != 1
        or tensor.is_floating_point()
        or tensor.is_complex()
        or tensor.dtype == torch.bool
    ):
        raise CollatorError(
            f"{owner}: {where}[{name!r}] must be a list of ints or a 1-D integer "
            f"tensor, got {tensor.dtype} of shape {tuple(tensor.shape)}"
        )
    return tensor.to(torch.long)


def best_fit_decreasing(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Places ``lengths`` (each at most ``capacity``) into bins of ``capacity``: longest
    first (ties in sample order), each into the open bin it leaves least room in (the first
    such bin on a tie), else a new bin. Returns each bin's sample positions in sample order,
    bins in the order they were opened."""
    bins: list[list[int]] = []
    room: list[int] = []
    for place in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        length = lengths[place]
        fits = [b for b in range(len(bins)) if room[b] >= length]
        if fits:
            chosen = min(fits, key=lambda b: (room[b], b))
            bins[chosen].append(place)
            room[chosen] -= length
        else:
            bins.append([place])
            room.append(capacity - length)
    return [sorted(row) for row in bins]
