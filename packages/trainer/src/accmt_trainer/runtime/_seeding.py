"""Seeding every random number generator a run uses, before the model is built; keeping
their states across a draw that must not count."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import numpy as np
import torch
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


@contextlib.contextmanager
def kept_rng_states() -> Iterator[None]:
    """Python's, NumPy's and torch's generators (on the CPU and every GPU) as they were
    before the block: what it draws from them does not count."""
    python, numpy, cpu = random.getstate(), np.random.get_state(), torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        yield
    finally:
        random.setstate(python)
        np.random.set_state(numpy)
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
