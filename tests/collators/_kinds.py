"""Which collators a suite that walks "every collator" walks, and why.

accmt 1.x's six collators are built with a tokenizer (its pad token, its padding side; the
masking ones its mask token and special ids) and walk nested samples: each tokenized mapping
inside a dict, tuple or list is padded on its own. The collators added since take no
tokenizer and do not pad to one: :class:`DataCollatorWithFlattening` joins documents into
rows, a sample being one document (or one packed row of them), never a nest of encodings.
A suite names the kind its property holds for; ``test_every_collator_has_a_kind`` makes a new
collator be put in one.
"""

from __future__ import annotations

TOKENIZER_COLLATORS = (
    "DataCollatorForLanguageModeling",
    "DataCollatorForPermutationLanguageModeling",
    "DataCollatorForSeq2Seq",
    "DataCollatorForTokenClassification",
    "DataCollatorForWholeWordMask",
    "DataCollatorWithPadding",
)
TOKENIZER_FREE_COLLATORS = ("DataCollatorWithFlattening",)
