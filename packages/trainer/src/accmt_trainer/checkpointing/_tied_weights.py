"""Saving a model with tied weights without Accelerate's notice about them at every save.

safetensors holds a tensor once, so Accelerate's safetensors saving (``save_model`` for a best
model, ``save_state`` for a checkpoint) drops every name that shares another's storage (an LM
head tied to its embedding) and logs ``Removed shared tensor {...} while saving`` each time: two
lines an epoch that say nothing new. The run loses nothing by it: ``load_weights`` (and so
``evaluate(weights=...)``) loads a dropped name from the one it shares storage with, and a
resume loads into the model whose names are still tied. While :func:`tied_weights_unannounced`
is entered, in this thread or task, that notice (and only it) is left out; anything else
Accelerate logs, and the notice for saves of the program's own, still shows.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator

from accelerate.utils import clean_state_dict_for_safetensors

NOTICE = "Removed shared tensor"
# The logger of the module that says it (accelerate.utils.other in Accelerate 1.x).
_LOGGER = clean_state_dict_for_safetensors.__module__

_unannounced = contextvars.ContextVar("accmt_tied_weights_unannounced", default=False)


class _LeaveOutTiedWeights(logging.Filter):
    """Drops Accelerate's tied-weights notice while a save of the Trainer's runs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_unannounced.get() and NOTICE in record.getMessage())


_FILTER = _LeaveOutTiedWeights()


@contextlib.contextmanager
def tied_weights_unannounced() -> Iterator[None]:
    """Within the block, Accelerate's saving does not say which tied names it left out."""
    logging.getLogger(_LOGGER).addFilter(_FILTER)  # once: a logger holds a filter at most once
    token = _unannounced.set(True)
    try:
        yield
    finally:
        _unannounced.reset(token)
