"""The Accelerator of a run: its options, checked when the Trainer is made, and making it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import torch
from accelerate import Accelerator
from accelerate.utils import (
    DataLoaderConfiguration,
    TorchDynamoPlugin,
    extract_model_from_parallel,
)

# Accelerate 1.2 has it in accelerate.utils.other only (1.16 there too, and in accelerate.utils).
from accelerate.utils.other import is_compiled_module

from accmt_decorators import current_process, export_slurm_rendezvous

from .._errors import TrainerConfigError
from ..config import one_of, option, positive_int

if TYPE_CHECKING:
    from ._trackers import LoggingOptions

MIXED_PRECISION = (None, "no", "fp16", "bf16", "fp8")


def check_compile_kwargs(compile_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """``compile_kwargs`` are fields of Accelerate's TorchDynamoPlugin (torch.compile's)."""
    if compile_kwargs is None:
        return {}
    known = {field.name for field in dataclasses.fields(TorchDynamoPlugin)}
    unknown = sorted(set(compile_kwargs) - known)
    if unknown:
        raise TrainerConfigError(
            f"Trainer(compile_kwargs=...): Accelerate's TorchDynamoPlugin takes no "
            f"{', '.join(map(repr, unknown))}; it takes {sorted(known)}"
        )
    return dict(compile_kwargs)


@attrs.frozen(kw_only=True)
class AcceleratorOptions:
    """What the Accelerator of a run is made with, and how the model is prepared; checked when
    the Trainer is made."""

    cpu: bool | None = None
    """True forces the CPU; None lets :func:`use_cpu` choose."""
    mixed_precision: str | None = attrs.field(
        default=None, validator=option(one_of, MIXED_PRECISION)
    )
    grad_accumulation_steps: int = attrs.field(default=1, validator=option(positive_int))
    seed: int | None = None
    """Seeds every RNG at the start of ``fit``, and the samplers' order."""
    compile: bool = False
    compile_kwargs: dict[str, Any] = attrs.field(default=None, converter=check_compile_kwargs)
    """With ``compile``, the fields of Accelerate's ``TorchDynamoPlugin``."""
    gradient_checkpointing: bool = False
    """Turn on the model's own gradient checkpointing (transformers'
    ``gradient_checkpointing_enable``) before it is prepared."""
    gradient_checkpointing_kwargs: Mapping[str, Any] | None = None
    """What ``gradient_checkpointing_enable`` is given as ``gradient_checkpointing_kwargs``."""

    def enable_gradient_checkpointing(self, model: torch.nn.Module) -> None:
        """``gradient_checkpointing``: the model's own, turned on (else nothing)."""
        if not self.gradient_checkpointing:
            return
        enable = getattr(model, "gradient_checkpointing_enable", None)
        if not callable(enable):
            raise TrainerConfigError(
                f"Trainer(gradient_checkpointing=True): {type(model).__name__} has no "
                "gradient_checkpointing_enable(gradient_checkpointing_kwargs=...) method (a "
                "transformers model has one); add one, or leave gradient_checkpointing off"
            )
        kwargs = self.gradient_checkpointing_kwargs
        enable(gradient_checkpointing_kwargs=None if kwargs is None else dict(kwargs))

    def dynamo_plugin(self) -> TorchDynamoPlugin | None:
        """Accelerate's torch dynamo settings: inductor unless ``compile_kwargs`` says."""
        if not self.compile:
            return None
        return TorchDynamoPlugin(**{"backend": "inductor", **self.compile_kwargs})


def make_accelerator(
    options: AcceleratorOptions, logging: LoggingOptions, *, every_sample_once: bool = False
) -> Accelerator:
    """The run's Accelerator. ``every_sample_once`` (evaluate, predict): the loaders it prepares
    give each process its own batches of the one-process order, the last round uneven, where
    Accelerate's default evens them out by repeating samples from the start."""
    join_slurm_job()
    accelerator = Accelerator(
        cpu=use_cpu(options.cpu),
        mixed_precision=options.mixed_precision,
        gradient_accumulation_steps=options.grad_accumulation_steps,
        # The scheduler is stepped by the loop, once per real optimizer step, and sized to
        # exactly that count; Accelerate would otherwise step it once per process.
        step_scheduler_with_optimizer=False,
        # non_blocking: a batch's copy to the device does not wait for the device. A blocking
        # copy synchronises the stream (torch's memcpy_and_sync): each step would wait for
        # the previous one to finish on the GPU before it could be queued.
        dataloader_config=DataLoaderConfiguration(
            use_seedable_sampler=True,
            data_seed=options.seed,
            even_batches=not every_sample_once,
            non_blocking=True,
        ),
        log_with=logging.log_with,
        project_dir=str(logging.logging_dir),
        dynamo_plugin=options.dynamo_plugin(),
    )
    check_processes(accelerator)
    return accelerator


def join_slurm_job() -> None:
    """On a task of ``srun --ntasks=N python train.py``, the job's place for Accelerate and
    torch: their variables (``MASTER_ADDR``, ``RANK``, ...) written from SLURM's where
    torchrun's are absent, and torch's threads set to ``SLURM_CPUS_PER_TASK`` where
    ``OMP_NUM_THREADS`` was not set (:func:`accmt_decorators.export_slurm_rendezvous`)."""
    threads = export_slurm_rendezvous().get("OMP_NUM_THREADS")
    if threads is not None:
        torch.set_num_threads(int(threads))


def check_processes(accelerator: Accelerator) -> None:
    """Accelerate's state counts the processes torch.distributed's group has. A program that
    made ``PartialState()`` (or an ``Accelerator``) before the Trainer, without ``cpu=True``, on
    a machine without GPUs, has a state that says one process while the group has several:
    each process would run as a job of its own (both would take the output folder's lock)."""
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return
    group = torch.distributed.get_world_size()
    if accelerator.num_processes != group:
        raise TrainerConfigError(
            f"Accelerate's state says {accelerator.num_processes} process(es) "
            f"({accelerator.distributed_type}) but torch.distributed's group has {group}: the "
            "program made Accelerate's state before the Trainer without cpu=True (on a machine "
            "without GPUs, PartialState() reports one process); make it with "
            "PartialState(cpu=True) or Accelerator(cpu=True), or let the Trainer make it"
        )


def use_cpu(cpu: bool | None) -> bool:
    """Whether ``Trainer(cpu=cpu)`` runs on the CPU: True forces it; None picks it for a job of
    several processes on a machine without an accelerator, where Accelerate alone would run
    each process as its own job. A program that makes Accelerate's state before the Trainer
    (a search that talks between processes first) makes it with the same choice."""
    if cpu is not None:
        return cpu
    if current_process().num_processes == 1:
        return False
    xpu = getattr(torch, "xpu", None)
    mps = getattr(torch.backends, "mps", None)
    return not (
        torch.cuda.is_available()
        or (xpu is not None and xpu.is_available())
        or (mps is not None and mps.is_available())
    )


def drop_mixed_precision_forward(model: torch.nn.Module | None) -> None:
    """Give ``model`` back its own ``forward``. With mixed precision, Accelerate's
    ``prepare_model`` keeps bound methods of the model in its ``__dict__`` (``_original_forward``
    and the autocasting ``forward``): a reference cycle that would keep the model alive until
    the cycle collector runs, once the run that prepared it is over."""
    if model is None:
        return
    held = vars(model)
    original = held.pop("_original_forward", None)
    if original is None:
        return
    own = getattr(original, "__func__", None) is type(model).forward
    if own and getattr(original, "__self__", None) is model:
        held.pop("forward", None)  # the class's forward again
    else:
        held["forward"] = original  # a forward the instance had before: kept as it was


def own_model(model: torch.nn.Module) -> torch.nn.Module:
    """The user's own model inside Accelerate's wrappers (DDP, mixed precision's) and
    torch.compile's, whose parameter names are the model's."""
    inner: torch.nn.Module = extract_model_from_parallel(model)
    # Accelerate 1.2 (the oldest we take) keeps torch.compile's wrapper, and has no
    # keep_torch_compile to drop it; the wrapper holds the model as _orig_mod.
    if is_compiled_module(inner):
        compiled: Any = inner
        inner = compiled._orig_mod
    return inner
