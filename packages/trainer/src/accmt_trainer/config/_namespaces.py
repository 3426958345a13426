"""``Optimizer`` and ``Scheduler``: the optimizers and schedulers as attributes, which an editor
completes and a type checker checks, instead of strings."""

from __future__ import annotations

from torch import optim


class Optimizer:
    """torch.optim's optimizers, as its classes.

    ``HyperParameters(optimizer=Optimizer.AdamW)`` and ``Optimizer.AdamW(params, lr=1e-3)``
    both work. Any other torch.optim optimizer can be named by string or class.
    """

    Adam = optim.Adam
    Adadelta = optim.Adadelta
    Adafactor = optim.Adafactor
    Adagrad = optim.Adagrad
    Adamax = optim.Adamax
    AdamW = optim.AdamW
    ASGD = optim.ASGD
    NAdam = optim.NAdam
    RAdam = optim.RAdam
    RMSprop = optim.RMSprop
    Rprop = optim.Rprop
    SGD = optim.SGD
    SparseAdam = optim.SparseAdam


class Scheduler:
    """Registered schedulers, as the names ``HyperParameters(scheduler=...)`` takes.

    torch.optim.lr_scheduler's classes and the warmup schedules (which do not need
    transformers); any other torch.optim.lr_scheduler class can be named too.
    """

    StepLR = "StepLR"
    LinearLR = "LinearLR"
    ExponentialLR = "ExponentialLR"
    CosineAnnealingLR = "CosineAnnealingLR"
    CyclicLR = "CyclicLR"
    OneCycleLR = "OneCycleLR"
    CosineAnnealingWarmRestarts = "CosineAnnealingWarmRestarts"
    Constant = "Constant"
    ConstantWithWarmup = "ConstantWithWarmup"
    CosineWithWarmup = "CosineWithWarmup"
    CosineWithHardRestartsWithWarmup = "CosineWithHardRestartsWithWarmup"
    InverseSQRT = "InverseSQRT"
    LinearWithWarmup = "LinearWithWarmup"
    PolynomialDecayWithWarmup = "PolynomialDecayWithWarmup"
