"""An exponential moving average of the weights (``Trainer(ema_decay=d)``), as Composer,
Keras's ``use_ema``, timm and Lightning's ``WeightAveraging`` keep one.

It starts from the initial weights; after every optimizer step that stepped, each parameter's
average becomes ``d * average + (1 - d) * weight`` (one fused update over every parameter).
Validation in fit and the best models it saves use the averages (the model's buffers as they
are); training goes on with the raw weights. It costs one more copy of the parameters, kept
where they are, and is saved with every checkpoint, so a resume is bit-identical.

It averages what trains: the parameters whose ``requires_grad`` is True when the fit starts.
A frozen one's average would be itself; it is neither kept nor saved (a LoRA run's average is
the adapters').
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from .._errors import TrainerConfigError
from ..runtime import own_model


def check_decay(name: str, value: Any) -> None:
    """``ema_decay``: None (no average), or a number in [0, 1)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise TrainerConfigError(
            f"Trainer({name}={value!r}): expected None or a number in [0, 1), the weight the "
            "average keeps at each step (0.999 is usual; 1 would never move)"
        )


class WeightAverage:
    """The average of ``model``'s trainable parameters (the model inside Accelerate's
    wrappers, whose parameters stay the same objects when it is prepared). :meth:`start` takes
    the weights it starts from, once the model is where it trains."""

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        trained = [(n, p) for n, p in own_model(model).named_parameters() if p.requires_grad]
        self.names = [name for name, _ in trained]
        self.parameters = [parameter for _, parameter in trained]
        self.averages: list[torch.Tensor] = []
        self.decay = decay

    def start(self) -> None:
        """The average of nothing yet: the model's weights as they are (on their device)."""
        self.averages = [parameter.detach().clone() for parameter in self.parameters]

    def update(self) -> None:
        """One optimizer step's update: ``average += (1 - decay) * (weight - average)``."""
        weights = [parameter.detach() for parameter in self.parameters]
        torch._foreach_lerp_(self.averages, weights, 1.0 - self.decay)

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """The model holds the averages while the block runs, its own weights after. The
        tensors are swapped, not copied: no memory beyond the averages themselves."""
        self._swap()
        try:
            yield
        finally:
            self._swap()

    def _swap(self) -> None:
        with torch.no_grad():
            for parameter, average in zip(self.parameters, self.averages, strict=True):
                parameter.data, average.data = average.data, parameter.data

    def weights(self) -> dict[str, torch.Tensor]:
        """The averages by the model's parameter names."""
        return dict(zip(self.names, self.averages, strict=True))

    def state_dict(self) -> dict[str, Any]:
        return {"averages": {str(i): a for i, a in enumerate(self.averages)}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = state["averages"]
        if len(saved) != len(self.averages):
            raise TrainerConfigError(
                f"the checkpoint's weight average has {len(saved)} parameters, this model "
                f"{len(self.averages)}"
            )
        with torch.no_grad():
            for index, average in enumerate(self.averages):
                average.copy_(saved[str(index)])
