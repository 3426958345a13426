"""The optimizer step skips Accelerate's optimizer wrapper only where the wrapper would do
nothing but call the torch optimizer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from accelerate import Accelerator
from accelerate.optimizer import AcceleratedOptimizer
from accelerate.state import AcceleratorState

from accmt_callbacks import CallbackHandler
from accmt_state import TrainingState
from accmt_trainer.fit._optimizer_step import OptimizerStep, StepOptions, direct_optimizer


@pytest.fixture
def accelerator() -> Iterator[Accelerator]:
    yield Accelerator(cpu=True)
    AcceleratorState._reset_state(reset_partial_state=True)


def test_a_plain_step_goes_to_the_torch_optimizer(
    accelerator: Accelerator, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = torch.nn.Linear(3, 1)
    model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    handler = CallbackHandler()
    state = TrainingState()
    handler.bind(state=state)
    stepper = OptimizerStep(
        accelerator,
        model,
        optimizer,
        None,
        handler,
        state,
        StepOptions(),
        scheduler_per_epoch=False,
        grad_norm_every=None,
    )

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the wrapper was called")

    monkeypatch.setattr(AcceleratedOptimizer, "step", refuse)
    monkeypatch.setattr(AcceleratedOptimizer, "zero_grad", refuse)
    before = model.weight.detach().clone()
    stepper.step(model(torch.ones(4, 3)).sum())
    assert not torch.equal(model.weight, before)
    assert model.weight.grad is None  # zeroed with set_to_none
    assert stepper.stepped


def test_a_wrapper_with_a_gradient_scaler_is_kept(accelerator: Accelerator) -> None:
    inner = torch.optim.SGD(torch.nn.Linear(3, 1).parameters(), lr=0.1)
    scaled = AcceleratedOptimizer(inner, scaler=torch.amp.GradScaler("cpu"))
    assert direct_optimizer(scaled, accelerator) is None
    assert direct_optimizer(AcceleratedOptimizer(inner), accelerator) is inner
    assert direct_optimizer(inner, accelerator) is None
