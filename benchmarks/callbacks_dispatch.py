"""What CallbackHandler adds to one training step, with 0, 1 and 20 callbacks.

A step fires the ten hooks of a training step that steps the optimizer (before/after training
step, backward, optimizer step, scheduler step and zero_grad). Callbacks that override nothing
are the common case (the handler must skip them); callbacks that override every step hook with
an empty function show the cost of the calls themselves. For comparison, a naive dispatcher
calls every callback's hook on every call, overridden or not.

./hatchw run python benchmarks/callbacks_dispatch.py
"""

from __future__ import annotations

from collections.abc import Callable

from _timing import interleaved_medians

from accmt_callbacks import HOOKS, Callback, CallbackHandler, LambdaCallback
from accmt_state import TrainingState

STEPS = 2_000
REPEATS = 31
OPTIMIZER = object()
SCHEDULER = object()


# HOOKS is in fit order: a training step's hooks run from the first of these to the last.
STEP_HOOKS = HOOKS[
    HOOKS.index("on_before_training_step") : HOOKS.index("on_after_training_step") + 1
]


def every_step_hook() -> Callback:
    """A callback that overrides every hook of a training step with an empty function."""
    return LambdaCallback(**dict.fromkeys(STEP_HOOKS, lambda callback, *args: None))


class NaiveHandler:
    """For comparison: every callback's hook called on every call, with no override resolution."""

    def __init__(self, callbacks: list[Callback]) -> None:
        self.callbacks = callbacks

    def bind(self, *, state: TrainingState) -> None:
        pass

    def call(self, hook: str, *args: object) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(*args)


def steps(handler: CallbackHandler | NaiveHandler) -> Callable[[], None]:
    handler.bind(state=TrainingState())
    call = handler.call

    def run() -> None:
        for _ in range(STEPS):
            call("on_before_training_step", None)
            call("on_before_backward", None)
            call("on_after_backward")
            call("on_before_optimizer_step", OPTIMIZER)
            call("on_after_optimizer_step", OPTIMIZER)
            call("on_before_scheduler_step", SCHEDULER)
            call("on_after_scheduler_step", SCHEDULER)
            call("on_before_zero_grad", OPTIMIZER)
            call("on_after_zero_grad", OPTIMIZER)
            call("on_after_training_step")

    return run


def main() -> None:
    runs = {
        "0 callbacks": steps(CallbackHandler()),
        "1 callback, overrides nothing": steps(CallbackHandler([Callback()])),
        "20 callbacks, override nothing": steps(CallbackHandler([Callback() for _ in range(20)])),
        "1 callback, every step hook": steps(CallbackHandler([every_step_hook()])),
        "20 callbacks, naive dispatcher": steps(NaiveHandler([Callback() for _ in range(20)])),
        "20 callbacks, every step hook": steps(
            CallbackHandler([every_step_hook() for _ in range(20)])
        ),
    }
    medians = interleaved_medians(runs, REPEATS)
    print(f"per training step (10 hooks), median of {REPEATS} interleaved runs of {STEPS} steps")
    for name, seconds in medians.items():
        print(f"  {name:<34} {seconds / STEPS * 1e6:8.2f} us")


if __name__ == "__main__":
    main()
