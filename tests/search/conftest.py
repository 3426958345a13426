"""Each test's search starts from a fresh Accelerate state, on tiny digit problems."""

from __future__ import annotations

from collections.abc import Iterator

import optuna
import pytest
from accelerate.state import AcceleratorState
from torch.utils.data import TensorDataset

from ._data import digits


@pytest.fixture(autouse=True)
def fresh_accelerate_state() -> Iterator[None]:
    # Accelerate keeps its state in process-wide singletons; each test's search starts anew.
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


@pytest.fixture(autouse=True)
def quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="session")
def data() -> tuple[TensorDataset, TensorDataset]:
    return digits()
