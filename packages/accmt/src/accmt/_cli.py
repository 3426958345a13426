"""The ``accmt`` command: ``accmt launch`` runs a training script on several processes through
Accelerate's launcher, with accmt 1.x's options; ``accmt strats`` lists the strategies.

Accelerate does the launching (its ``launch`` command, called in a thread of this process,
whose main thread forwards signals to the workers: ``_supervisor``); this module only turns
1.x's options into Accelerate's. One trap is hidden here: ``accelerate launch --cpu
--num_processes 2`` starts a single process, so several CPU processes are launched as a
multi-process job with the GPUs hidden and ``ACCELERATE_USE_CPU`` set, which runs on gloo.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

import attrs

from accmt_decorators import LauncherEnvironmentError, slurm_job

from ._errors import LaunchError
from ._rendezvous import count, port, positive
from ._rendezvous import rendezvous as find_rendezvous
from ._strategies import FAMILIES, STRATEGIES, Strategy
from ._supervisor import exit_status_of, supervise

_DESCRIPTION = "accmt: train with the accmt Trainer on one or many processes."
_EPILOG = "Run 'accmt COMMAND --help' for a command's options."

# accmt 1.x's other commands, and what to do instead.
_DROPPED_COMMANDS = {
    "get": "best models are saved as model_path/<rule>/model.safetensors; for a checkpoint "
    "under FSDP or DeepSpeed, use 'accelerate merge-weights'",
    "example": "see the HyperParameters YAML layout in the accmt documentation",
    "debug": "run 'accmt launch' (accmt 2 has no debug mode)",
    "debug-levels": "accmt 2 has no debug mode",
    "alaunch": "accmt 2 has no asynchronous evaluation; run 'accmt launch'",
    "async-launch": "accmt 2 has no asynchronous evaluation; run 'accmt launch'",
    "adebug": "accmt 2 has no asynchronous evaluation or debug mode; run 'accmt launch'",
    "async-debug": "accmt 2 has no asynchronous evaluation or debug mode; run 'accmt launch'",
}


@attrs.frozen
class LaunchPlan:
    """What ``accmt launch`` hands to Accelerate: its command-line options, and the environment
    variables to set first."""

    accelerate_args: tuple[str, ...]
    environment: dict[str, str]
    num_processes: int
    on_cpu: bool
    rdzv_endpoint: str | None = None
    """Where torch's c10d rendezvous meets, on one machine (Accelerate passes one on several
    machines only)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="accmt", description=_DESCRIPTION, epilog=_EPILOG)
    from . import __version__

    parser.add_argument("--version", action="version", version=f"accmt {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_launch(commands)
    _add_strats(commands)
    return parser


def _add_launch(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    launch = commands.add_parser(
        "launch",
        help="run a training script on one or several processes",
        description="Run SCRIPT on one or several processes through Accelerate's launcher. "
        "Everything after SCRIPT is passed to it.",
        epilog="Examples: 'accmt launch -N 8 --strat deepspeed-2-bf16 train.py' (8 GPUs), "
        "'accmt launch --cpu -N 2 train.py --epochs 3' (2 CPU processes on gloo).",
    )
    launch.add_argument(
        "-N",
        "--num-processes",
        metavar="N",
        help="number of processes. On GPUs: the first N GPUs (default: all of them), or a "
        "Python slice of GPU indices ('2:', ':4', '3:8'); with --cpu: N CPU processes "
        "(default: 1)",
    )
    launch.add_argument(
        "-n",
        "--gpus",
        default="all",
        metavar="GPUS",
        help="which GPUs: 'all' (the default), or indices such as '0,1,4'",
    )
    launch.add_argument(
        "--strat",
        "--strategy",
        dest="strategy",
        default="ddp",
        metavar="STRATEGY",
        help="a strategy ('accmt strats' lists them; default: ddp) or an Accelerate config "
        "file (.yaml)",
    )
    launch.add_argument(
        "--cpu",
        action="store_true",
        help="run on CPU processes (gloo) even where there are GPUs; without a CUDA GPU, "
        "every launch does",
    )
    machines = launch.add_argument_group(
        "restarts and several machines",
        "A process that dies ends the attempt; with --max-restarts the launcher starts every "
        "process again and the Trainer resumes from the newest checkpoint. On several "
        "machines, run the same command on each with its own --machine-rank. Under SLURM, "
        "'srun --ntasks-per-node=1 accmt launch ...' runs it on each node of the allocation, "
        "which gives the machines, their ranks, the main address and port.",
    )
    machines.add_argument(
        "--max-restarts",
        type=count,
        default=0,
        metavar="R",
        help="restart the whole job up to R times when a process fails (default: 0)",
    )
    machines.add_argument(
        "--num-machines",
        type=positive,
        metavar="M",
        help="number of machines; -N is then the processes of each (default: 1, or under "
        "srun the step's nodes, SLURM_NNODES)",
    )
    machines.add_argument(
        "--machine-rank",
        type=count,
        metavar="R",
        help="this machine's rank, 0 to M-1; machine 0 hosts the rendezvous (default: 0, or "
        "under srun SLURM_NODEID)",
    )
    machines.add_argument(
        "--main-address",
        metavar="HOST",
        help="machine 0's address, which every machine can reach (default: 127.0.0.1, for one "
        "machine only; under srun the step's first node)",
    )
    machines.add_argument(
        "--main-port",
        type=port,
        metavar="PORT",
        help="the rendezvous port on machine 0 (default: a free port on one machine; needed "
        "with several; under srun 10000 + SLURM_JOB_ID %% 20000)",
    )
    machines.add_argument(
        "--rdzv-backend",
        choices=("static", "c10d"),
        metavar="BACKEND",
        help="torch's rendezvous: 'c10d' (the default with --max-restarts: restarted "
        "processes meet again on a fresh store) or 'static' (the default without)",
    )
    launch.add_argument(
        "-O1",
        dest="optimize_threads",
        action="store_true",
        help="accepted for accmt 1.x: OMP_NUM_THREADS is always set to the CPUs per process "
        "(this machine's, or SLURM_CPUS_PER_TASK's, shared by its processes) when it is not "
        "set already",
    )
    launch.add_argument("script", metavar="SCRIPT", help="the training script")
    launch.add_argument(
        "script_args", nargs=argparse.REMAINDER, metavar="...", help="the script's arguments"
    )


def _add_strats(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    strats = commands.add_parser(
        "strats",
        help="list the strategies 'accmt launch --strat' takes",
        description="List the strategies 'accmt launch --strat' takes, with what each sets.",
    )
    only = strats.add_mutually_exclusive_group()
    for family in FAMILIES:
        only.add_argument(
            f"--{family}",
            dest="family",
            action="store_const",
            const=family,
            help=f"only the {_FAMILY_NAMES[family]} strategies",
        )
    strats.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also show the 'accelerate launch' options each one passes",
    )


_FAMILY_NAMES = {"ddp": "DDP", "fsdp": "FSDP", "deepspeed": "DeepSpeed"}


def main(argv: Sequence[str] | None = None) -> int:
    """The ``accmt`` console script."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in _DROPPED_COMMANDS:
        print(
            f"accmt: '{arguments[0]}' was an accmt 1.x command; {_DROPPED_COMMANDS[arguments[0]]}",
            file=sys.stderr,
        )
        return 2
    parser = build_parser()
    options = parser.parse_args(arguments)
    if options.command == "strats":
        print(list_strategies(options.family, verbose=options.verbose))
        return 0
    if options.command == "launch":
        try:
            plan = plan_launch(options, cuda_devices=_cuda_device_count())
        except LaunchError as error:
            parser.exit(2, f"accmt launch: {error}\n")
        return run(plan)
    parser.print_help()
    return 0


def list_strategies(family: str | None = None, *, verbose: bool = False) -> str:
    chosen = [s for s in STRATEGIES.values() if family is None or s.family == family]
    width = max(len(strategy.name) for strategy in chosen)
    lines = []
    for strategy in chosen:
        lines.append(f"{strategy.name:<{width}}  {strategy.summary}")
        if verbose:
            lines.append(f"{'':<{width}}    accelerate launch {' '.join(strategy.launcher_args)}")
    return "\n".join(lines)


def plan_launch(
    options: argparse.Namespace, *, cuda_devices: int, environ: Mapping[str, str] | None = None
) -> LaunchPlan:
    """Turn ``accmt launch``'s options into Accelerate's, for a machine with ``cuda_devices``
    GPUs, in the environment ``environ`` (by default this process's: SLURM's variables say
    the machines, where the options do not). Raises :class:`LaunchError` naming the option
    that cannot work."""
    environ = os.environ if environ is None else environ
    strategy_args, family = _strategy(options.strategy)
    cpu = options.cpu or cuda_devices == 0
    if cpu and family not in ("ddp", "config"):
        where = "with --cpu" if options.cpu else "on a machine without a CUDA GPU"
        raise LaunchError(f"--strat {options.strategy} needs GPUs; {where}, use a ddp strategy")
    if cpu:
        count = _cpu_processes(options.num_processes)
        environment = {"ACCELERATE_USE_CPU": "true", "CUDA_VISIBLE_DEVICES": ""}
    else:
        indices = _gpu_indices(options.gpus, options.num_processes, cuda_devices)
        count = len(indices)
        environment = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, indices))}
    try:
        job = slurm_job(environ)
        rendezvous = find_rendezvous(options, job, environ)
    except LauncherEnvironmentError as error:  # a SLURM variable srun would not write
        raise LaunchError(str(error)) from None
    if family == "ddp" or (cpu and family == "config"):
        # Several processes are Accelerate's --multi_gpu, on CPUs too ('accelerate launch --cpu'
        # starts one process whatever --num_processes says; with the GPUs hidden and
        # ACCELERATE_USE_CPU set, --multi_gpu runs on gloo). It needs two processes or more:
        # one process is a plain run.
        strategy_args = tuple(arg for arg in strategy_args if arg != "--multi_gpu")
        if count * rendezvous.num_machines > 1:
            strategy_args = ("--multi_gpu", *strategy_args)
        elif cpu:
            strategy_args = ("--cpu", *strategy_args)
    if "OMP_NUM_THREADS" not in environ:
        cpus = job.cpus_per_task if job is not None and job.cpus_per_task else os.cpu_count()
        environment["OMP_NUM_THREADS"] = str(max((cpus or 1) // count, 1))
    if rendezvous.backend == "c10d":
        # torch 2.13 would hand the restarted workers the first attempt's TCP store, where
        # gloo can read a dead peer's address and wait for it (pytorch#135712, #167288).
        environment["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    accelerate_args = (
        *strategy_args,
        *("--num_processes", str(count * rendezvous.num_machines)),
        *("--num_machines", str(rendezvous.num_machines)),
        *("--machine_rank", str(rendezvous.machine_rank)),
        *("--main_process_ip", rendezvous.address),
        *("--main_process_port", str(rendezvous.port)),
        *("--rdzv_backend", rendezvous.backend),
        *("--max_restarts", str(options.max_restarts)),
        options.script,
        *options.script_args,
    )
    return LaunchPlan(accelerate_args, environment, count, cpu, rendezvous.endpoint)


def run(plan: LaunchPlan) -> int:
    """Launch through Accelerate, the signals forwarded to the workers (``_supervisor``); the
    exit status is the script's (the first failed process's, on several), or 75 for workers a
    signal stopped (checkpointed, to be resumed)."""
    from accelerate.commands.launch import launch_command, launch_command_parser

    accelerate_options = launch_command_parser().parse_args(list(plan.accelerate_args))
    if plan.rdzv_endpoint is not None and accelerate_options.num_machines == 1:
        # Accelerate's parser has no --rdzv_endpoint; torchrun's does, and reads it from here.
        accelerate_options.rdzv_endpoint = plan.rdzv_endpoint
    os.environ.update(plan.environment)

    def launch() -> int:
        try:
            launch_command(accelerate_options)
        except BaseException as error:  # a failed worker's status; any other error raised
            return exit_status_of(error)
        return 0

    return supervise(launch)


def _strategy(value: str) -> tuple[tuple[str, ...], str]:
    """The Accelerate options and the family of ``--strat``; a config file is family
    "config"."""
    if value.endswith((".yaml", ".yml", ".json")) or os.sep in value:
        if not os.path.isfile(value):
            raise LaunchError(f"--strat {value}: no such Accelerate config file")
        return ("--config_file", value), "config"
    strategy: Strategy | None = STRATEGIES.get(value.lower())
    if strategy is None:
        raise LaunchError(f"--strat {value}: unknown strategy; 'accmt strats' lists them")
    # Said explicitly, so that Accelerate neither warns about nor fills them from a default
    # config file.
    return (*strategy.launcher_args, "--dynamo_backend", "no"), strategy.family


def _cpu_processes(value: str | None) -> int:
    if value is None:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise LaunchError(f"-N {value}: with --cpu, N is a number of processes (1 or more)")
    return int(value)


def _gpu_indices(gpus: str, num_processes: str | None, cuda_devices: int) -> list[int]:
    """The GPUs to run on: those --gpus names, then the first N of them or a slice (-N)."""
    if gpus.lower() in ("all", "available"):
        indices = list(range(cuda_devices))
    else:
        try:
            indices = [int(part) for part in gpus.strip(",").split(",")]
        except ValueError:
            raise LaunchError(f"--gpus {gpus}: expected 'all' or indices such as 0,1,4") from None
        unknown = [index for index in indices if not 0 <= index < cuda_devices]
        if unknown:
            raise LaunchError(f"--gpus {gpus}: this machine has GPUs 0 to {cuda_devices - 1}")
    if num_processes is not None:
        indices = indices[_gpu_selection(num_processes, len(indices))]
    if not indices:
        raise LaunchError(f"-N {num_processes} --gpus {gpus}: selects no GPU")
    return indices


def _gpu_selection(value: str, available: int) -> slice:
    try:
        if ":" in value:
            bounds = [int(part) if part.strip() else None for part in value.split(":")]
            return slice(*bounds)
        count = int(value)
    except (TypeError, ValueError):
        raise LaunchError(f"-N {value}: expected a number of GPUs or a slice such as 2:") from None
    if not 1 <= count <= available:
        raise LaunchError(f"-N {value}: between 1 and the {available} GPU(s) chosen")
    return slice(0, count)


def _cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
