"""Warmup schedules, as ``torch.optim.lr_scheduler.LambdaLR`` instances.

They are HuggingFace transformers' ``get_*_schedule_with_warmup`` schedules, rebuilt here with
the same definitions and defaults, so that accmt does not need transformers. Each schedule is a
``LambdaLR`` whose multiplier is a ``functools.partial`` over a module-level function of this
module, so the scheduler's ``state_dict()`` and the scheduler itself can be pickled.

In every multiplier, ``step`` is the number of times the scheduler has been stepped
(``LambdaLR.last_epoch``); the learning rate is the optimizer's initial one times the
multiplier.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def _warmup(step: int, num_warmup_steps: int) -> float:
    """Linear warmup from 0 to 1 over ``num_warmup_steps`` steps."""
    return step / max(1, num_warmup_steps)


def _constant(step: int) -> float:
    """1 at every step."""
    return 1.0


def _constant_with_warmup(step: int, *, num_warmup_steps: int) -> float:
    """Warm up linearly, then 1."""
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    return 1.0


def _linear_with_warmup(step: int, *, num_warmup_steps: int, num_training_steps: int) -> float:
    """Warm up linearly, then fall linearly to 0 at ``num_training_steps``."""
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    remaining = num_training_steps - step
    return max(0.0, remaining / max(1, num_training_steps - num_warmup_steps))


def _progress(step: int, num_warmup_steps: int, num_training_steps: int) -> float:
    """Fraction of the post-warmup steps done: 0 at the end of warmup, 1 at the last step."""
    return (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)


def _cosine_with_warmup(
    step: int, *, num_warmup_steps: int, num_training_steps: int, num_cycles: float
) -> float:
    """Warm up linearly, then follow ``num_cycles`` cosine periods (0.5: from 1 down to 0)."""
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    progress = _progress(step, num_warmup_steps, num_training_steps)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress)))


def _cosine_with_hard_restarts_with_warmup(
    step: int, *, num_warmup_steps: int, num_training_steps: int, num_cycles: int
) -> float:
    """Warm up linearly, then ``num_cycles`` cosine falls from 1 to 0, each restarting at 1."""
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    progress = _progress(step, num_warmup_steps, num_training_steps)
    if progress >= 1.0:
        return 0.0
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((num_cycles * progress) % 1.0))))


def _inverse_sqrt(step: int, *, num_warmup_steps: int, timescale: int) -> float:
    """Warm up linearly, then decay as ``1 / sqrt((step + timescale - warmup) / timescale)``."""
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    shift = timescale - num_warmup_steps
    return 1.0 / math.sqrt((step + shift) / timescale)


def _polynomial_decay_with_warmup(
    step: int,
    *,
    num_warmup_steps: int,
    num_training_steps: int,
    lr_init: float,
    lr_end: float,
    power: float,
) -> float:
    """Warm up linearly, then decay polynomially from ``lr_init`` to ``lr_end`` (as a multiplier
    of ``lr_init``), and stay at ``lr_end`` after ``num_training_steps``."""
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    if step > num_training_steps:
        return lr_end / lr_init
    decay_steps = max(1, num_training_steps - num_warmup_steps)
    remaining = 1.0 - (step - num_warmup_steps) / decay_steps
    decayed: float = remaining**power
    return ((lr_init - lr_end) * decayed + lr_end) / lr_init


def _schedule(
    optimizer: Optimizer, multiplier: Callable[..., float], last_epoch: int, **arguments: Any
) -> LambdaLR:
    """A ``LambdaLR`` whose multiplier is ``multiplier`` with ``arguments`` bound by a picklable
    ``functools.partial``."""
    return LambdaLR(optimizer, partial(multiplier, **arguments), last_epoch=last_epoch)


def get_constant_schedule(optimizer: Optimizer, last_epoch: int = -1) -> LambdaLR:
    """A constant learning rate (``Constant``)."""
    return LambdaLR(optimizer, _constant, last_epoch=last_epoch)


def get_constant_schedule_with_warmup(
    optimizer: Optimizer, num_warmup_steps: int, last_epoch: int = -1
) -> LambdaLR:
    """Linear warmup from 0 over ``num_warmup_steps``, then constant (``ConstantWithWarmup``)."""
    return _schedule(
        optimizer, _constant_with_warmup, last_epoch, num_warmup_steps=num_warmup_steps
    )


def get_linear_schedule_with_warmup(
    optimizer: Optimizer, num_warmup_steps: int, num_training_steps: int, last_epoch: int = -1
) -> LambdaLR:
    """Linear warmup from 0, then linear decay to 0 at ``num_training_steps``
    (``LinearWithWarmup``)."""
    return _schedule(
        optimizer,
        _linear_with_warmup,
        last_epoch,
        num_warmup_steps=num_warmup_steps,
        num_training_steps=num_training_steps,
    )


def get_cosine_schedule_with_warmup(
    optimizer: Optimizer,
    num_warmup_steps: int,
    num_training_steps: int,
    num_cycles: float = 0.5,
    last_epoch: int = -1,
) -> LambdaLR:
    """Linear warmup from 0, then a cosine; the default half cycle ends at 0 at
    ``num_training_steps`` (``CosineWithWarmup``)."""
    return _schedule(
        optimizer,
        _cosine_with_warmup,
        last_epoch,
        num_warmup_steps=num_warmup_steps,
        num_training_steps=num_training_steps,
        num_cycles=num_cycles,
    )


def get_cosine_with_hard_restarts_schedule_with_warmup(
    optimizer: Optimizer,
    num_warmup_steps: int,
    num_training_steps: int,
    num_cycles: int = 1,
    last_epoch: int = -1,
) -> LambdaLR:
    """Linear warmup from 0, then ``num_cycles`` cosine decays to 0 with hard restarts
    (``CosineWithHardRestartsWithWarmup``)."""
    return _schedule(
        optimizer,
        _cosine_with_hard_restarts_with_warmup,
        last_epoch,
        num_warmup_steps=num_warmup_steps,
        num_training_steps=num_training_steps,
        num_cycles=num_cycles,
    )


def get_inverse_sqrt_schedule(
    optimizer: Optimizer,
    num_warmup_steps: int,
    timescale: int | None = None,
    last_epoch: int = -1,
) -> LambdaLR:
    """Linear warmup from 0, then inverse-square-root decay (``InverseSQRT``).

    ``timescale`` defaults to ``num_warmup_steps``, or 10 000 when there is no warmup.
    """
    if timescale is None:
        timescale = num_warmup_steps or 10_000
    return _schedule(
        optimizer, _inverse_sqrt, last_epoch, num_warmup_steps=num_warmup_steps, timescale=timescale
    )


def get_polynomial_decay_schedule_with_warmup(
    optimizer: Optimizer,
    num_warmup_steps: int,
    num_training_steps: int,
    lr_end: float = 1e-7,
    power: float = 1.0,
    last_epoch: int = -1,
) -> LambdaLR:
    """Linear warmup from 0, then polynomial decay from the optimizer's default ``lr`` to
    ``lr_end`` at ``num_training_steps`` (``PolynomialDecayWithWarmup``).

    Raises ``ValueError`` unless ``lr_end`` is below the optimizer's default learning rate.
    """
    lr_init = float(optimizer.defaults["lr"])
    if not lr_init > lr_end:
        raise ValueError(f"lr_end ({lr_end}) must be smaller than the initial lr ({lr_init})")
    return _schedule(
        optimizer,
        _polynomial_decay_with_warmup,
        last_epoch,
        num_warmup_steps=num_warmup_steps,
        num_training_steps=num_training_steps,
        lr_init=lr_init,
        lr_end=lr_end,
        power=power,
    )


WARMUP_SCHEDULES: Mapping[str, Callable[..., LambdaLR]] = {
    "Constant": get_constant_schedule,
    "ConstantWithWarmup": get_constant_schedule_with_warmup,
    "LinearWithWarmup": get_linear_schedule_with_warmup,
    "CosineWithWarmup": get_cosine_schedule_with_warmup,
    "CosineWithHardRestartsWithWarmup": get_cosine_with_hard_restarts_schedule_with_warmup,
    "InverseSQRT": get_inverse_sqrt_schedule,
    "PolynomialDecayWithWarmup": get_polynomial_decay_schedule_with_warmup,
}
"""The warmup schedules' registered names and the functions that build them."""
