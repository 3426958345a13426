"""Former spellings of the Trainer's options, refused with a message that says what to write.

This is an error table, not a translation: ``Trainer(callback=...)`` raises a
:class:`TrainerConfigError` that names ``callbacks=[...]``, and says that the ``accmt``
package's Trainer (``from accmt import Trainer``) still takes the former spelling. A name that
is neither an option nor a former spelling is a ``TypeError``, with the closest options.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .._errors import TrainerConfigError

_Init = TypeVar("_Init", bound=Callable[..., None])

_NO_COUNTERPART = "has no counterpart: remove it"
_MLFLOW = "went to MLflow: write tracker_init_kwargs={{'mlflow': {{'{name}': ...}}}}"

FORMER_OPTIONS: dict[str, str] = {
    "callback": "write callbacks=[...]",
    "sampler_train": "write sampler=...",
    "sampler_val": "write val_sampler=...",
    "batch_sampler_train": "write batch_sampler=...",
    "batch_sampler_val": "write val_batch_sampler=...",
    "collate_fn_train": "write collate_fn=... (it also collates validation batches unless "
    "val_collate_fn=... is given)",
    "collate_fn_val": "write val_collate_fn=...",
    "track_with": "write log_with=...",
    "enable_checkpointing": "checkpoints are on by default: write checkpoint_every=None to "
    "turn them off, or remove it",
    "multiple_checkpoints": "every checkpoint has a folder of its own: write "
    "max_checkpoints=N to keep the newest N (1: only the last), or remove it",
    "safe_serialization": f"{_NO_COUNTERPART} (models are always saved as safetensors)",
    "safe_mode": f"{_NO_COUNTERPART} (the model always runs through its DDP/FSDP wrapper)",
    "train_loss_metric_name": f"{_NO_COUNTERPART} (the training loss is logged as train/loss)",
    "val_loss_metric_name": f"{_NO_COUNTERPART} (each validation set's loss is <set>/loss)",
    "prepare_batch": f"{_NO_COUNTERPART} (batches are not cast; mixed precision applies)",
    "safe_steps": f"{_NO_COUNTERPART} (a step that runs out of memory is not retried)",
    "destroy_after_training": f"{_NO_COUNTERPART} (fit leaves the process group as it was)",
    "enable_prepare_logging": f"{_NO_COUNTERPART} (DeepSpeed's logging is not silenced)",
    "inference_mode": f"{_NO_COUNTERPART} (evaluation runs under torch.no_grad)",
    **{
        name: _MLFLOW.format(name=name)
        for name in ("run_id", "tags", "nested_run", "run_name", "description")
    },
}
"""Each former option name, and what to write instead (error messages only)."""


def former_option_error(name: str) -> TrainerConfigError:
    """The error for ``Trainer(<name>=...)``, ``name`` being a former spelling."""
    return TrainerConfigError(
        f"Trainer({name}=...) is a former spelling: {FORMER_OPTIONS[name]}. The accmt "
        "package's Trainer (from accmt import Trainer) still accepts it."
    )


def unknown_option_error(name: str, options: Iterable[str]) -> TypeError:
    """The error for ``Trainer(<name>=...)``, ``name`` being no option at all."""
    close = difflib.get_close_matches(name, list(options), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return TypeError(f"Trainer() got an unexpected keyword argument {name!r}{hint}")


def refuses_former_options(init: _Init) -> _Init:
    """Make ``init`` (the Trainer's ``__init__``) refuse a former option name with
    :func:`former_option_error` and an unknown one with :func:`unknown_option_error`; its
    signature, as ``inspect`` sees it, stays its own."""
    parameters = inspect.signature(init).parameters

    @functools.wraps(init)
    def wrapper(*args: Any, **options: Any) -> None:
        for name in options:
            if name in parameters:
                continue
            if name in FORMER_OPTIONS:
                raise former_option_error(name)
            raise unknown_option_error(name, parameters)
        init(*args, **options)

    return wrapper  # type: ignore[return-value]
