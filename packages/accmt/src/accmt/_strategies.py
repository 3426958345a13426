"""The strategies ``accmt launch --strat NAME`` knows: accmt 1.x's names, each as the
``accelerate launch`` options that set it up.

accmt 1.x shipped one Accelerate config file per name; the names follow a grammar, so here they
are generated from it: ``ddp[-PRECISION]``, ``fsdp[-PRECISION[-cpu]]`` and
``deepspeed[-STAGE[-PRECISION[-OPTIMIZER_OFFLOAD-PARAMETER_OFFLOAD]]]`` (offloads only for
stages 2 and 3), with the settings those files had.
"""

from __future__ import annotations

import itertools

import attrs

PRECISIONS = ("fp32", "fp16", "bf16", "fp8")
OFFLOADS = ("none", "cpu", "nvme")
FAMILIES = ("ddp", "fsdp", "deepspeed")


@attrs.frozen
class Strategy:
    """One named way to launch: its family, what it sets in words, and the options it gives
    ``accelerate launch``."""

    name: str
    family: str
    summary: str
    launcher_args: tuple[str, ...]


def _precision(precision: str | None) -> tuple[str, tuple[str, ...]]:
    """The words and the mixed-precision option for a name's precision part."""
    mode = "no" if precision in (None, "fp32") else precision
    words = "fp32" if mode == "no" else f"{mode} mixed precision"
    return words, ("--mixed_precision", str(mode))


def _ddp(precision: str | None) -> Strategy:
    words, args = _precision(precision)
    name = "ddp" if precision is None else f"ddp-{precision}"
    return Strategy(name, "ddp", f"DistributedDataParallel, {words}", ("--multi_gpu", *args))


# accmt 1.x's FSDP files: full sharding, no auto wrap, sharded state dicts.
_FSDP_ARGS = (
    "--use_fsdp",
    *("--fsdp_sharding_strategy", "FULL_SHARD"),
    *("--fsdp_auto_wrap_policy", "NO_WRAP"),
    *("--fsdp_backward_prefetch", "BACKWARD_PRE"),
    *("--fsdp_state_dict_type", "SHARDED_STATE_DICT"),
    *("--fsdp_forward_prefetch", "false"),
    *("--fsdp_use_orig_params", "true"),
    *("--fsdp_cpu_ram_efficient_loading", "true"),
    *("--fsdp_sync_module_states", "true"),
)


def _fsdp(precision: str | None, cpu_offload: bool) -> Strategy:
    words, args = _precision(precision)
    name = "-".join(
        ["fsdp", *([precision] if precision else []), *(["cpu"] if cpu_offload else [])]
    )
    offload = ", parameters offloaded to the CPU" if cpu_offload else ""
    return Strategy(
        name,
        "fsdp",
        f"FSDP, full sharding, {words}{offload}",
        (*_FSDP_ARGS, "--fsdp_offload_params", str(cpu_offload).lower(), *args),
    )


def _deepspeed(
    name: str, stage: int, precision: str | None, offloads: tuple[str, str] | None
) -> Strategy:
    words, args = _precision(precision)
    launcher = ["--use_deepspeed", "--zero_stage", str(stage)]
    summary = f"DeepSpeed ZeRO stage {stage}, {words}"
    if offloads is not None:
        optimizer, parameters = offloads
        launcher += ["--offload_optimizer_device", optimizer, "--offload_param_device", parameters]
        summary += f", optimizer offload {optimizer}, parameter offload {parameters}"
    launcher += ["--zero3_init_flag", str(stage == 3).lower()]
    if stage == 3:
        # 1.x gathered 16-bit weights when saving under ZeRO-3 whenever it trained in 16 bits.
        sixteen = _precision(precision)[1][1] != "no"
        launcher += ["--zero3_save_16bit_model", str(sixteen).lower()]
    return Strategy(name, "deepspeed", summary, (*launcher, *args))


def _all_deepspeed() -> list[Strategy]:
    found = [_deepspeed("deepspeed", 2, None, ("none", "none"))]
    for stage in (0, 1, 2, 3):
        offloads = ("none", "none") if stage >= 2 else None
        found.append(_deepspeed(f"deepspeed-{stage}", stage, None, offloads))
        for precision in PRECISIONS:
            found.append(_deepspeed(f"deepspeed-{stage}-{precision}", stage, precision, offloads))
            if stage < 2:
                continue
            for pair in itertools.product(OFFLOADS, OFFLOADS):
                name = f"deepspeed-{stage}-{precision}-{pair[0]}-{pair[1]}"
                found.append(_deepspeed(name, stage, precision, pair))
    return found


def _all() -> dict[str, Strategy]:
    strategies = [
        _ddp(None),
        *(_ddp(precision) for precision in PRECISIONS),
        _fsdp(None, cpu_offload=False),
        *(_fsdp(p, cpu_offload=cpu) for p in PRECISIONS for cpu in (False, True)),
        *_all_deepspeed(),
    ]
    return {strategy.name: strategy for strategy in strategies}


STRATEGIES: dict[str, Strategy] = _all()
"""Every strategy by name, in the order ``accmt strats`` lists them."""
