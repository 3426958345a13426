"""What the user writes: the model and its steps. The Trainer does the rest."""

from __future__ import annotations

import contextlib
import importlib
import os
import weakref
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import torch

from ._errors import TrainerConfigError

if TYPE_CHECKING:
    from accelerate import Accelerator
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler
    from torch.utils.data import DataLoader, Dataset

    from accmt_state import TrainingState


class LogValues(Protocol):
    """Sends values to the run's trackers at ``step`` (the current global step when None)."""

    def __call__(self, values: Mapping[str, float], step: int | None = None) -> None: ...


class TrainerProtocol(Protocol):
    """What a module (``module.trainer``), a callback (``callback.trainer``) and the parts below
    the package's root may call on the Trainer running them. The Trainer is built on them, so
    they name this protocol, never the Trainer."""

    @property
    def state(self) -> TrainingState: ...
    @property
    def should_stop(self) -> bool: ...
    def request_stop(self, reason: str) -> None: ...
    def log(self, values: Mapping[str, float], step: int | None = None) -> None: ...
    def log_artifact(self, path: str | os.PathLike[str]) -> None: ...


class Stepper(Protocol):
    """The steps of the running fit's one optimizer-step owner (see ``RunHandle``)."""

    def backward(self, loss: torch.Tensor) -> None: ...
    def step_optimizer(self, optimizer: Optimizer | None) -> None: ...
    def step_scheduler(self, scheduler: LRScheduler | None) -> None: ...
    def zero_grad(self, optimizer: Optimizer | None) -> None: ...


@attrs.frozen
class RunHandle:
    """What a bound module reaches of the run it is in (``module.run_handle``): the fit's
    optimizer step (backward, the optimizer and scheduler steps, zeroing: one owner decides for
    every kind of module whether the optimizer stepped) and the run's trackers (``log``).
    ``Trainer.evaluate`` and ``predict`` bind a handle without steps."""

    stepper: Stepper | None
    log: LogValues

    def steps(self) -> Stepper:
        if self.stepper is None:
            raise RuntimeError("the optimizer step exists only while Trainer.fit runs")
        return self.stepper


class AcceleratorModule:
    """Subclass this, set ``self.model``, and override :meth:`training_step`.

    Optionally set ``self.teacher`` (a model kept in eval mode, never updated, moved to the
    device) and override :meth:`validation_step`, :meth:`get_optimizer`,
    :meth:`get_scheduler`, :meth:`get_train_dataloader`, :meth:`get_validation_dataloader`,
    :meth:`collate_fn`, :meth:`before_eval` and :meth:`after_eval`; for
    :meth:`Trainer.evaluate` and :meth:`Trainer.predict`, :meth:`test_step` and
    :meth:`predict_step`. While :meth:`Trainer.fit`, ``evaluate`` or ``predict`` runs,
    ``self.accelerator``, ``self.state``, ``self.trainer`` (the Trainer running it) and
    ``self.run_handle`` (:class:`RunHandle`) are bound.

    :meth:`freeze` and :meth:`unfreeze` stop and restart training a part of the model, and
    :meth:`from_hf` makes a module around a transformers model.
    """

    model: torch.nn.Module
    teacher: torch.nn.Module | None = None
    accelerator: Accelerator
    state: TrainingState
    trainer: TrainerProtocol
    """The Trainer running this module."""
    run_handle: RunHandle

    @property
    def device(self) -> torch.device:
        """The device the model trains on."""
        device: torch.device = self.accelerator.device
        return device

    def training_step(self, batch: Any) -> torch.Tensor:
        """Return the loss of one training batch; the Trainer does backward and the step."""
        raise NotImplementedError(f"{type(self).__name__} must override training_step(batch)")

    def validation_step(self, key: str, batch: Any) -> torch.Tensor | dict[str, Any]:
        """Evaluate one batch of the validation set named ``key``.

        Return the loss, or a dict with ``"loss"`` and, for each metric by name, the tuple of
        its ``add_batch`` arguments (or its one argument), e.g.
        ``{"loss": loss, "accuracy": (preds, labels)}``.
        """
        raise NotImplementedError(
            f"{type(self).__name__} was given validation data but does not override "
            "validation_step(key, batch)"
        )

    def test_step(self, key: str, batch: Any) -> torch.Tensor | dict[str, Any]:
        """Evaluate one batch of the set named ``key`` in :meth:`Trainer.evaluate`, returning
        what :meth:`validation_step` returns. Not overridden: evaluate calls validation_step."""
        raise NotImplementedError(f"{type(self).__name__} does not override test_step")

    def predict_step(self, batch: Any) -> Any:
        """The outputs of one batch in :meth:`Trainer.predict`: a tensor whose first dimension
        is the batch, a list with one item per sample (ragged sequences), or dicts and tuples
        of these. Runs in eval mode without gradients."""
        raise NotImplementedError(
            f"{type(self).__name__} must override predict_step(batch) to be given to predict"
        )

    def get_optimizer(self) -> Optimizer | None:
        """Return an optimizer, or None to build the one the HyperParameters name."""
        return None

    def get_scheduler(
        self, optimizer: Optimizer, num_training_steps: int, num_epochs: int
    ) -> LRScheduler | None:
        """Return a scheduler, or None to build the one the HyperParameters name.

        ``num_training_steps`` is the real number of optimizer steps of the whole run (after
        gradient accumulation and sharding across processes).
        """
        return None

    def get_train_dataloader(self, dataset: Dataset[Any]) -> DataLoader[Any] | None:
        """Return the training DataLoader, or None for the Trainer's own."""
        return None

    def get_validation_dataloader(self, dataset: Dataset[Any]) -> DataLoader[Any] | None:
        """Return a validation DataLoader, or None for the Trainer's own."""
        return None

    def collate_fn(self, batch: list[Any]) -> Any:
        """Collate samples into a batch. Not overridden: the Trainer's ``collate_fn`` option,
        else PyTorch's default."""
        raise NotImplementedError

    def before_eval(self) -> None:
        """Called before each evaluation (and the sanity check's batches), with the
        Trainer's ``module_hooks=True`` (the default). Does nothing unless overridden."""

    def after_eval(self) -> None:
        """Called after each evaluation (and the sanity check's batches), with the
        Trainer's ``module_hooks=True`` (the default). Does nothing unless overridden."""

    def log(self, values: dict[str, float], step: int | None = None) -> None:
        """Log extra values to the trackers (at the current global step by default)."""
        self.run_handle.log(values, step)

    # Helpers for the user's steps.

    def freeze(self, module: torch.nn.Module) -> None:
        """Stop training every parameter of ``module`` (``requires_grad = False``)."""
        module.requires_grad_(False)

    def unfreeze(self, module: torch.nn.Module) -> None:
        """Train every parameter of ``module`` again (``requires_grad = True``)."""
        module.requires_grad_(True)

    @classmethod
    def from_hf(
        cls, path: str | os.PathLike[str], type: str | Any | None = None, **kwargs: Any
    ) -> AcceleratorModule:
        """A module around a HuggingFace transformers model.

        ``type.from_pretrained(path, **kwargs)`` becomes ``self.model``; ``type`` is a
        transformers class or its name (``"AutoModelForSequenceClassification"``), by default
        ``AutoModel``. A name is looked up in transformers' own namespace only
        (``transformers.<name>``), never imported from elsewhere. Training and validation steps
        return ``self.model(**batch).loss``. Needs transformers: ``pip install 'accmt[hf]'``.
        """
        transformers = _transformers()
        model_class: Any = transformers.AutoModel if type is None else type
        if isinstance(type, str):
            model_class = _model_class(transformers, type)
        return _PretrainedModule(model_class.from_pretrained(path, **kwargs))


class ExtendedAcceleratorModule(AcceleratorModule):
    """An AcceleratorModule whose :meth:`training_step` does its own backward and steps.

    For GANs and several optimizers. Call :meth:`backward`, :meth:`step_optimizer`,
    :meth:`step_scheduler` and :meth:`zero_grad` from ``training_step``: they go through the
    run's :class:`RunHandle` to its one optimizer-step owner, as the Trainer's public
    :meth:`Trainer.backward`, :meth:`Trainer.step_optimizer`, ... do (one owner decides, for
    both kinds of module, whether the optimizer stepped). Gradient accumulation still works:
    on accumulation steps the optimizer and scheduler steps do nothing. ``training_step`` may
    return a loss for logging, or None.
    """

    def backward(self, loss: torch.Tensor) -> None:
        """Backward through Accelerate (scales the loss for accumulation and mixed precision)."""
        self.run_handle.steps().backward(loss)

    def step_optimizer(self, optimizer: Optimizer | None = None) -> None:
        """Clip gradients if asked, then step ``optimizer`` (the Trainer's by default)."""
        self.run_handle.steps().step_optimizer(optimizer)

    def step_scheduler(self, scheduler: LRScheduler | None = None) -> None:
        """Step ``scheduler`` (the Trainer's by default) when the optimizer stepped."""
        self.run_handle.steps().step_scheduler(scheduler)

    def zero_grad(self, optimizer: Optimizer | None = None) -> None:
        """Zero the gradients of ``optimizer`` (the Trainer's by default)."""
        self.run_handle.steps().zero_grad(optimizer)

    def step(self) -> None:
        """Step the optimizer, then the scheduler (when there is one): the usual pair of
        :meth:`step_optimizer` and :meth:`step_scheduler` in one call."""
        self.step_optimizer()
        self.step_scheduler()


def _transformers() -> Any:
    try:
        return importlib.import_module("transformers")
    except ImportError as error:
        raise ImportError(
            "AcceleratorModule.from_hf needs transformers, an optional extra: "
            "pip install 'accmt[hf]' (or 'accmt-trainer[hf]')"
        ) from error


def _model_class(transformers: Any, name: str) -> Any:
    """The class ``transformers.<name>``: a public name of transformers' namespace that has
    ``from_pretrained`` (not a function, a module or a private name)."""
    public = name.isidentifier() and not name.startswith("_")
    found = getattr(transformers, name, None) if public else None
    if not (isinstance(found, type) and hasattr(found, "from_pretrained")):
        raise ValueError(
            f"AcceleratorModule.from_hf(type={name!r}): transformers has no such class with "
            "from_pretrained (expected a name such as 'AutoModelForCausalLM')"
        )
    return found


class _PretrainedModule(AcceleratorModule):
    """What :meth:`AcceleratorModule.from_hf` returns: the model's own loss, for both steps."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model

    def training_step(self, batch: Any) -> torch.Tensor:
        loss: torch.Tensor = self.model(**batch).loss
        return loss

    def validation_step(self, key: str, batch: Any) -> torch.Tensor:
        loss: torch.Tensor = self.model(**batch).loss
        return loss


def overrides(module: AcceleratorModule, method: str) -> bool:
    """Whether the user's class overrides ``method`` of AcceleratorModule."""
    return getattr(type(module), method) is not getattr(AcceleratorModule, method)


def check_module(module: AcceleratorModule, call: str = "Trainer.fit") -> None:
    """The module of ``call``: an AcceleratorModule whose ``model`` is set."""
    if not isinstance(module, AcceleratorModule):
        raise TypeError(f"{call}: module must be an AcceleratorModule, got {module!r}")
    if not isinstance(getattr(module, "model", None), torch.nn.Module):
        raise TrainerConfigError(
            f"{call}: {type(module).__name__}.model must be set to a torch.nn.Module first"
        )


def bind_module(
    module: AcceleratorModule, accelerator: Accelerator, state: TrainingState, handle: RunHandle
) -> None:
    """Bind ``module`` to the run it is in (its Trainer is bound by the Trainer itself)."""
    module.accelerator, module.state, module.run_handle = accelerator, state, handle


class _Logs(Protocol):
    def log(self, values: Mapping[str, float], step: int | None = None) -> None: ...


def weak_log(owner: _Logs) -> LogValues:
    """``owner.log``, looked up at each call (a subclass or a script may replace it) and held
    weakly, so that the parts of a finished run keep no Trainer alive."""
    reference = weakref.ref(owner)

    def log(values: Mapping[str, float], step: int | None = None) -> None:
        found = reference()
        if found is not None:
            found.log(values, step)

    return log


_UNSET = object()


@contextlib.contextmanager
def trainer_bound(module: AcceleratorModule, trainer: TrainerProtocol) -> Iterator[None]:
    """``module.trainer`` is ``trainer`` while the block runs, and as it was found after: a
    finished run's module holds no Trainer (which holds the run), so both are freed when the
    script drops them."""
    found: Any = getattr(module, "trainer", _UNSET)
    module.trainer = trainer
    try:
        yield
    finally:
        if found is _UNSET:
            del module.trainer
        else:
            module.trainer = found
