"""No host-device synchronisation on a training step that does not log, evaluate or checkpoint.

A GPU runs ahead of the Python thread that queues its work until the thread asks for a value
(``.item()``, ``bool(tensor)``, ``.tolist()``, a copy to the CPU, ``nonzero``...); then the
thread waits for everything queued. One such call per step costs a pipeline stall per step.
The calls are counted with a TorchFunctionMode (what Python code asks for) and a
TorchDispatchMode (what reaches the kernels, C++ callers included), from one step's
``on_after_training_step`` to the next, on steps that neither log (``log_every=1000``),
evaluate nor checkpoint. They run on the CPU here, where nothing syncs, but the calls are the
same ones that would on a GPU.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from accmt_callbacks import Callback
from accmt_trainer import AcceleratorModule, HyperParameters, Monitor, Trainer

from .conftest import Classifier, blobs

# What asks the device for a value: Tensor methods and torch functions, by name.
_SYNCING = {
    *("item", "tolist", "numpy", "cpu", "__array__"),  # the values, on the host
    *("__bool__", "__float__", "__int__", "__index__", "__complex__", "is_nonzero"),  # one value
    *("__format__", "__repr__", "__str__"),  # printed
    *("nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"),  # sized by values
    *("equal", "allclose"),  # a Python bool
}
# The kernels that hand a value to the host, whoever calls them.
_SYNCING_OPS = {
    *("aten::_local_scalar_dense", "aten::is_nonzero", "aten::equal"),
    *("aten::nonzero", "aten::masked_select", "aten::_unique2", "aten::unique_consecutive"),
    "aten::unique_dim",
}


def _is_cpu(device: Any) -> bool:
    return device is not None and torch.device(device).type == "cpu"


class Syncs:
    """The syncing calls seen while counting, each with where it came from. ``exempt`` says
    which tensors live on the host on purpose (reading them syncs nothing on any device)."""

    def __init__(self) -> None:
        self.exempt: Callable[[Any], bool] = lambda tensor: False
        self.found: list[str] = []

    def note(self, what: str, args: Sequence[Any]) -> None:
        if args and isinstance(args[0], torch.Tensor) and self.exempt(args[0]):
            return
        # Without this frame and the mode's.
        where = [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_stack()[:-2]]
        self.found.append(f"{what} from {' <- '.join(reversed(where[-6:]))}")


class _Counting:
    def __init__(self, syncs: Syncs) -> None:
        super().__init__()
        self.syncs = syncs


class SyncingCalls(_Counting, TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _SYNCING or (name in ("to", "cuda", "copy_") and _waits(name, args, kwargs)):
            self.syncs.note(f"{name}()", args)
        return func(*args, **kwargs)


class SyncingKernels(_Counting, TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func._schema.name in _SYNCING_OPS:
            self.syncs.note(func._schema.name, args)
        return func(*args, **(kwargs or {}))


def _waits(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """A copy from a device to the host, or a blocking one from the host to a device (torch
    synchronises the stream after it). Never on a CPU run; on a GPU, a sync."""
    if name == "copy_":
        target, source = args[0].device, args[1].device
        blocking = not kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
    else:
        source = args[0].device
        places = [kwargs.get("device"), *args[1:]]
        found = [p.device if isinstance(p, torch.Tensor) else p for p in places]
        devices = [torch.device(d) for d in found if isinstance(d, (str, torch.device))]
        target = devices[0] if devices else torch.device("cuda") if name == "cuda" else source
        flags = [a for a in args[2:] if isinstance(a, bool)]
        blocking = not kwargs.get("non_blocking", flags[0] if flags else False)
    if source.type != "cpu":
        return target.type == "cpu"
    return target.type != "cpu" and blocking


class CountBetweenSteps(Callback):
    """Counts from the ``on_after_training_step`` of optimizer step ``start`` to that of
    optimizer step ``end`` (the batch that steps, with accumulation)."""

    def __init__(self, syncs: Syncs, start: int, end: int) -> None:
        self.syncs, self.start, self.end = syncs, start, end
        self._modes: list[Any] = []
        self.counted: list[int] = []

    def on_after_training_step(self) -> None:
        assert self.state is not None
        step = self.state.global_step
        if self._modes:
            self.counted.append(step)
            if step == self.end:
                for mode in reversed(self._modes):
                    mode.__exit__(None, None, None)
                self._modes = []
        elif step == self.start and not self.counted:
            self._modes = [SyncingCalls(self.syncs), SyncingKernels(self.syncs)]
            for mode in self._modes:
                mode.__enter__()


def optimizer_steps(trainer: Trainer) -> Callable[[Any], bool]:
    """The optimizer's step counts: torch keeps them on the CPU (unless ``capturable`` or
    ``fused``) so that reading them syncs nothing, on any device."""

    def exempt(tensor: Any) -> bool:
        optimizer = trainer.optimizer.optimizer  # inside Accelerate's wrapper
        return any(tensor is state.get("step") for state in optimizer.state.values())

    return exempt


def count(tmp_path: Path, module: AcceleratorModule | None = None, **options: Any) -> Syncs:
    """Train one epoch of 16 batches; count from optimizer step 3 to 7, none of which logs,
    evaluates or checkpoints (nor ends the epoch, which reduces the epoch's loss)."""
    scheduler = options.pop("scheduler", {})
    hps = HyperParameters(
        epochs=1, batch_size=8, optimizer="AdamW", optimizer_kwargs={"lr": 0.01}, **scheduler
    )
    syncs = Syncs()
    counter = CountBetweenSteps(syncs, start=3, end=7)
    quiet = {"log_with": None, "progress_bar": False, "cpu": True}
    options = {**quiet, "log_every": 1000, "checkpoint_every": None, **options}
    trainer = Trainer(hps, tmp_path, callbacks=[counter], **options)
    syncs.exempt = optimizer_steps(trainer)
    trainer.fit(module or Classifier(), blobs(128))
    assert counter.counted[-1] == 7
    return syncs


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"clip_grad": 1.0},
        {"grad_accumulation_steps": 2},
        {"monitor": Monitor(learning_rate=True, grad_norm=True, throughput=True, memory=True)},
        {
            "checkpoint_every": "10 steps",  # due after the counted steps
            "scheduler": {
                "scheduler": "LinearWithWarmup",
                "scheduler_kwargs": {"num_warmup_steps": 4},
            },
        },
    ],
    ids=["plain", "clip_grad", "accumulation", "monitor", "scheduled"],
)
def test_a_step_that_does_not_log_evaluate_or_checkpoint_does_not_sync(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    syncs = count(tmp_path, **options)
    assert syncs.found == []


class SummedLoss(Classifier):
    """A loss summed over the batch's samples, with their number as a tensor or an int."""

    def __init__(self, items: str) -> None:
        super().__init__()
        self.items = items

    def training_step(self, batch: Any) -> dict[str, Any]:
        features, labels = batch
        loss = torch.nn.functional.cross_entropy(self.model(features), labels, reduction="sum")
        items = (labels >= 0).sum() if self.items == "tensor" else len(labels)
        return {"loss": loss, "num_items": items}


@pytest.mark.parametrize("items", ["tensor", "int"])
def test_a_summed_loss_with_num_items_does_not_sync_either(tmp_path: Path, items: str) -> None:
    syncs = count(tmp_path, SummedLoss(items), grad_accumulation_steps=2, clip_grad=1.0)
    assert syncs.found == []


def test_counting_items_for_throughput_and_mfu_does_not_sync(tmp_path: Path) -> None:
    # The items stay on the device until a log reads them.
    monitor = Monitor(throughput=True, flops_per_item=6.0, peak_flops=1e9)
    syncs = count(tmp_path, SummedLoss("tensor"), monitor=monitor)
    assert syncs.found == []


class ReadsItsLoss(Classifier):
    """A module whose step asks for its loss's value: the counting must see it."""

    def training_step(self, batch: Any) -> torch.Tensor:
        loss = super().training_step(batch)
        loss.item()
        return loss


def test_batches_go_to_the_device_without_waiting_for_it(tmp_path: Path) -> None:
    # What a CPU run cannot show: a blocking copy to a GPU would sync once a step.
    hps = HyperParameters(epochs=1, batch_size=8)
    trainer = Trainer(hps, tmp_path, log_with=None, progress_bar=False, cpu=True)
    trainer.fit(Classifier(), blobs(16))
    assert trainer.accelerator.non_blocking


def test_the_counting_sees_an_item_in_a_step(tmp_path: Path) -> None:
    syncs = count(tmp_path, ReadsItsLoss())
    assert len(syncs.found) == 4 * 2  # one a step, seen as item() and as its kernel
    assert all("training_step" in found for found in syncs.found)


def test_the_copies_that_wait_for_a_device_are_told_apart() -> None:
    # "meta" stands for a GPU: only the devices of the calls are read.
    host, device = torch.zeros(2), torch.zeros(2, device="meta")
    assert _waits("to", [device, "cpu"], {})
    assert _waits("to", [device], {"device": torch.device("cpu")})
    assert _waits("to", [host, "meta"], {})  # blocking: torch syncs the stream after it
    assert _waits("cuda", [host], {})
    assert not _waits("to", [host, "meta"], {"non_blocking": True})
    assert not _waits("to", [host, "meta", torch.float16, True], {})
    assert not _waits("to", [host, "cpu"], {})
    assert not _waits("to", [device, torch.float16], {})
    assert not _waits("to", [device, device], {})
    assert _waits("copy_", [host, device], {})
    assert _waits("copy_", [device, host], {})
    assert not _waits("copy_", [device, host], {"non_blocking": True})
