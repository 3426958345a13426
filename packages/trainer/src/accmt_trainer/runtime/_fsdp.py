"""What a run does for FSDP beyond Accelerate: it says when Accelerate did not shard, and it
leaves a sharded model's parameters sharded after forwards that have no backward.

FSDP is asked for the way Accelerate reads it (``accelerate launch --use_fsdp``, or
``accmt launch --strat fsdp...``: ``ACCELERATE_USE_FSDP`` and the ``FSDP_*`` variables).
Accelerate takes its FSDP path only on accelerators; on the CPU it runs the processes as DDP,
each holding the whole model, and says nothing: :func:`warn_if_not_sharded` says it.
"""

from __future__ import annotations

import sys
import warnings

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType, parse_flag_from_env

# Their models are split across processes: every process must take part in every forward.
_SHARDED = (DistributedType.FSDP, DistributedType.DEEPSPEED, DistributedType.MEGATRON_LM)


def shards_the_model(accelerator: Accelerator) -> bool:
    """Whether ``accelerator`` splits the model across processes (FSDP, DeepSpeed, Megatron):
    then every process takes part in every forward, and no process may run fewer batches."""
    return accelerator.distributed_type in _SHARDED


def fsdp_requested() -> bool:
    """Whether this process was launched for FSDP (Accelerate's ``ACCELERATE_USE_FSDP``)."""
    return bool(parse_flag_from_env("ACCELERATE_USE_FSDP", default=False))


def warn_if_not_sharded(accelerator: Accelerator) -> None:
    """Warn (main process) when FSDP was asked for and Accelerate ran without it."""
    kind = accelerator.distributed_type
    if not fsdp_requested() or kind == DistributedType.FSDP or not accelerator.is_main_process:
        return
    ran = {
        DistributedType.MULTI_CPU: "DDP on the CPU (MULTI_CPU)",
        DistributedType.NO: "a single process on the CPU (NO)",
    }.get(kind, kind.value)
    warnings.warn(
        f"FSDP was asked for (ACCELERATE_USE_FSDP), but Accelerate ran {ran}: it takes its "
        "FSDP path only on accelerators, so every process holds the whole model and the "
        "checkpoints are not sharded. Launch on GPUs to shard, or launch without FSDP.",
        stacklevel=3,
    )


def reshard(model: torch.nn.Module) -> None:
    """Every FSDP2 module of ``model`` back to its shards (a model without them: nothing).

    FSDP2 gathers a module's parameters for its forward and shards them again after it, or
    after the backward: the root module keeps them gathered until its backward (its
    ``reshard_after_forward`` resolves to False). Forwards without a backward (an evaluation,
    the sanity check) would leave the root's parameters whole, in place of the shards the
    optimizer steps and a sharded checkpoint saves.
    """
    if "torch.distributed.fsdp" not in sys.modules:
        return  # nothing imported FSDP in this process: the model cannot be sharded by it
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # torch before 2.6, whose FSDP2 Accelerate does not use
        return
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def forget_sharding_specs() -> None:
    """Drop DTensor's caches of sharding specs, once the process group they were made on is gone.

    torch caches the specs of DTensors (FSDP2's parameters) by their mesh, and two meshes of the
    same shape compare equal whichever group backs them: the parameters a later ``fit`` shards
    on its own group would be given the specs, and so the group, of the first, destroyed since
    ("Could not resolve the process group registered under the name 0" at the first gather).
    """
    if "torch.distributed.tensor" not in sys.modules:
        return  # no DTensor was made in this process
    from torch.distributed.tensor import debug

    clear = getattr(debug, "_clear_sharding_prop_cache", None)
    if clear is not None:
        clear()
