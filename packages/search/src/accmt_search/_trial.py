"""One trial, on every process: build the module, ``Trainer.fit`` it in the trial's folder,
report each evaluation to optuna, and say how it ended."""

from __future__ import annotations

import copy
import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
import torch
from accelerate.utils import set_seed

from accmt_callbacks import Callback
from accmt_trainer.integration import Trainer

from ._errors import MetricNameError, StudyError
from ._log import logger
from ._metrics import EvaluationMetrics, objective_value
from ._objective import Objective, check_objective, read_objective
from ._processes import ProcessLink
from ._resolve import TrialConfig

if TYPE_CHECKING:
    import optuna
    from torch.utils.data import Dataset

    from accmt_metrics import Metric
    from accmt_trainer.integration import AcceleratorModule

# "invalid": the objective read a name the evaluation does not report; the search stops.
Kind = Literal["complete", "pruned", "failed", "interrupted", "invalid"]

# What a trial's Trainer gets unless the search's trainer_kwargs say otherwise: no best models,
# one checkpoint to resume a cut-off trial from, no bar per trial (the search shows one over
# trials).
TRIAL_DEFAULTS: dict[str, Any] = {
    "disable_model_saving": True,
    "max_checkpoints": 1,
    "progress_bar": False,
}


@attrs.frozen
class TrialPlan:
    """What the main process sends every process for one trial."""

    number: int
    folder: Path
    config: TrialConfig | None
    error: str | None = None
    """Why the trial cannot run (its space could not be sampled); every process records it."""
    retry_of: int | None = None
    """The trial this one retries (cut off before its end): it resumes from the checkpoint in
    that trial's folder."""


@attrs.frozen
class TrialOutcome:
    """How one trial ended, on one process, or agreed by all (:func:`agree`)."""

    kind: Kind
    value: float | None = None
    """The objective: the trial's value when complete, its last reported value when pruned."""
    error: str | None = None
    global_step: int = 0
    resumed_step: int | None = None
    seconds: float = 0.0
    objective_name: str | None = None
    """What the objective is called ("validation accuracy"), once a trial has read it."""

    @property
    def optimizer_steps(self) -> int:
        """Optimizer steps this attempt trained (a resumed trial's count starts at its
        checkpoint)."""
        return self.global_step - (self.resumed_step or 0)


@attrs.define
class TrialSetup:
    """What every trial shares: the user's function, data, metrics and Trainer options."""

    get_module_fn: Callable[..., AcceleratorModule]
    train_dataset: Dataset[Any]
    val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]]
    metrics: Sequence[Metric] | Mapping[str, Sequence[Metric]] | None
    trainer_kwargs: dict[str, Any]
    objective: Objective
    objective_name: str | None = None
    """What the objective is called, known from the first trial that checked it."""

    def trainer(self, plan: TrialPlan, reporter: TrialReporter) -> Trainer:
        """The trial's Trainer: each trial gets fresh copies of the user's callbacks, so that
        one trial's callback state (an early-stopping counter) never leaks into the next."""
        assert plan.config is not None
        options = {**TRIAL_DEFAULTS, **self.trainer_kwargs}
        callbacks = [*map(fresh_copy, options.pop("callbacks", ())), reporter]
        return Trainer(
            plan.config.hps,
            plan.folder,
            metrics=self.metrics,
            callbacks=callbacks,
            # A new trial never resumes: a folder left by an older study is set aside.
            resume=None if plan.retry_of is not None else False,
            **options,
        )


def fresh_copy(callback: Callback) -> Callback:
    """A deep copy of ``callback`` for one trial; the callback itself when it cannot be copied
    (it holds a file or a lock), with a warning: its state then carries from trial to trial."""
    try:
        return copy.deepcopy(callback)
    except (TypeError, copy.Error) as error:
        logger.warning(
            "accmt_search: %s cannot be copied for each trial (%s); every trial shares it",
            type(callback).__qualname__,
            error,
        )
        return callback


class TrialReporter(Callback):
    """Reports the objective after each evaluation; stops the fit when optuna prunes the trial.

    The objective is computed on every process from the evaluation's results, which the Trainer
    has already synchronised. The main process alone reports it to the trial and asks the pruner;
    its answer is broadcast, and every process then asks the Trainer to stop through the ordinary
    stop request, so the fit ends cleanly (``on_fit_end`` fires) and no exception reaches user
    code.
    """

    def __init__(
        self, setup: TrialSetup, link: ProcessLink, trial: optuna.Trial | None, number: int
    ) -> None:
        self.setup = setup
        self.link = link
        self.trial = trial
        self.number = number
        self.pruned_at: int | None = None
        self.last_value: float | None = None
        """The objective of the latest evaluation (a pruned trial's value when it stopped)."""
        self.resumed_step: int | None = None

    def on_fit_start(self) -> None:
        """Check the objective on the names the sanity check reported, before any training: a
        name it reads and nothing reports stops the search now (MetricNameError)."""
        reported = getattr(self.trainer, "reported_names", None)
        if self.setup.objective_name is None and reported:
            self.setup.objective_name = check_objective(self.setup.objective, reported)

    def on_resume(self) -> None:
        assert self.state is not None
        self.resumed_step = self.state.global_step

    def on_evaluation_end(self) -> None:
        assert self.state is not None
        step = self.state.evaluations_done
        results = self.state.additional_metrics
        if self.setup.objective_name is None:  # no sanity check: the first evaluation checks
            value, self.setup.objective_name = read_objective(self.setup.objective, results)
        else:
            value = objective_value(self.setup.objective(EvaluationMetrics(results)))
        self.last_value = value
        prune, error = self.link.broadcast(self._ask_optuna(value, step))
        if error is not None:
            raise StudyError(error)
        if prune:
            self.pruned_at = step
            self.request_stop(f"optuna pruned trial {self.number} at evaluation {step}")

    def _ask_optuna(self, value: float, step: int) -> tuple[bool, str | None]:
        if self.trial is None:
            return False, None
        try:
            self.trial.report(value, step)
            return bool(self.trial.should_prune()), None
        except Exception as error:  # the storage failed: every process must hear of it
            return False, f"reporting trial {self.number} to the study failed: {error!r}"


def run_trial(
    plan: TrialPlan,
    setup: TrialSetup,
    link: ProcessLink,
    trial: optuna.Trial | None,
    stopping: Callable[[], bool],
) -> TrialOutcome:
    """Train ``plan`` on this process and return how every process agrees it ended."""
    reporter = TrialReporter(setup, link, trial, plan.number)
    mine = _train(plan, setup, reporter, stopping)
    if torch.cuda.is_available():
        # The trial's Trainer and module were freed when _train returned (a finished run holds
        # no reference cycle); the allocator gives their device memory back before the next
        # trial builds its own.
        torch.cuda.empty_cache()
    return agree(link.gather(mine))


def _train(
    plan: TrialPlan, setup: TrialSetup, reporter: TrialReporter, stopping: Callable[[], bool]
) -> TrialOutcome:
    started = time.perf_counter()
    if plan.error is not None or plan.config is None:
        return TrialOutcome("failed", error=plan.error)
    if stopping():
        return TrialOutcome("interrupted")
    try:
        seed = setup.trainer_kwargs.get("seed")
        if seed is not None:
            set_seed(seed)  # the model is built the same way on every process, in every run
        module = setup.get_module_fn(**plan.config.module_kwargs)
        state = setup.trainer(plan, reporter).fit(module, setup.train_dataset, setup.val_dataset)
        value = None
        if state.finished and reporter.pruned_at is None:
            if not state.additional_metrics:
                raise StudyError(f"trial {plan.number} trained without any evaluation")
            value = objective_value(setup.objective(EvaluationMetrics(state.additional_metrics)))
    except MetricNameError as error:  # every trial would fail alike: the search's failure
        return TrialOutcome("invalid", error=str(error))
    except Exception as error:  # one configuration's failure is the trial's, not the search's
        return TrialOutcome("failed", error=f"{type(error).__name__}: {error}")
    ended = TrialOutcome(
        "complete",
        value,
        global_step=state.global_step,
        resumed_step=reporter.resumed_step,
        seconds=time.perf_counter() - started,
        objective_name=setup.objective_name,
    )
    if reporter.pruned_at is not None:
        return attrs.evolve(ended, kind="pruned", value=reporter.last_value)
    if not state.finished:
        return attrs.evolve(ended, kind="interrupted")
    if value is None or not math.isfinite(value):
        problem = f"the objective is {value} (best_metric_fn of the last evaluation)"
        return attrs.evolve(ended, kind="failed", value=None, error=problem)
    return ended


def agree(outcomes: Sequence[TrialOutcome]) -> TrialOutcome:
    """One outcome for all processes: a failure on any process fails the trial, a signal on any
    interrupts it; otherwise the main process's (pruning was already decided for all)."""
    for outcome in outcomes:
        if outcome.kind == "invalid":
            return outcome
    for index, outcome in enumerate(outcomes):
        if outcome.kind == "failed":
            where = f" (on process {index})" if index else ""
            return attrs.evolve(outcome, error=f"{outcome.error}{where}")
    main = outcomes[0]
    if any(outcome.kind == "interrupted" for outcome in outcomes):
        return attrs.evolve(main, kind="interrupted")
    return main


def remove_checkpoints(folder: Path) -> None:
    """A trial that ended no longer needs its checkpoints (only a cut-off trial resumes)."""
    shutil.rmtree(folder / "checkpoints", ignore_errors=True)
