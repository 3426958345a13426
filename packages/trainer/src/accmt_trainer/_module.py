"""What the user writes: the model and its steps. The Trainer does the rest."""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from accelerate import Accelerator
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler
    from torch.utils.data import DataLoader, Dataset

    from accmt_state import TrainingState

    from ._trainer import Trainer


class AcceleratorModule:
    """Subclass this, set ``self.model``, and override :meth:`training_step`.

    Optionally set ``self.teacher`` (a model kept in eval mode, never updated, moved to the
    device) and override :meth:`validation_step`, :meth:`get_optimizer`,
    :meth:`get_scheduler`, :meth:`get_train_dataloader`, :meth:`get_validation_dataloader`,
    :meth:`collate_fn`, :meth:`before_eval` and :meth:`after_eval`; for
    :meth:`Trainer.evaluate` and :meth:`Trainer.predict`, :meth:`test_step` and
    :meth:`predict_step`. While :meth:`Trainer.fit`
    runs, ``self.accelerator``, ``self.state`` and ``self.trainer`` are bound.

    :meth:`freeze` and :meth:`unfreeze` stop and restart training a part of the model, and
    :meth:`from_hf` makes a module around a transformers model.
    """

    model: torch.nn.Module
    teacher: torch.nn.Module | None = None
    accelerator: Accelerator
    state: TrainingState
    trainer: Trainer

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
        self.trainer.log(values, step=step)

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
    :meth:`step_scheduler` and :meth:`zero_grad` from ``training_step``: they are the Trainer's
    public :meth:`Trainer.backward`, :meth:`Trainer.step_optimizer`, ... (one owner decides,
    for both kinds of module, whether the optimizer stepped). Gradient accumulation still works:
    on accumulation steps the optimizer and scheduler steps do nothing. ``training_step`` may
    return a loss for logging, or None.
    """

    def backward(self, loss: torch.Tensor) -> None:
        """Backward through Accelerate (scales the loss for accumulation and mixed precision)."""
        self.trainer.backward(loss)

    def step_optimizer(self, optimizer: Optimizer | None = None) -> None:
        """Clip gradients if asked, then step ``optimizer`` (the Trainer's by default)."""
        self.trainer.step_optimizer(optimizer)

    def step_scheduler(self, scheduler: LRScheduler | None = None) -> None:
        """Step ``scheduler`` (the Trainer's by default) when the optimizer stepped."""
        self.trainer.step_scheduler(scheduler)

    def zero_grad(self, optimizer: Optimizer | None = None) -> None:
        """Zero the gradients of ``optimizer`` (the Trainer's by default)."""
        self.trainer.zero_grad(optimizer)

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
