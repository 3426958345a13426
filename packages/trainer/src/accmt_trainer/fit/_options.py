"""What one ``fit`` is told: every owner's options object, made once when the Trainer is made."""

from __future__ import annotations

from pathlib import Path

import attrs

from ..checkpointing import CheckpointOptions
from ..config import HyperParameters, option, profile_window
from ..data import LoaderOptions
from ..evaluation import EvaluationOptions
from ..runtime import AcceleratorOptions, LoggingOptions, requeue_signal_name
from ._best_models import BestModelOptions
from ._loop_options import LoopOptions
from ._optimizer_step import StepOptions
from ._weight_average import check_decay


@attrs.frozen(kw_only=True)
class FitOptions:
    """The options of every fit a Trainer runs; each owner is made from its own field."""

    hps: HyperParameters
    model_path: Path
    accelerator_options: AcceleratorOptions
    loader_options: LoaderOptions
    step_options: StepOptions
    evaluation_options: EvaluationOptions
    loop_options: LoopOptions
    checkpoint_options: CheckpointOptions
    best_model_options: BestModelOptions
    logging_options: LoggingOptions
    handle_signals: bool = True
    """SIGINT, SIGTERM and ``requeue_signal`` ask the run to stop (checkpointed) rather than
    kill it (``runtime/_signals``)."""
    requeue_signal: str | None = attrs.field(default="SIGUSR1", converter=requeue_signal_name)
    """The signal SLURM sends before the job's end (``--signal``): a stop request, after which
    the job requeues itself (``auto_requeue``); its full name, or None."""
    auto_requeue: bool = True
    """Under SLURM, once the stop ``requeue_signal`` asked for is checkpointed, the main
    process requeues the job (``runtime/_requeue``)."""
    sanity_check: bool = True
    """Each validation set's first batch runs before the first step, and the names checked."""
    ema_decay: float | None = attrs.field(default=None, validator=option(check_decay))
    """Keep an exponential moving average of the weights with this decay (``_weight_average``)."""
    profile_steps: tuple[int, int] | None = attrs.field(default=None, converter=profile_window)
    """Profile the optimizer steps ``start + 1`` to ``stop`` of ``(start, stop)`` on every
    process (``runtime/_profiling``)."""
