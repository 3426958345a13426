"""Schedulers built by HyperParameters: the warmup schedules against reference formulas,
torch schedulers sized to the run exactly once, pickling and state_dict round trips."""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch
from torch.optim.lr_scheduler import LRScheduler

from accmt_trainer import HyperParameters, HyperParametersError
from accmt_trainer.config._schedulers import WARMUP_SCHEDULES

LR = 0.5
T = 10  # the number of times the scheduler is stepped in the run
EPOCHS = 3  # passed along; a schedule sized epochs x T would show in every curve test


def optimizer(lr: float = LR) -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=lr)


def build(
    scheduler: Any, steps: int = T, run_epochs: int = EPOCHS, lr: float = LR, **kwargs: Any
) -> LRScheduler:
    """``scheduler`` with ``kwargs``, built for a run of ``steps`` steps over ``run_epochs``."""
    hps = HyperParameters(scheduler=scheduler, scheduler_kwargs=kwargs)
    built = hps.build_scheduler(optimizer(lr), steps, run_epochs)
    assert built is not None
    return built


def curve(scheduler: LRScheduler, steps: int) -> list[float]:
    """The learning rate after 0, 1, ..., ``steps`` scheduler steps."""
    lrs = [float(scheduler.get_last_lr()[0])]
    for _ in range(steps):
        scheduler.optimizer.step()
        scheduler.step()
        lrs.append(float(scheduler.get_last_lr()[0]))
    return lrs


# Reference formulas, written from the definitions in the transformers documentation
# (optimization.py docstrings), independently of accmt_trainer._schedulers.
# s: step, w: warmup steps, n: training steps; each returns the learning rate.


def ref_constant(s: int) -> float:
    return LR


def ref_constant_with_warmup(s: int, w: int) -> float:
    # "increases linearly between 0 and the initial lr set in the optimizer", then constant.
    return LR * s / w if s < w else LR


def ref_linear(s: int, w: int, n: int) -> float:
    # Linear increase from 0 to lr during warmup, then linear decrease to 0 at n.
    if s < w:
        return LR * s / w
    return LR * max(0.0, (n - s) / (n - w))


def ref_cosine(s: int, w: int, n: int, cycles: float = 0.5) -> float:
    # After warmup, follows the cosine between lr and 0; cycles=0.5 is a half cosine to 0.
    if s < w:
        return LR * s / w
    p = (s - w) / (n - w)
    return LR * max(0.0, (1 + math.cos(2 * math.pi * cycles * p)) / 2)


def ref_hard_restarts(s: int, w: int, n: int, cycles: int = 1) -> float:
    # After warmup, `cycles` cosine decays from lr to 0, each with a hard restart to lr.
    if s < w:
        return LR * s / w
    p = (s - w) / (n - w)
    if p >= 1:
        return 0.0
    within = cycles * p - math.floor(cycles * p)
    return LR * (1 + math.cos(math.pi * within)) / 2


def ref_inverse_sqrt(s: int, w: int, timescale: int) -> float:
    # After warmup, lr / sqrt((s + timescale - w) / timescale): lr at the end of warmup.
    if s < w:
        return LR * s / w
    return LR * math.sqrt(timescale / (s + timescale - w))


def ref_polynomial(s: int, w: int, n: int, lr_end: float = 1e-7, power: float = 1.0) -> float:
    # After warmup, decays from lr to lr_end as (lr - lr_end) * (1 - progress)**power + lr_end.
    if s < w:
        return LR * s / w
    if s > n:
        return lr_end
    remaining: float = (1 - (s - w) / (n - w)) ** power
    return (LR - lr_end) * remaining + lr_end


W = 3
CASES: list[tuple[str, dict[str, Any], Callable[[int], float]]] = [
    ("Constant", {}, ref_constant),
    ("ConstantWithWarmup", {"num_warmup_steps": W}, partial(ref_constant_with_warmup, w=W)),
    ("LinearWithWarmup", {"num_warmup_steps": W}, partial(ref_linear, w=W, n=T)),
    ("CosineWithWarmup", {"num_warmup_steps": W}, partial(ref_cosine, w=W, n=T)),
    (
        "CosineWithWarmup",
        {"num_warmup_steps": W, "num_cycles": 1.5},
        partial(ref_cosine, w=W, n=T, cycles=1.5),
    ),
    (
        "CosineWithHardRestartsWithWarmup",
        {"num_warmup_steps": W},
        partial(ref_hard_restarts, w=W, n=T),
    ),
    (
        "CosineWithHardRestartsWithWarmup",
        {"num_warmup_steps": W, "num_cycles": 3},
        partial(ref_hard_restarts, w=W, n=T, cycles=3),
    ),
    ("InverseSQRT", {"num_warmup_steps": W}, partial(ref_inverse_sqrt, w=W, timescale=W)),
    (
        "InverseSQRT",
        {"num_warmup_steps": W, "timescale": 7},
        partial(ref_inverse_sqrt, w=W, timescale=7),
    ),
    ("PolynomialDecayWithWarmup", {"num_warmup_steps": W}, partial(ref_polynomial, w=W, n=T)),
    (
        "PolynomialDecayWithWarmup",
        {"num_warmup_steps": W, "lr_end": 0.05, "power": 2.0},
        partial(ref_polynomial, w=W, n=T, lr_end=0.05, power=2.0),
    ),
]


@pytest.mark.parametrize(("name", "kwargs", "reference"), CASES)
def test_warmup_schedule_follows_its_reference_formula(
    name: str, kwargs: dict[str, Any], reference: Callable[[int], float]
) -> None:
    lrs = curve(build(name, **kwargs), T + 3)
    assert lrs == pytest.approx([reference(s) for s in range(T + 4)], abs=1e-12)


def test_every_warmup_schedule_name_is_covered() -> None:
    assert {name for name, _, _ in CASES} == set(WARMUP_SCHEDULES)
    assert set(WARMUP_SCHEDULES) == {
        "LinearWithWarmup",
        "CosineWithWarmup",
        "Constant",
        "ConstantWithWarmup",
        "CosineWithHardRestartsWithWarmup",
        "InverseSQRT",
        "PolynomialDecayWithWarmup",
    }


def test_inverse_sqrt_without_warmup_uses_a_10000_step_timescale() -> None:
    lrs = curve(build("InverseSQRT", num_warmup_steps=0), 5)
    assert lrs == pytest.approx([ref_inverse_sqrt(s, 0, 10_000) for s in range(6)], abs=1e-12)
    assert lrs[5] < LR


@pytest.mark.parametrize(
    "name", ["LinearWithWarmup", "CosineWithWarmup", "CosineWithHardRestartsWithWarmup"]
)
def test_zero_warmup_starts_at_the_full_rate(name: str) -> None:
    lrs = curve(build(name, num_warmup_steps=0), T)
    assert lrs[0] == LR
    assert lrs[T] == 0.0


def test_warmup_ratio_is_a_fraction_of_the_training_steps() -> None:
    # round(0.25 * 10) = 2 warmup steps (not 0.25 * 10 * 3 epochs).
    lrs = curve(build("LinearWithWarmup", warmup_ratio=0.25), T)
    assert lrs == pytest.approx([ref_linear(s, 2, T) for s in range(T + 1)], abs=1e-12)


def test_a_float_num_warmup_steps_is_a_ratio() -> None:
    lrs = curve(build("LinearWithWarmup", num_warmup_steps=0.3), T)
    assert lrs == pytest.approx([ref_linear(s, 3, T) for s in range(T + 1)], abs=1e-12)


# --- sized exactly once to the run ------------------------------------------------------------

END_VALUES: list[tuple[Any, dict[str, Any], float]] = [
    ("LinearWithWarmup", {"num_warmup_steps": 2}, 0.0),
    ("CosineWithWarmup", {"warmup_ratio": 0.2}, 0.0),
    ("CosineWithHardRestartsWithWarmup", {"num_warmup_steps": 2}, 0.0),
    ("PolynomialDecayWithWarmup", {"num_warmup_steps": 2, "lr_end": 0.01}, 0.01),
    ("LinearLR", {"start_factor": 1.0, "end_factor": 0.1}, 0.1 * LR),
    ("CosineAnnealingLR", {"eta_min": 0.02}, 0.02),
    ("PolynomialLR", {"power": 2.0}, 0.0),
]


@pytest.mark.parametrize(("name", "kwargs", "end"), END_VALUES)
@pytest.mark.parametrize("steps", [7, 24])
def test_lr_reaches_its_end_value_exactly_at_num_training_steps(
    name: str, kwargs: dict[str, Any], end: float, steps: int
) -> None:
    lrs = curve(build(name, steps=steps, **kwargs), steps)
    assert lrs[steps] == pytest.approx(end, abs=1e-12)
    assert abs(lrs[steps - 1] - end) > 1e-6


@pytest.mark.parametrize(
    ("name", "kwargs", "attribute"),
    [
        ("LinearLR", {}, "total_iters"),
        ("ConstantLR", {"factor": 0.5}, "total_iters"),
        ("PolynomialLR", {}, "total_iters"),
        ("CosineAnnealingLR", {}, "T_max"),
        ("OneCycleLR", {"max_lr": 1.0}, "total_steps"),
        (torch.optim.lr_scheduler.LinearLR, {}, "total_iters"),
    ],
)
def test_torch_schedulers_are_sized_to_num_training_steps(
    name: Any, kwargs: dict[str, Any], attribute: str
) -> None:
    assert getattr(build(name, steps=37, **kwargs), attribute) == 37


def test_a_custom_scheduler_is_sized_by_its_parameter_names() -> None:
    from tests.trainer.test_hyperparameters import MyScheduler

    scheduler = build(MyScheduler, steps=37)
    assert isinstance(scheduler, MyScheduler)
    assert scheduler.total_iters == 37


def test_given_sizes_are_kept() -> None:
    assert build("LinearLR", steps=37, total_iters=5).total_iters == 5  # type: ignore[attr-defined]
    assert build("CosineAnnealingLR", steps=37, T_max=9).T_max == 9  # type: ignore[attr-defined]
    assert build("OneCycleLR", steps=37, max_lr=1.0, total_steps=50).total_steps == 50  # type: ignore[attr-defined]


def test_one_cycle_given_epochs_gets_steps_per_epoch_from_the_run() -> None:
    scheduler = build("OneCycleLR", steps=30, run_epochs=3, max_lr=1.0, epochs=3)
    assert scheduler.total_steps == 30  # type: ignore[attr-defined]
    # Given steps_per_epoch, the run's epochs fill the other factor.
    scheduler = build("OneCycleLR", steps=30, run_epochs=3, max_lr=1.0, steps_per_epoch=10)
    assert scheduler.total_steps == 30  # type: ignore[attr-defined]
    # Rounded up: 31 steps over 3 epochs is 11 per epoch, never fewer than the run takes.
    scheduler = build("OneCycleLR", steps=31, run_epochs=3, max_lr=1.0, epochs=3)
    assert scheduler.total_steps == 33  # type: ignore[attr-defined]


def test_schedulers_without_a_size_are_built_as_given() -> None:
    scheduler = build("StepLR", step_size=4, gamma=0.5)
    assert curve(scheduler, 8)[::4] == pytest.approx([LR, LR / 2, LR / 4])
    plateau = build("ReduceLROnPlateau", mode="max", patience=0)
    assert isinstance(plateau, torch.optim.lr_scheduler.ReduceLROnPlateau)
    assert plateau.mode == "max"


def test_no_scheduler_builds_none() -> None:
    assert HyperParameters().build_scheduler(optimizer(), T, EPOCHS) is None


# --- errors at build time ---------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{"num_warmup_steps": T + 1}, {"num_warmup_steps": 1000}])
@pytest.mark.parametrize("name", ["LinearWithWarmup", "InverseSQRT", "ConstantWithWarmup"])
def test_more_warmup_than_training_steps_is_rejected(name: str, kwargs: dict[str, Any]) -> None:
    hps = HyperParameters(scheduler=name, scheduler_kwargs=kwargs)
    with pytest.raises(HyperParametersError) as caught:
        hps.build_scheduler(optimizer(), T, EPOCHS)
    assert caught.value.key == "scheduler_kwargs.num_warmup_steps"
    assert str(kwargs["num_warmup_steps"]) in str(caught.value)
    assert str(T) in str(caught.value)


def test_warmup_of_all_the_steps_is_allowed() -> None:
    lrs = curve(build("LinearWithWarmup", num_warmup_steps=T), T)
    assert lrs == pytest.approx([LR * s / T for s in range(T)] + [0.0])


@pytest.mark.parametrize(("steps", "epochs"), [(0, 1), (True, 1), (5, 0), (5, 1.0)])
def test_build_scheduler_checks_the_run_sizes(steps: Any, epochs: Any) -> None:
    hps = HyperParameters(scheduler="Constant")
    with pytest.raises(HyperParametersError) as caught:
        hps.build_scheduler(optimizer(), steps, epochs)
    assert caught.value.key in {"num_training_steps", "num_epochs"}


@pytest.mark.parametrize(
    ("name", "kwargs", "words"),
    [
        ("LinearLR", {"start_factor": 2.0}, ["torch.optim.lr_scheduler.LinearLR", "start_factor"]),
        ("PolynomialDecayWithWarmup", {"num_warmup_steps": 1, "lr_end": 1.0}, ["lr_end"]),
    ],
)
def test_values_the_scheduler_rejects_are_named(
    name: str, kwargs: dict[str, Any], words: list[str]
) -> None:
    hps = HyperParameters(scheduler=name, scheduler_kwargs=kwargs)
    with pytest.raises(HyperParametersError) as caught:
        hps.build_scheduler(optimizer(), T, EPOCHS)
    assert caught.value.key == "scheduler_kwargs"
    for word in words:
        assert word in str(caught.value)


# --- state_dict and pickling ------------------------------------------------------------------


@pytest.mark.parametrize(("name", "kwargs", "reference"), CASES)
def test_state_dict_round_trip_resumes_the_curve(
    name: str, kwargs: dict[str, Any], reference: Callable[[int], float]
) -> None:
    first = build(name, **kwargs)
    curve(first, 4)
    state = first.state_dict()
    resumed = build(name, **kwargs)
    resumed.load_state_dict(state)
    assert curve(resumed, 5) == pytest.approx([reference(s) for s in range(4, 10)], abs=1e-12)


@pytest.mark.parametrize(("name", "kwargs", "reference"), CASES)
def test_scheduler_pickles(
    name: str, kwargs: dict[str, Any], reference: Callable[[int], float]
) -> None:
    scheduler = build(name, **kwargs)
    curve(scheduler, 4)
    copy = pickle.loads(pickle.dumps(scheduler))
    assert copy.get_last_lr() == scheduler.get_last_lr()
    assert [copy.lr_lambdas[0](s) * LR for s in range(T)] == pytest.approx(
        [reference(s) for s in range(T)], abs=1e-12
    )


def test_multipliers_are_partials_of_module_level_functions() -> None:
    for name, kwargs, _ in CASES:
        lr_lambda = build(name, **kwargs).lr_lambdas[0]  # type: ignore[attr-defined]
        function = lr_lambda.func if isinstance(lr_lambda, partial) else lr_lambda
        assert function.__module__ == "accmt_trainer.config._schedulers"
        assert "<locals>" not in function.__qualname__
