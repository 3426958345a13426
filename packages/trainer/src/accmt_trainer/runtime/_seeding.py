"""Seeding every random number generator a run uses, before the model is built."""

from __future__ import annotations

from accelerate.utils import set_seed


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators (on every device) with ``seed``.

    ``Trainer(seed=...)`` seeds them when ``fit`` starts, which is after the module built its
    weights. To reproduce a run whose ``AcceleratorModule.__init__`` builds the model, call
    ``seed_everything(seed)`` before making the module, and pass the same ``seed`` to the
    Trainer for the data order.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed_everything: expected an int, got {seed!r}")
    set_seed(seed)
