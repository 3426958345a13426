"""Every error accmt-trainer raises: one base class, each also the built-in that fits, so that
``except TrainerError`` and ``except ValueError`` both work."""

from __future__ import annotations


class TrainerError(Exception):
    """The base class of every error accmt-trainer raises."""


class TrainerConfigError(TrainerError, ValueError):
    """An option of the Trainer, or of its run, is invalid. The message names it."""


class FolderInUseError(TrainerConfigError):
    """Another run holds the output folder (its lock names the run's host and process)."""


class HyperParametersError(TrainerError, ValueError):
    """A hyperparameter is unknown or has a bad value.

    ``key`` says where, as written in the configuration (``"epochs"``,
    ``"hps.optimizer.type"``, ``"scheduler_kwargs.num_warmup_steps"``); ``problem`` says what is
    wrong. ``str(error)`` is ``"key: problem"``.
    """

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem

    def __reduce__(self) -> tuple[type[HyperParametersError], tuple[str, str]]:
        return type(self), (self.key, self.problem)


class CheckpointError(TrainerError, RuntimeError):
    """A checkpoint cannot be written, or cannot be used to resume this run; the message says
    why and names the file."""


class ArtifactNotFoundError(TrainerError, FileNotFoundError):
    """``Trainer.log_artifact`` or ``log_artifacts`` was given a path that does not exist."""


class StepOutputError(TrainerError, TypeError):
    """``training_step`` or ``validation_step`` returned something the Trainer cannot use."""


class NonFiniteLossError(TrainerError, FloatingPointError):
    """The training loss became NaN or infinite; ``step`` is the first optimizer step it did."""

    def __init__(self, message: str, step: int) -> None:
        super().__init__(message)
        self.step = step

    def __reduce__(self) -> tuple[type[NonFiniteLossError], tuple[str, int]]:
        return type(self), (str(self), self.step)
