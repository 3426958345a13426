"""Every error accmt-decorators raises: one base class, each also the built-in that fits, so
that ``except DecoratorError`` and ``except ValueError`` (or ``TypeError``, ...) both work."""

from __future__ import annotations


class DecoratorError(Exception):
    """The base class of every error accmt-decorators raises."""


class DecoratorUsageError(DecoratorError, TypeError):
    """A decorator was misused where it is applied: it was given something that is not
    callable, or ``on_process`` / ``on_local_process`` was given no index or a non-int one."""


class ProcessIndexError(DecoratorError, ValueError):
    """A process index is negative (found at decoration time), or at or beyond the number of
    processes of the job or of the machine (found when the function is called)."""


class LauncherEnvironmentError(DecoratorError, ValueError):
    """An environment variable a launcher sets (``RANK``, ``SLURM_NTASKS``, ...) is not a whole
    number, so this process's place in the job cannot be read from it."""


class NoProcessGroupError(DecoratorError, RuntimeError):
    """Raised when a collective is asked for on several processes that share no process group."""


class BroadcastError(DecoratorError, RuntimeError):
    """With ``broadcast=True``, the chosen process's function raised: the other processes raise
    this, naming that process and its error, rather than wait for a result that never comes."""


class FrozenProcessInfoError(DecoratorError, AttributeError):
    """A field of a ``ProcessInfo`` was assigned: it is immutable."""
