"""The one error a collator raises for bad input or a bad option."""

from __future__ import annotations


class CollatorError(ValueError):
    """A collator was built with a bad option, or given samples it cannot collate.

    The message names the collator, what was wrong and where: the option, or the sample and
    the place inside it (for example ``DataCollatorWithPadding: samples[3]['source'] has no
    'input_ids'``).
    """
