"""When the training loop evaluates: the Trainer's options of it, checked when it is made."""

from __future__ import annotations

import attrs

from ..config import option, positive_int


@attrs.frozen(kw_only=True)
class LoopOptions:
    """The Trainer's options of when the training loop evaluates, checked when it is made."""

    evaluate_every_n_steps: int | None = attrs.field(
        default=None, validator=option(positive_int, allow_none=True)
    )
    """Also evaluate every N optimizer steps."""
    evaluate_every_n_epochs: int = attrs.field(default=1, validator=option(positive_int))
    """Evaluate at the end of every N-th epoch."""
    eval_when_start: bool = False
    """Evaluate once before the first training step (not on resume)."""
    eval_when_finish: bool = True
    """Evaluate at the end of the run, unless the last evaluation saw the same weights."""
