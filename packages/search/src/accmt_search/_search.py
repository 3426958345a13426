"""HyperParameterSearch: a space, searched on optuna, resumable, pruned, on N processes."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from torch.utils.data import Dataset

from accmt_trainer.integration import (
    HyperParameters,
    ProcessGroupScope,
    Trainer,
    TrainerConfigError,
    check_writable,
    stop_on_signals,
)

from ._driver import Lead, Options, SearchRun
from ._errors import SearchConfigError, SearchSpaceError
from ._metrics import EvaluationMetrics, validation_loss
from ._processes import ProcessLink
from ._resolve import check_module_arguments, resolve
from ._result import SearchResult
from ._space import SearchSpace, Space, SpaceSource, read_space
from ._stop_request import StopRequest
from ._study import make_storage, open_study
from ._trial import TRIAL_DEFAULTS, TrialSetup, fresh_copy

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage

    from accmt_metrics import Metric
    from accmt_trainer.integration import AcceleratorModule

# Trainer options the search sets itself for each trial.
_OWNED = ("hps_config", "model_path", "resume")


class HyperParameterSearch:
    """Search hyperparameters with optuna, each trial a ``Trainer.fit`` in its own folder.

    ::

        search = HyperParameterSearch(get_module_fn, train_dataset, val_dataset, metrics=None,
                                      **trainer_kwargs)
        search.set_space({"epochs": 3, "optimizer": "AdamW",
                          "batch_size": {"type": "categorical", "choices": [16, 32, 64]},
                          "optimizer_kwargs.lr": {"type": "float", "low": 1e-4, "high": 1e-2,
                                                  "log": True}})
        result = search.optimize(best_metric_fn=None, direction="minimize", n_trials=10)

    - ``get_module_fn``: builds a fresh :class:`AcceleratorModule` for each trial. It may take
      keyword arguments, which a space searches as ``module.<name>``.
    - ``train_dataset`` / ``val_dataset``: the data of every trial; ``val_dataset`` is a
      dataset or a dict of named datasets.
    - ``metrics``: the Trainer's ``metrics`` (what ``best_metric_fn`` can read besides the loss).
    - ``output_dir``: the search's folder: the study (``study.db``, unless ``optimize`` is given
      another storage), ``trial_<number>/`` for each trial (its logs; its checkpoints while it
      runs), ``trials.csv``, ``best_hps.yaml`` and ``plots/``.
    - ``trainer_kwargs``: options of every trial's :class:`Trainer` (``seed``, ``log_with``,
      ``checkpoint_every``, ``evaluate_every_n_steps``, ``callbacks``, ...). Unless given,
      trials save no best models, keep one checkpoint and show no progress bar of their own.
      ``seed`` also seeds the default sampler and each trial's model construction.

    The space is given by :meth:`set_space` (a dict, a YAML file or a function of the trial).
    """

    def __init__(
        self,
        get_module_fn: Callable[..., AcceleratorModule],
        train_dataset: Dataset[Any],
        val_dataset: Dataset[Any] | Mapping[str, Dataset[Any]],
        metrics: Sequence[Metric] | Mapping[str, Sequence[Metric]] | None = None,
        *,
        output_dir: str | os.PathLike[str] = "hp_search",
        **trainer_kwargs: Any,
    ) -> None:
        owned = [name for name in _OWNED if name in trainer_kwargs]
        if owned:
            raise SearchConfigError(
                f"HyperParameterSearch({owned[0]}=...): the search sets it for each trial (each "
                "trains in output_dir/trial_<number>, a retried trial resumes); pass output_dir"
            )
        if not callable(get_module_fn):
            raise SearchConfigError(
                f"HyperParameterSearch(get_module_fn=...): expected a function that builds an "
                f"AcceleratorModule, got {get_module_fn!r}"
            )
        self.get_module_fn = get_module_fn
        self.train_dataset = train_dataset
        self.val_dataset = validation_sets(val_dataset)
        self.metrics = metrics
        self.output_dir = Path(output_dir)
        self.trainer_kwargs = dict(trainer_kwargs)
        self.space: Space | None = None
        self.study: optuna.Study | None = None
        """The optuna study of the last ``optimize`` (main process only; None elsewhere)."""
        self._check_trainer_options()

    def _check_trainer_options(self) -> None:
        """Build one Trainer from the options now, so that a bad one fails before any trial."""
        try:
            options = {**TRIAL_DEFAULTS, **self.trainer_kwargs}
            callbacks = [fresh_copy(callback) for callback in options.pop("callbacks", ())]
            Trainer(
                HyperParameters(),
                self.output_dir,
                metrics=self.metrics,
                callbacks=callbacks,
                **options,
            )
        except TypeError as error:
            raise SearchConfigError(f"HyperParameterSearch(**trainer_kwargs): {error}") from None

    # ------------------------------------------------------------------------- the space

    def set_space(self, space: SpaceSource) -> None:
        """Set the space from a dict, a YAML file (its ``search:`` section) or a function.

        Names: any HyperParameters field (``epochs``, ``batch_size``, ``optimizer``, ...),
        ``optimizer_kwargs.<arg>``, ``scheduler_kwargs.<arg>``, and ``module.<arg>`` for a
        keyword argument of ``get_module_fn``; what the space does not name is HyperParameters'
        default. A searched value is ``{"type": "float", "low", "high", "log", "step"}``,
        ``{"type": "int", "low", "high", "step", "log"}`` or ``{"type": "categorical",
        "choices"}`` (a list, or a mapping from label to value); any other value is fixed. A
        function ``space(trial)`` suggests on the optuna trial (conditional spaces) and returns
        ``{name: value}`` with the same names. A dict or YAML space is checked now (every choice
        and both ends of every range must make a valid HyperParameters); errors name the key
        and the file.
        """
        self._use(read_space(space))

    def _use(self, space: Space) -> None:
        if isinstance(space, SearchSpace):
            if not space.searched:
                raise SearchSpaceError(
                    "",
                    "no parameter is searched: give at least one a range or a choice",
                    space.file,
                )
            check_module_arguments(self.get_module_fn, space.entries, space.file)
            for assignment in space.probes():
                resolve(assignment, space.file)
        self.space = space

    # ------------------------------------------------------------------------ the search

    def optimize(
        self,
        best_metric_fn: Callable[[EvaluationMetrics], float] | None = None,
        direction: str = "minimize",
        n_trials: int = 10,
        *,
        storage: str | BaseStorage | None = None,
        study_name: str = "accmt-search",
        sampler: optuna.samplers.BaseSampler | None = None,
        pruner: optuna.pruners.BasePruner | None = None,
        heartbeat_interval: int | None = 10,
        grace_period: int | None = None,
        keep_checkpoints: bool = False,
        plots: bool = True,
        progress_bar: bool = True,
    ) -> SearchResult:
        """Run the study until ``n_trials`` trials have finished, and return the best.

        - ``best_metric_fn(metrics)``: the objective, from an evaluation's results
          (:class:`EvaluationMetrics`: ``{"validation": {"loss": ..., "accuracy": ...}}``, a
          dict of validation sets' results). Default: the validation loss. It is
          reported to optuna after every evaluation (for pruning); a trial's value is that of
          its last evaluation.
        - ``direction``: ``"minimize"`` or ``"maximize"``.
        - ``n_trials``: trials the study should hold, finished (complete, pruned, or failed by
          their own error), counting those of earlier runs and of other workers. A study that
          already has them returns at once; a killed run continues where it was.
        - ``storage``: None for SQLite in ``output_dir``, or an RDB URL
          (``"postgresql://user@host/db"``; install ``accmt-search[postgresql]``) that workers on
          several machines share, or an optuna storage object. ``study_name`` names the study.
        - ``sampler``: any optuna sampler (default: TPE seeded by the Trainer's ``seed``);
          ``pruner``: any optuna pruner (default: :func:`optuna.pruners.MedianPruner` after 3
          trials, from the second evaluation).
        - ``heartbeat_interval`` / ``grace_period`` (seconds): a running trial whose process
          sends no heartbeat for ``grace_period`` (default twice the interval) is failed and run
          again with its parameters, resuming from its checkpoint. None disables it (then no
          worker waits for trials running elsewhere, and one that dies is not retried).
        - ``keep_checkpoints``: keep each ended trial's checkpoints (by default only a trial cut
          off before its end keeps them, to resume).
        - ``plots``, ``progress_bar``: PNG plots in ``output_dir/plots``; a bar over trials
          (on a terminal), above which log lines are written while it is shown.

        It logs one line per trial (INFO on the ``accmt_search`` logger, in place of optuna's)
        and a table of the best trials at the end. Before the first trial it checks that
        ``output_dir`` can be written, and ``best_metric_fn`` against the names the first
        trial's sanity check reports: a name that nothing reports stops the search
        (:class:`SearchConfigError`) without counting that trial.

        On N processes (``accelerate launch``, ``torchrun``) every process calls ``optimize``;
        the main process alone talks to the study and every process trains the same trial. A
        SIGINT or SIGTERM ends the current trial cleanly (it is queued to run again) and returns
        the best so far with ``interrupted=True``.
        """
        if self.space is None:
            raise SearchConfigError("optimize: no search space; call set_space(...) first")
        direction = _direction(direction)
        if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1:
            raise SearchConfigError(
                f"optimize(n_trials=...): expected an int >= 1, got {n_trials!r}"
            )
        writable(self.output_dir)
        setup = TrialSetup(
            self.get_module_fn,
            self.train_dataset,
            self.val_dataset,
            self.metrics,
            self.trainer_kwargs,
            best_metric_fn or validation_loss,
        )
        poll = float(heartbeat_interval) if heartbeat_interval else 5.0
        options = Options(n_trials, self.output_dir, keep_checkpoints, plots, progress_bar, poll)
        stop_request = StopRequest()
        # A process group the search made is gone after it; the user's is left alone.
        with ProcessGroupScope(), stop_on_signals(stop_request.request, True):
            link = ProcessLink.start(self.trainer_kwargs.get("cpu"))
            run = SearchRun(link, setup, self.space, options, stop_request)
            if not link.is_main:
                return run.follow()
            try:
                store = make_storage(storage, self.output_dir, heartbeat_interval, grace_period)
                seed = self.trainer_kwargs.get("seed")
                self.study = open_study(store, study_name, direction, sampler, pruner, seed)
            except BaseException as error:
                link.broadcast(("error", f"{type(error).__name__}: {error}"))
                raise
            return Lead(run, self.study, store)()


def _direction(direction: str) -> Literal["minimize", "maximize"]:
    lowered = direction.lower() if isinstance(direction, str) else direction
    if lowered not in ("minimize", "maximize"):
        raise SearchConfigError(
            f"optimize(direction=...): expected 'minimize' or 'maximize', got {direction!r}"
        )
    return "maximize" if lowered == "maximize" else "minimize"


def writable(folder: Path) -> None:
    """``output_dir`` can be made and written to by this process, before any trial (each writes
    its folder there): the Trainer's own check, as a SearchConfigError."""
    try:
        check_writable([("output_dir", folder)], owner="HyperParameterSearch")
    except TrainerConfigError as error:
        advice = "pass an output_dir that this process can write to"
        raise SearchConfigError(f"{error}; {advice}") from error.__cause__


def validation_sets(val_dataset: Any) -> Dataset[Any] | Mapping[str, Dataset[Any]]:
    """The validation data as the Trainer takes it: a dataset or a dict of named datasets."""
    if val_dataset is None:
        raise SearchConfigError(
            "HyperParameterSearch(val_dataset=...): the search measures each trial on "
            "validation data; pass a dataset"
        )
    if (
        isinstance(val_dataset, (list, tuple))
        and val_dataset
        and all(isinstance(item, Dataset) for item in val_dataset)
    ):
        raise SearchConfigError(
            "HyperParameterSearch(val_dataset=[...]): a list of datasets is a former spelling: "
            "pass a dict of named datasets ({'0': ..., '1': ...}). The accmt package's "
            "HyperParameterSearch (from accmt import HyperParameterSearch) still accepts it."
        )
    data: Dataset[Any] | Mapping[str, Dataset[Any]] = val_dataset
    return data
