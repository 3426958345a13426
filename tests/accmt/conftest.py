"""Accelerate keeps its state in process-wide singletons: each test that trains leaves it as
it found it, so that later tests (of any package) see a process without an Accelerator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from accelerate.state import AcceleratorState

from accmt import AcceleratorModule
from tests.trainer import conftest as trainer_tests
from tests.trainer.conftest import blobs

__all__ = ["Classifier", "blobs"]


@pytest.fixture(autouse=True)
def fresh_accelerate_state() -> Iterator[None]:
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


class Classifier(trainer_tests.Classifier, AcceleratorModule):
    """tests/trainer's classifier, on ``accmt``'s AcceleratorModule (with 1.x's helpers)."""
