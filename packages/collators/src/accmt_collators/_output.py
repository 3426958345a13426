"""What a batch comes out as: torch tensors (``"pt"``), or numpy arrays (``"np"``).

numpy is not a dependency of accmt-collators: it is imported only by a collator built with
``return_tensors="np"``, which says how to get it when it is missing.
"""

from __future__ import annotations

from typing import Any

import torch

from ._errors import CollatorError

RETURN_TENSORS = ("pt", "np")


def checked_return_tensors(owner: str, return_tensors: str) -> str:
    """``return_tensors`` if it is one this package returns (and numpy is there for "np")."""
    if not isinstance(return_tensors, str) or return_tensors not in RETURN_TENSORS:
        raise CollatorError(
            f"{owner}: return_tensors must be 'pt' (torch tensors) or 'np' (numpy arrays), "
            f"got {return_tensors!r}"
        )
    if return_tensors == "np":
        try:
            import numpy  # noqa: F401  # only to say now, not at the first batch, if it is missing
        except ImportError as error:
            raise ImportError(
                f"{owner}: return_tensors='np' needs numpy, which accmt-collators does not "
                "install; install it (pip install numpy) or use return_tensors='pt'"
            ) from error
    return return_tensors


def as_numpy(batch: Any) -> Any:
    """``batch`` with every tensor in it, at any depth, as a numpy array of the same dtype."""
    if isinstance(batch, torch.Tensor):
        # force: a tensor a model made (decoder_input_ids) may sit elsewhere or need grad.
        return batch.numpy(force=True)
    if isinstance(batch, dict):
        return {key: as_numpy(value) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(as_numpy(value) for value in batch))  # a namedtuple
    if isinstance(batch, (tuple, list)):
        return type(batch)(as_numpy(value) for value in batch)
    return batch
