"""Padding and masking data collators for token sequences, on torch alone.

Six DataCollators, with transformers' arguments and defaults but without
transformers: a tokenizer is anything with the attributes a collator reads (see
:class:`PaddingTokenizer` and :class:`MaskingTokenizer`). Samples may nest tokenized mappings
(those holding ``input_ids``) in dicts, tuples and lists; each is padded on its own, the rest
goes through torch's ``default_collate``. Padding and masking are tensor operations over the
whole batch. The masking collators' randomness is a function of (seed, epoch, sample), so a
resumed, re-sharded or multi-worker run masks exactly the tokens the uninterrupted run did.

:class:`DataCollatorWithFlattening` joins a batch's sequences into one row (or rows of
``max_length``, best-fit decreasing) with ``position_ids`` restarting per document and
``use_cache=False`` in the batch, so that a transformers model keeps the documents apart;
:func:`pack_stream` packs a stream of documents best-fit into rows of ``max_length`` that the
collator lays out as they are, and keeps its place across a resume.
"""

from ._errors import CollatorError
from ._flattening import DOCUMENT_SPANS, DataCollatorWithFlattening
from ._language_modeling import DataCollatorForLanguageModeling, DataCollatorForWholeWordMask
from ._pack_stream import pack_stream
from ._permutation import DataCollatorForPermutationLanguageModeling
from ._seq2seq import DataCollatorForSeq2Seq
from ._token_classification import DataCollatorForTokenClassification
from ._tokenizer import MaskingTokenizer, PaddingTokenizer
from ._with_padding import DataCollatorWithPadding

__all__ = [
    "DOCUMENT_SPANS",
    "CollatorError",
    "DataCollatorForLanguageModeling",
    "DataCollatorForPermutationLanguageModeling",
    "DataCollatorForSeq2Seq",
    "DataCollatorForTokenClassification",
    "DataCollatorForWholeWordMask",
    "DataCollatorWithFlattening",
    "DataCollatorWithPadding",
    "MaskingTokenizer",
    "PaddingTokenizer",
    "pack_stream",
]
