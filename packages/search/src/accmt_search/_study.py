"""The optuna study behind a search: its storage, and how its trials are counted.

optuna owns storage, heartbeats and retries. A trial that stops sending heartbeats (its process
was killed) is failed by ``optuna.storages.fail_stale_trials`` and queued again by
``RetryHeartbeatStaleTrialCallback`` with the same parameters; the retry knows the number of the
trial it repeats, and trains in that trial's folder, so it resumes from its checkpoint.
"""

from __future__ import annotations

import importlib.util
import re
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import optuna
from optuna.storages import BaseStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

from ._errors import SearchConfigError, StudyError

# A trial that kills its process every time (a crash in one configuration) is retried this
# many times, then left failed; a new trial takes its place.
MAX_RETRIES = 2
_SCHEMA_ATTEMPTS = 5

# The user attribute, one dict, that the search sets on each trial when it ends (one write:
# each costs a commit): its "outcome" ("complete", "pruned", "failed", "interrupted", or
# "surplus" for a trial asked past n_trials by a worker that lost a race), "folder",
# "retry_of", "optimizer_steps", "global_step", "resumed_from_step", "seconds", "error",
# "hps" and "module_kwargs".
RECORD = "accmt_search"
# The study's user attribute naming the objective ("validation accuracy"), for the plots of a
# later run that trains no trial.
OBJECTIVE = "accmt_search_objective"


def record_of(trial: FrozenTrial) -> dict[str, Any]:
    """What the search recorded on ``trial`` (empty while it runs, or if it was cut off)."""
    record = trial.user_attrs.get(RECORD)
    return record if isinstance(record, dict) else {}


def _quietly(make: Any, *args: Any, **kwargs: Any) -> Any:
    """optuna marks heartbeats and retries experimental; the search relies on them knowingly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return make(*args, **kwargs)


RETRY = _quietly(
    RetryHeartbeatStaleTrialCallback, max_retry=MAX_RETRIES, inherit_intermediate_values=True
)


def make_storage(
    storage: str | BaseStorage | None,
    output_dir: Path,
    heartbeat_interval: int | None,
    grace_period: int | None,
) -> BaseStorage:
    """The study's storage: SQLite in ``output_dir`` by default, or any RDB URL, with heartbeats
    so that a cut-off trial is failed and retried. A storage object is used as it is."""
    if isinstance(storage, BaseStorage):
        return storage
    if storage is None:
        output_dir.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{(output_dir / 'study.db').resolve()}"
    elif isinstance(storage, str):
        url = _with_driver(storage)
    else:
        raise SearchConfigError(
            f"optimize(storage=...): expected None, an RDB URL or an optuna storage, got "
            f"{type(storage).__name__}"
        )
    for name, value in (("heartbeat_interval", heartbeat_interval), ("grace_period", grace_period)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise SearchConfigError(
                f"optimize({name}=...): expected None or seconds >= 1, got {value!r}"
            )
    made = _rdb_storage(url, heartbeat_interval, grace_period)
    return _write_ahead(made) if storage is None else made


def _rdb_storage(url: str, heartbeat_interval: int | None, grace_period: int | None) -> RDBStorage:
    import sqlalchemy.exc  # here: importing SQLAlchemy takes a third of a second

    for attempt in range(_SCHEMA_ATTEMPTS):
        try:
            return _quietly(  # type: ignore[no-any-return]
                RDBStorage,
                url,
                heartbeat_interval=heartbeat_interval,
                grace_period=grace_period,
                heartbeat_stale_trial_callback=RETRY if heartbeat_interval is not None else None,
            )
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            # Workers started together race to create the tables of an empty database; the
            # loser finds them made when it tries again.
            if attempt == _SCHEMA_ATTEMPTS - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _write_ahead(storage: RDBStorage) -> RDBStorage:
    """The search's own SQLite file journals ahead (WAL, synchronous=NORMAL).

    A commit then costs a write instead of two fsyncs: about 20 ms less on a busy disk, paid at
    each report to the study (every evaluation) and four times a trial. A killed process loses
    nothing committed, a power cut at most the last commits, and optuna-dashboard reads while
    the search writes. WAL needs a local disk: on a network file system, pass
    ``storage="sqlite:///..."`` (SQLite's default journal) or a database server.
    """

    import sqlalchemy.event

    def pragmas(connection: Any, record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    sqlalchemy.event.listen(storage.engine, "connect", pragmas)
    storage.engine.dispose()  # the connections made so far open again, with the pragmas
    return storage


def _with_driver(url: str) -> str:
    """``postgresql://`` means psycopg2 to SQLAlchemy; use psycopg 3 (accmt-search[postgresql])
    when psycopg2 is not installed."""
    if (
        url.startswith("postgresql://")
        and importlib.util.find_spec("psycopg2") is None
        and importlib.util.find_spec("psycopg") is not None
    ):
        return "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def open_study(
    storage: BaseStorage,
    study_name: str,
    direction: Literal["minimize", "maximize"],
    sampler: optuna.samplers.BaseSampler | None,
    pruner: optuna.pruners.BasePruner | None,
    seed: int | None,
) -> optuna.Study:
    """Create the study, or continue the one of that name, which must share the direction."""
    study = optuna.create_study(
        storage=storage,
        study_name=study_name,
        direction=direction,
        sampler=sampler or optuna.samplers.TPESampler(seed=seed),
        pruner=pruner or default_pruner(),
        load_if_exists=True,
    )
    if study.direction.name.lower() != direction:
        raise StudyError(
            f"the study {study_name!r} in {_describe(storage)} was made to "
            f"{study.direction.name.lower()}, not to {direction}; pass that direction or "
            "another study_name"
        )
    return study


def default_pruner() -> optuna.pruners.BasePruner:
    """The median pruner with a short warm-up: a trial is stopped from its second evaluation on
    when its objective is worse than the median of earlier trials at that evaluation, once three
    trials have finished."""
    return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=2)


def _describe(storage: BaseStorage) -> str:
    url = getattr(storage, "url", None)
    return repr(shown_url(url)) if isinstance(url, str) else type(storage).__name__


def shown_url(url: str) -> str:
    """``url`` as messages and logs may show it: its password hidden (SQLAlchemy's own
    rendering), so that no credential reaches an error or a log."""
    from sqlalchemy.engine import make_url  # here: importing SQLAlchemy takes a third of a second
    from sqlalchemy.exc import ArgumentError

    try:
        shown: str = make_url(url).render_as_string(hide_password=True)
    except ArgumentError:  # not a URL SQLAlchemy reads: hide whatever stands for a password
        shown = re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", url)
    return shown


def fail_stale_trials(study: optuna.Study) -> None:
    """Fail the trials whose process stopped sending heartbeats; optuna queues their retries."""
    _quietly(optuna.storages.fail_stale_trials, study)


def heartbeats(storage: BaseStorage) -> bool:
    """Whether running trials send heartbeats to ``storage`` (so that a dead one is found)."""
    interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
    return interval is not None


def takes_a_place(trial: FrozenTrial) -> bool:
    """Whether ``trial`` counts toward n_trials: finished (complete, pruned, failed by its own
    error), running or waiting to run. A trial cut off and retried counts once, as its retry."""
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING):
        return True
    if trial.state == TrialState.WAITING:
        return True
    return trial.state == TrialState.FAIL and record_of(trial).get("outcome") == "failed"


@attrs.frozen
class Tally:
    """Where the study stands against n_trials."""

    finished: int
    running: tuple[int, ...]
    waiting: int

    @classmethod
    def of(cls, trials: Sequence[FrozenTrial], count_running: bool) -> Tally:
        finished = sum(
            takes_a_place(trial) and trial.state not in (TrialState.RUNNING, TrialState.WAITING)
            for trial in trials
        )
        running = tuple(t.number for t in trials if t.state == TrialState.RUNNING)
        waiting = sum(trial.state == TrialState.WAITING for trial in trials)
        return cls(finished, running if count_running else (), waiting)

    def may_start(self, n_trials: int) -> bool:
        """A retry waits, or a place is free."""
        return self.waiting > 0 or self.finished + len(self.running) < n_trials


def is_surplus(trials: Sequence[FrozenTrial], number: int, n_trials: int) -> bool:
    """Whether trial ``number`` was asked past n_trials: workers that count the study at the
    same moment may each ask one; the trials with the lowest numbers keep the places."""
    before = [t for t in trials if t.number < number and takes_a_place(t)]
    return len(before) >= n_trials


def frozen(trials: Sequence[FrozenTrial], number: int) -> FrozenTrial:
    """The stored trial ``number``."""
    for trial in trials:
        if trial.number == number:
            return trial
    raise StudyError(f"the study has no trial {number}")


def retried_trial(trials: Sequence[FrozenTrial], number: int) -> int | None:
    """The number of the trial that trial ``number`` retries (the first of a series), or None."""
    found: int | None = _quietly(RETRY.retried_trial_number, frozen(trials, number))
    return found


def best_value(
    trials: Sequence[FrozenTrial], direction: optuna.study.StudyDirection
) -> float | None:
    """The best value of the completed trials, or None."""
    values = [t.value for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    if not values:
        return None
    return max(values) if direction == optuna.study.StudyDirection.MAXIMIZE else min(values)


def retry(study: optuna.Study, number: int) -> None:
    """Queue trial ``number`` (interrupted by a signal) to run again with its parameters."""
    RETRY(study, frozen(study.get_trials(deepcopy=False), number))


def objective_name(study: optuna.Study, learned: str | None) -> str:
    """What the objective is called: ``learned`` by this run's trials (then kept in the study),
    else what an earlier run kept, else "objective"."""
    stored = study.user_attrs.get(OBJECTIVE)
    if learned is not None and learned != stored:
        study.set_user_attr(OBJECTIVE, learned)
        return learned
    return stored if isinstance(stored, str) else "objective"
