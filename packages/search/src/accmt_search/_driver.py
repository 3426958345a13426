"""The search loop: the main process leads (talks to the study, sends each trial), the other
processes of the job follow (train what they are sent).

Messages from the main process, in order: ``("trial", TrialPlan)`` for each trial, ``("wait",
None)`` while it waits for trials running elsewhere, then ``("done", SearchResult)`` or
``("error", message)``. Within a trial, every evaluation broadcasts the pruning decision
(:class:`TrialReporter`) and the end gathers each process's outcome (:func:`run_trial`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from accmt_trainer.integration import HyperParameters, HyperParametersError

from ._console import trial_line, without_optuna_trial_lines
from ._errors import SearchConfigError, StudyError, TrialEnded
from ._log import logger
from ._plots import write_plots
from ._processes import ProcessLink
from ._progress import TrialProgress
from ._report import summary, write_csv
from ._resolve import TrialConfig, resolve
from ._result import SearchResult
from ._space import Space
from ._stop_request import StopRequest
from ._study import (
    RECORD,
    Tally,
    best_value,
    fail_stale_trials,
    heartbeats,
    is_surplus,
    objective_name,
    record_of,
    retried_trial,
    retry,
)
from ._trial import TrialOutcome, TrialPlan, TrialSetup, remove_checkpoints, run_trial


@attrs.frozen
class Options:
    n_trials: int
    output_dir: Path
    keep_checkpoints: bool
    plots: bool
    progress_bar: bool
    poll_seconds: float


@attrs.frozen
class Ended:
    """A trial the lead ran, as it ended: what its line says."""

    number: int
    outcome: TrialOutcome
    params: dict[str, Any]
    retry_of: int | None


@attrs.define
class SearchRun:
    """What one ``optimize`` call shares between leading and following."""

    link: ProcessLink
    setup: TrialSetup
    space: Space
    options: Options
    stop_request: StopRequest

    def execute(self, plan: TrialPlan, trial: optuna.Trial | None) -> TrialOutcome:
        """Run ``plan`` on this process with the others; tidy its folder once it ended."""
        outcome = run_trial(plan, self.setup, self.link, trial, self.stop_request)
        ended = outcome.kind != "interrupted"
        if ended and not self.options.keep_checkpoints and self.link.is_local_main:
            remove_checkpoints(plan.folder)
        return outcome

    def follow(self) -> SearchResult:
        """Train what the main process sends until it says the search is done."""
        while True:
            message: tuple[str, Any] = self.link.broadcast(("", None))
            kind, payload = message
            if kind == "trial":
                self.execute(payload, None)
            elif kind == "done":
                result: SearchResult = payload
                return result
            elif kind == "error":
                raise StudyError(f"the main process stopped the search: {payload}")


class Lead:
    """The main process's side: one ``study.optimize(n_trials=1)`` per trial, so that optuna
    keeps each trial's heartbeat and fails stale ones, until ``n_trials`` have finished."""

    def __init__(self, run: SearchRun, study: optuna.Study, storage: BaseStorage) -> None:
        self.run = run
        self.study = study
        self.counts_running = heartbeats(storage)
        self.last: Ended | None = None
        self.objective_name: str | None = None
        """What the objective is called, once a trial has read it (for the plots)."""
        self.seen: Sequence[FrozenTrial] = ()
        """The study's trials as the loop last read them, before asking for a trial."""

    def __call__(self) -> SearchResult:
        try:
            result = self._search()
        except BaseException as error:
            self.run.link.broadcast(("error", f"{type(error).__name__}: {error}"))
            raise
        self.run.link.broadcast(("done", result))
        return result

    def _search(self) -> SearchResult:
        options = self.run.options
        progress = TrialProgress(options.n_trials, options.progress_bar)
        try:
            with progress.logging_above(), without_optuna_trial_lines():
                interrupted = self._loop(progress)
        finally:
            progress.close()
        return self._finish(interrupted)

    def _loop(self, progress: TrialProgress) -> bool:
        """Run trials until n_trials have finished; True when a signal interrupted it."""
        n_trials = self.run.options.n_trials
        while True:
            fail_stale_trials(self.study)
            trials = self.seen = self.study.get_trials(deepcopy=False)
            tally = Tally.of(trials, self.counts_running)
            progress.show(tally.finished, best_value(trials, self.study.direction))
            if tally.finished >= n_trials:
                return False
            if self.run.stop_request():
                return True
            if tally.may_start(n_trials):
                if self._one_trial():
                    return True
            else:
                self._wait(tally)

    def _one_trial(self) -> bool:
        """Run one trial; True when a signal interrupted it (it is queued to run again)."""
        self.study.optimize(self._objective, n_trials=1, catch=(TrialEnded,))
        if self.last is None:
            return self.run.stop_request()
        ended, self.last = self.last, None
        outcome = ended.outcome
        if outcome.kind == "invalid":
            raise SearchConfigError(
                f"optimize(best_metric_fn=...): {outcome.error}. The search stopped at trial "
                f"{ended.number}, which does not count toward n_trials: correct best_metric_fn "
                "and run optimize again"
            )
        self.objective_name = outcome.objective_name or self.objective_name
        maximize = self.study.direction == optuna.study.StudyDirection.MAXIMIZE
        best = best_value(self.seen, self.study.direction)
        level, line = trial_line(
            ended.number, outcome, ended.params, best, maximize, ended.retry_of
        )
        logger.log(level, "accmt_search: %s", line)
        if outcome.kind == "interrupted":
            retry(self.study, ended.number)
            return True
        return False

    def _wait(self, tally: Tally) -> None:
        logger.info(
            "accmt_search: %d of %d trials finished; waiting for trials %s running elsewhere "
            "(a trial whose process died is failed and retried after the grace period)",
            tally.finished,
            self.run.options.n_trials,
            list(tally.running),
        )
        # Followers wait in a collective: a message now and then keeps its timeout away.
        self.run.link.broadcast(("wait", None))
        time.sleep(self.run.options.poll_seconds)

    # ------------------------------------------------------------------------ one trial

    def _objective(self, trial: optuna.Trial) -> float:
        plan = self._plan(trial)
        if plan is None:
            trial.set_user_attr(RECORD, {"outcome": "surplus"})
            logger.info(
                "accmt_search: trial %d not run: another worker took the last place", trial.number
            )
            raise TrialEnded(
                f"trial {trial.number} was asked past n_trials (another worker took the last "
                "place at the same moment); it did not run"
            )
        self.run.link.broadcast(("trial", plan))
        outcome = self.run.execute(plan, trial)
        trial.set_user_attr(RECORD, _record(plan, outcome))
        self.last = Ended(trial.number, outcome, dict(trial.params), plan.retry_of)
        if outcome.kind == "complete":
            assert outcome.value is not None
            return outcome.value
        if outcome.kind == "pruned":
            raise optuna.TrialPruned(f"pruned after {outcome.global_step} optimizer steps")
        if outcome.kind == "interrupted":
            raise TrialEnded(f"trial {trial.number} was interrupted by a signal; queued again")
        raise TrialEnded(outcome.error)

    def _plan(self, trial: optuna.Trial) -> TrialPlan | None:
        """Sample the trial; None when it was asked past n_trials. A retry trains in the folder
        of the trial it repeats, and resumes from its checkpoint."""
        original, surplus = self._place(trial.number)
        if surplus:
            return None
        number = trial.number if original is None else original
        folder = self.run.options.output_dir / f"trial_{number}"
        try:
            config = resolve(self.run.space.sample(trial), getattr(self.run.space, "file", None))
        except Exception as error:  # a space(trial) function's bug fails this trial only
            problem = f"{type(error).__name__}: {error}"
            return TrialPlan(trial.number, folder, None, error=problem, retry_of=original)
        return TrialPlan(trial.number, folder, config, retry_of=original)

    def _place(self, number: int) -> tuple[int | None, bool]:
        """(the trial that trial ``number`` retries or None, whether it was asked past
        n_trials)."""
        if _fresh(self.seen, number):
            return None, False
        trials = self.study.get_trials(deepcopy=False)
        original = retried_trial(trials, number)
        return original, original is None and is_surplus(trials, number, self.run.options.n_trials)

    # ------------------------------------------------------------------------ the end

    def _finish(self, interrupted: bool) -> SearchResult:
        options = self.run.options
        trials = self.study.get_trials(deepcopy=False)
        options.output_dir.mkdir(parents=True, exist_ok=True)
        write_csv(trials, options.output_dir / "trials.csv")
        finished = Tally.of(trials, count_running=False).finished
        completed = [trial for trial in trials if trial.state == TrialState.COMPLETE]
        if not completed:
            counts = Counter(trial.state.name.lower() for trial in trials)
            states = ", ".join(f"{state}: {count}" for state, count in counts.items())
            raise StudyError(
                f"no trial completed ({states or 'no trials'}); see "
                f"{options.output_dir / 'trials.csv'} for each trial's outcome and error"
            )
        best = self.study.best_trial
        config = self._config_of(best)
        config.hps.to_yaml(options.output_dir / "best_hps.yaml")
        if options.plots:
            objective = objective_name(self.study, self.objective_name)
            write_plots(self.study, options.output_dir / "plots", objective)
        logger.info("accmt_search: %s", summary(self.study, trials))
        if interrupted:
            logger.warning(
                "accmt_search: interrupted after %d of %d trials; run optimize again to continue",
                finished,
                options.n_trials,
            )
        return SearchResult(
            value=float(best.value),  # type: ignore[arg-type]
            params=dict(best.params),
            hps=config.hps,
            module_kwargs=config.module_kwargs,
            trial_number=best.number,
            folder=str(record_of(best).get("folder", f"trial_{best.number}")),
            output_dir=options.output_dir,
            finished=finished,
            interrupted=interrupted,
        )

    def _config_of(self, trial: FrozenTrial) -> TrialConfig:
        """The configuration the space makes of ``trial``'s stored parameters; if the space
        changed since and cannot make it, the one the study recorded when the trial ran."""
        fixed = optuna.trial.FixedTrial(trial.params, trial.number)
        try:
            return resolve(self.run.space.sample(fixed), getattr(self.run.space, "file", None))
        except (ValueError, TypeError) as error:
            record = record_of(trial)
            if not isinstance(record.get("hps"), dict):
                raise StudyError(
                    f"the best trial, {trial.number}, does not fit the search space any more "
                    f"({error}), and the study holds no record of its configuration"
                ) from error
            logger.warning(
                "accmt_search: trial %d does not fit the space any more (%s); its "
                "configuration is read from the study",
                trial.number,
                error,
            )
            hps = HyperParameters.from_dict(record["hps"])
            return TrialConfig(hps, dict(record.get("module_kwargs") or {}))


def _fresh(seen: Sequence[FrozenTrial], number: int) -> bool:
    """Whether trial ``number`` is surely a new trial in a free place, from ``seen`` (read just
    before it was asked) alone: then the study need not be read again (a read of every trial,
    a few milliseconds a trial). Trial numbers are dense, so number ``len(seen)`` means that no
    trial was asked in between, by this worker or another; with none running or waiting in
    ``seen``, none can have been cut off and queued again as this one (a retry); and the loop
    asked because fewer than n_trials had finished, so the place is free."""
    busy = (TrialState.RUNNING, TrialState.WAITING)
    return number == len(seen) and not any(trial.state in busy for trial in seen)


def _record(plan: TrialPlan, outcome: TrialOutcome) -> dict[str, Any]:
    """What the study keeps of a trial the search ran (see ``RECORD``)."""
    config = plan.config
    return {
        "outcome": outcome.kind,
        "folder": plan.folder.name,
        "retry_of": plan.retry_of,
        "optimizer_steps": outcome.optimizer_steps,
        "global_step": outcome.global_step,
        "resumed_from_step": outcome.resumed_step,
        "seconds": round(outcome.seconds, 3),
        "error": outcome.error,
        "hps": None if config is None else _hps_data(config.hps),
        "module_kwargs": None if config is None else _json_data(config.module_kwargs),
    }


def _hps_data(hps: HyperParameters) -> Any:
    try:
        return hps.to_dict()
    except HyperParametersError:  # a class that cannot be written down by import path
        return repr(hps)


def _json_data(values: dict[str, Any]) -> dict[str, Any]:
    """Each value as JSON data when it is, else as its repr (what the study can store)."""
    stored = {}
    for key, value in values.items():
        try:
            json.dumps(value)
            stored[key] = value
        except (TypeError, ValueError):
            stored[key] = repr(value)
    return stored
