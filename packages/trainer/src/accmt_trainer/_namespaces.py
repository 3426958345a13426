"""accmt 1.x's ``Optimizer`` and ``Scheduler`` namespaces, kept for code written against it."""

from __future__ import annotations

from torch import optim


class Optimizer:
    """The optimizers accmt 1.x named, as torch.optim classes.

    ``HyperParameters(optimizer=Optimizer.AdamW)`` and ``Optimizer.AdamW(params, lr=1e-3)``
    work as in 1.x. Any other torch.optim optimizer can be named by string or class.
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
    """The schedulers accmt 1.x named, as the names ``HyperParameters(scheduler=...)`` takes.

    The warm-up schedules no longer need transformers; any torch.optim.lr_scheduler class
    can be named too.
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
