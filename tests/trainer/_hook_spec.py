"""The hook order the callbacks README documents, written out for a run's shape.

Used by the hook-order tests in one process (tests/trainer) and on 1 and 2 launched ones
(tests/distributed).
"""

from __future__ import annotations

STEP = [
    "on_before_training_step",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_after_optimizer_step",
    "on_before_scheduler_step",
    "on_after_scheduler_step",
    "on_before_zero_grad",
    "on_after_zero_grad",
    "on_after_training_step",
]
EVALUATION = [
    "on_evaluation_start",
    "on_before_validation_step",
    "on_after_validation_step",
    "on_evaluation_end",
]


def documented(epochs: int, batches: int, evaluate_every: int, checkpoint_every: int) -> list[str]:
    """Every hook of an uninterrupted run without accumulation, one validation batch, a
    scheduler, evaluation every ``evaluate_every`` steps and at each epoch's end, and a
    checkpoint every ``checkpoint_every`` steps and at the end of the run (the last epoch's
    end comes after its last step's checkpoint, so the run's end always writes one more)."""
    hooks = ["on_fit_start"]
    step = 0
    for _ in range(epochs):
        hooks.append("on_epoch_start")
        for batch in range(batches):
            step += 1
            hooks += STEP
            # A step evaluation the epoch's own end would repeat is left to the end.
            if step % evaluate_every == 0 and batch != batches - 1:
                hooks += EVALUATION
            if step % checkpoint_every == 0:
                hooks.append("on_save_checkpoint")
        hooks += [*EVALUATION, "on_epoch_end"]
    return [*hooks, "on_save_checkpoint", "on_fit_end"]
