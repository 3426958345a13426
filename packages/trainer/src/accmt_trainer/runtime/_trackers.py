"""Accelerate's trackers: choosing them, starting them with the run's configuration, and
giving them artifacts (files and folders)."""

from __future__ import annotations

import importlib.util
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

import attrs
from accelerate import Accelerator

from .._errors import ArtifactNotFoundError, TrainerConfigError
from ..config import Monitor, check_mapping, log_every_value
from ..console import logger
from ._tracker_runs import (
    RESUMABLE,
    TrackerRuns,
    held_steps,
    resume_arguments,
    resume_refused,
    run_id_of,
)

LogWith = str | list[str] | None


def resolve_trackers(log_with: LogWith) -> list[str] | None:
    """``"auto"`` means TensorBoard when it is installed, else no tracker."""
    if log_with == "auto":
        installed = importlib.util.find_spec("tensorboard") or importlib.util.find_spec(
            "tensorboardX"
        )
        return ["tensorboard"] if installed else None
    if log_with is None or log_with == []:
        return None
    return [log_with] if isinstance(log_with, str) else list(log_with)


def _log_every(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    log_every_value(value)


def _tracker_config(value: Any) -> dict[str, Any]:
    return check_mapping("additional_tracker_config", value)


def _empty_if_none(value: Any) -> Any:
    return {} if value is None else value


def _monitor(value: Monitor | None) -> Monitor:
    return Monitor() if value is None else value


@attrs.frozen(kw_only=True)
class LoggingOptions:
    """The Trainer's options of logging, trackers and the progress bar, checked when the
    Trainer is made."""

    model_path: Path = attrs.field(converter=Path)
    """The run's folder (the Trainer's ``model_path``), which names the defaults below."""
    track_name: str = attrs.field(default=cast(str, None))
    """The run's name in its trackers; None: ``model_path``'s name."""
    logging_dir: Path = attrs.field(default=cast(Path, None))
    """Where the trackers write (TensorBoard's events); None: ``model_path/logs``."""
    log_with: list[str] | None = attrs.field(
        default=cast(list[str], "auto"), converter=resolve_trackers
    )
    """Accelerate's trackers: a name, a list, ``"auto"`` (TensorBoard when installed) or None."""
    log_every: int | Literal["epoch"] = attrs.field(default=1, validator=_log_every)
    """Log the training values every N optimizer steps, or once per epoch."""
    additional_tracker_config: dict[str, Any] = attrs.field(default=None, converter=_tracker_config)
    """Added to the hyperparameters each tracker is started with."""
    tracker_init_kwargs: dict[str, Any] = attrs.field(default=None, converter=_empty_if_none)
    """Each tracker's own arguments, by tracker name."""
    monitor: Monitor = attrs.field(default=None, converter=_monitor)
    """What is logged; None: ``Monitor()``."""
    progress_bar: bool = True
    """Show a progress bar on the main process when stderr is a terminal."""

    def __attrs_post_init__(self) -> None:
        # The defaults named by model_path, resolved once: readers see the folder and name.
        name = self.model_path.name if self.track_name is None else self.track_name
        folder = self.model_path / "logs" if self.logging_dir is None else Path(self.logging_dir)
        object.__setattr__(self, "track_name", name)
        object.__setattr__(self, "logging_dir", folder)

    @tracker_init_kwargs.validator
    def _check_tracker_kwargs(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        check_tracker_kwargs(value, self.log_with)

    @property
    def artifacts(self) -> Path:
        """Where artifacts go when no tracker stores them."""
        return self.logging_dir / self.track_name / "artifacts"

    @property
    def profiles(self) -> Path:
        """Where ``profile_steps`` writes each process's trace."""
        return self.logging_dir / self.track_name / "profile"


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested configuration as flat scalar keys (``optimizer_kwargs.lr``), as trackers need."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, (bool, int, float, str)):
            flat[name] = value
        else:
            flat[name] = str(value)
    return flat


def check_tracker_kwargs(init_kwargs: Any, log_with: list[str] | None) -> dict[str, Any]:
    """``tracker_init_kwargs``: ``{tracker name: its arguments}``. Arguments for a tracker the
    run does not use are left unused, with a warning."""
    checked = check_mapping("tracker_init_kwargs", init_kwargs)
    for name, arguments in checked.items():
        if not isinstance(arguments, Mapping):
            raise TrainerConfigError(
                f"Trainer(tracker_init_kwargs=...): expected {{tracker name: {{argument: "
                f"value}}}}, got {name!r}: {arguments!r}"
            )
    unused = sorted(set(checked) - set(log_with or []))
    if unused:
        warnings.warn(
            f"Trainer(tracker_init_kwargs=...): the run has no tracker named "
            f"{', '.join(map(repr, unused))} (log_with={log_with!r}); its arguments are unused",
            UserWarning,
            stacklevel=6,  # past the validator, attrs' __init__ and the Trainer's checks
        )
    return checked


def start_trackers(
    accelerator: Accelerator,
    options: LoggingOptions,
    hyperparameters: Mapping[str, Any],
    *,
    first_step: int | None = None,
    continued: Mapping[str, str] | None = None,
) -> TrackerRuns:
    """Start the trackers ``options`` names (none when it logs nowhere) with the run's
    configuration: its ``hyperparameters`` and ``additional_tracker_config``;
    ``tracker_init_kwargs`` maps a tracker's name to its own arguments
    (``{"mlflow": {"run_name": ...}}``). Returns the runs they write into (main process).

    TensorBoard keeps one run across a fit's starts, in ``logging_dir/<name>``: each start adds
    an events file there, and the hyperparameters go into that run's own events, not into a
    sub-run per start as Accelerate's would: as HParams' session start (TensorBoard's HParams
    tab shows the first start's) and, from a fit, as the text ``hparams`` at ``first_step``
    (each start's). ``first_step``, the first step a fit logs, hides what an earlier start
    logged from there on (a run killed after its last checkpoint logged steps that its resume
    logs again).

    MLflow and W&B continue the runs ``continued`` names (``{tracker: run id}``, from the
    checkpoint a fit resumes), whose hyperparameters were logged when they started: see
    ``_tracker_runs``."""
    if not options.log_with or not accelerator.is_main_process:
        return TrackerRuns(ids=dict(continued or {}))
    arguments = {tracker: dict(values) for tracker, values in options.tracker_init_kwargs.items()}
    if first_step is not None:
        arguments["tensorboard"] = {"purge_step": first_step, **arguments.get("tensorboard", {})}
    going_on = {
        tracker: run_id
        for tracker, run_id in (continued or {}).items()
        if tracker in options.log_with and tracker in RESUMABLE
    }
    checkpoint_step = max((first_step or 0) - 1, 0)
    for tracker, run_id in going_on.items():
        given = arguments.get(tracker, {})
        arguments[tracker] = resume_arguments(tracker, run_id, checkpoint_step, given)
    try:
        accelerator.init_trackers(options.track_name, config=None, init_kwargs=arguments)
    except Exception as error:
        if going_on:
            raise resume_refused(going_on, error) from error
        raise
    flat = flatten({**hyperparameters, **options.additional_tracker_config})
    ids, held = dict(continued or {}), {}
    for tracker in accelerator.trackers:
        if tracker.name == "tensorboard":
            _tensorboard_hparams(tracker.tracker, flat, first_step)
        elif tracker.name not in going_on:
            tracker.store_init_configuration(flat)
        started = run_id_of(tracker)
        if started is not None:
            ids[tracker.name] = started
        if tracker.name in going_on:
            held[tracker.name] = held_steps(tracker)
    return TrackerRuns(ids=ids, held=held)


def send(
    accelerator: Accelerator, runs: TrackerRuns, values: Mapping[str, Any], step: int | None
) -> None:
    """Log ``values`` at ``step`` to each started tracker (main process), but what its run
    already holds (``TrackerRuns.unsent``)."""
    if not accelerator.is_main_process:
        return
    for tracker in accelerator.trackers:
        unsent = runs.unsent(tracker.name, values, step)
        if unsent:
            tracker.log(unsent, step=step)


def _tensorboard_hparams(writer: Any, hparams: Mapping[str, Any], step: int | None) -> None:
    """The hyperparameters as HParams' session start, in the writer's own run: TensorBoard's
    HParams tab then lists this run with its hyperparameters and every scalar it logged. With
    ``step``, also as a table in the text ``hparams`` at that step."""
    # Accelerate's tracker writes with torch's SummaryWriter, else with tensorboardX's.
    tensorboard_x = type(writer).__module__.startswith("tensorboardX")
    module = "tensorboardX.summary" if tensorboard_x else "torch.utils.tensorboard.summary"
    _, session_start, _ = importlib.import_module(module).hparams(dict(hparams), {})
    writer.file_writer.add_summary(session_start)
    if step is not None:
        rows = "".join(f"\n| {name} | {value} |" for name, value in sorted(hparams.items()))
        writer.add_text("hparams", f"| name | value |\n| --- | --- |{rows}", global_step=step)
    writer.flush()


def log_artifact(accelerator: Accelerator | None, path: Path, copy_to: Path) -> None:
    """Give the file or folder ``path`` to each started tracker that stores artifacts (MLflow,
    through Accelerate); when none does, copy it into ``copy_to``. Trackers run on the main
    process only, so the other processes only check that ``path`` exists."""
    if not path.exists():
        raise ArtifactNotFoundError(f"log_artifact: {path} does not exist")
    if accelerator is not None and not accelerator.is_main_process:
        return
    if accelerator is None or not accelerator.trackers:
        warnings.warn(
            f"log_artifact({str(path)!r}): no tracker is running (log_with=None, or outside "
            "fit); nothing was logged",
            UserWarning,
            stacklevel=3,
        )
        return
    method = "log_artifacts" if path.is_dir() else "log_artifact"
    storing = [tracker for tracker in accelerator.trackers if hasattr(tracker, method)]
    for tracker in storing:
        getattr(tracker, method)(str(path))
    if not storing:
        # TensorBoard and the like keep no artifacts: they go next to the run's logs.
        copy_to.mkdir(parents=True, exist_ok=True)
        target = copy_to / path.name
        if path.is_dir():
            shutil.copytree(path, target, dirs_exist_ok=True)
        else:
            shutil.copy2(path, target)
        logger.info("%s has no artifact store: %s copied to %s", method, path, target)
