"""Accelerate keeps its state in process-wide singletons: each test that trains leaves it as
it found it, so that later tests (of any package) see a process without an Accelerator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from accelerate.state import AcceleratorState


@pytest.fixture(autouse=True)
def fresh_accelerate_state() -> Iterator[None]:
    yield
    AcceleratorState._reset_state(reset_partial_state=True)
