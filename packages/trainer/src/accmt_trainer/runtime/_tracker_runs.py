"""Tracker runs that go on across resumes: MLflow's and W&B's run ids, kept in each checkpoint
and handed back to the tracker when the run resumes, so that a resumed fit writes into the run
it started instead of a new one.

Each backend is told to continue in its own terms:

- MLflow (``run_id``): MLflow keeps every point it was given and cannot remove one, so the points
  a killed run logged after its last checkpoint stay. The resumed fit does not log those steps
  of those values again (:attr:`TrackerRuns.held`): each value's steps go on from the last one
  the run holds, each once. On an exact resume the values it skips are the ones it holds.
- W&B (``resume_from="<id>?_step=<checkpoint's step>"``): W&B rewinds the run to the checkpoint's
  step (it keeps the steps up to it and the run goes on from the next), so what the killed run
  logged after its checkpoint is replaced by what the resumed fit logs. Offline, the rewind is
  recorded in the run's files and applied by ``wandb sync``. A user's own ``resume`` (for a
  server without rewind, a preview feature of W&B's) continues the run by ``id`` instead.

TensorBoard keeps one run per folder by itself (``purge_step``: ``_trackers``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._errors import TrainerConfigError

RESUMABLE = ("mlflow", "wandb")
"""The trackers whose run a resumed fit continues by its id."""
_W_AND_B_RESUMES = ("resume", "resume_from", "fork_from")


@attrs.frozen
class TrackerRuns:
    """The tracker runs one fit writes into."""

    ids: dict[str, str] = attrs.field(factory=dict)
    """Each resumable tracker's run id, by tracker name: what a checkpoint keeps."""
    held: dict[str, dict[str, int]] = attrs.field(factory=dict)
    """By tracker name, each value's last step that its run already held when this fit started
    (MLflow's, on a resume): those steps of that value are not logged again."""

    def unsent(self, tracker: str, values: Mapping[str, Any], step: int | None) -> dict[str, Any]:
        """The ``values`` at ``step`` that ``tracker``'s run does not hold yet."""
        held = self.held.get(tracker)
        if not held or step is None:
            return dict(values)
        return {name: value for name, value in values.items() if step > held.get(name, -1)}


def resume_arguments(
    tracker: str, run_id: str, checkpoint_step: int, given: Mapping[str, Any]
) -> dict[str, Any]:
    """The arguments that make ``tracker`` continue the run ``run_id`` after the step
    ``checkpoint_step``, under the user's own arguments ``given`` (which win)."""
    if tracker == "mlflow":
        return {"run_id": run_id, **given}
    if tracker == "wandb":
        if any(key in given for key in _W_AND_B_RESUMES):
            return {"id": run_id, **given}  # the user's way of resuming, into the same run
        return {"resume_from": f"{run_id}?_step={checkpoint_step}", **given}
    return dict(given)


def run_id_of(tracker: Any) -> str | None:
    """The id of the run a started Accelerate tracker writes into, where it resumes by one."""
    if tracker.name == "mlflow":
        return str(tracker.active_run.info.run_id)
    if tracker.name == "wandb":
        return str(tracker.run.id)
    return None


def held_steps(tracker: Any) -> dict[str, int]:
    """Each value's last step in the run that ``tracker`` (MLflow's) continues."""
    if tracker.name != "mlflow":
        return {}
    from mlflow import MlflowClient

    client, run_id = MlflowClient(), tracker.active_run.info.run_id
    held: dict[str, int] = {}
    for name in client.get_run(run_id).data.metrics:
        steps = [metric.step for metric in client.get_metric_history(run_id, name)]
        if steps:
            held[name] = max(steps)
    return held


def resume_refused(continued: Mapping[str, str], error: Exception) -> TrainerConfigError:
    """The error of a resumed fit whose trackers cannot continue the checkpoint's runs."""
    runs = ", ".join(f"{tracker} run {run_id!r}" for tracker, run_id in continued.items())
    return TrainerConfigError(
        f"log_with: the checkpoint's {runs} cannot be continued ({type(error).__name__}: "
        f"{error}). Resume with the tracking store that holds it (MLflow: MLFLOW_TRACKING_URI), "
        "or name the run to write into with tracker_init_kwargs={tracker: {...}}"
    )
