"""Start real multi-process jobs on this machine's CPUs for the distributed tests."""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

WORKERS = Path(__file__).parent / "workers"


# Ports are handed out below Linux's ephemeral range (32768-60999), where no connecting socket
# (gloo's, the TCP store's clients') is given one by the kernel, and each pytest-xdist worker
# has a block of its own: two tests running side by side never pick the same port between
# checking it and their launcher binding it.
_PORTS_PER_WORKER = 500
_FIRST_PORT = 20000
_next_port = itertools.count()


def _worker_number() -> int:
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # "gw3" under xdist
    return int(name[2:]) if name[2:].isdigit() else 0


def port_block() -> range:
    """This xdist worker's block of ports."""
    first = _FIRST_PORT + _worker_number() * _PORTS_PER_WORKER
    return range(first, first + _PORTS_PER_WORKER)


def free_port() -> int:
    """A loopback port that nothing listens on, from this xdist worker's own block (its lower
    half: a SLURM test cluster's jobs take the upper one)."""
    first, count = port_block().start, _PORTS_PER_WORKER // 2
    for _ in range(count):
        port = first + next(_next_port) % count
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}-{first + count - 1}")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def launch(
    worker: str, nproc: int, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``worker`` with ``args``: plainly on one process, through torchrun on more; whatever
    its end (a test may kill it), with its output."""
    command = [str(WORKERS / worker), *args]
    if nproc > 1:
        command = [
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={nproc}",
            f"--master_port={free_port()}",
            "--max-restarts=0",
            *command,
        ]
    return subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, timeout=timeout, env=_env()
    )


def _run(command: list[str], env: dict[str, str], timeout: float) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} exited {done.returncode}\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-8000:]}"
        )


def torchrun(
    worker: str,
    nproc: int,
    *args: str,
    timeout: float = 300,
    env: dict[str, str] | None = None,
    c10d: bool = False,
) -> None:
    """Run workers/<worker> on ``nproc`` CPU processes through torchrun: its static rendezvous,
    or with ``c10d`` its c10d one (what ``--max-restarts`` and several machines use)."""
    port = free_port()
    rendezvous = (
        ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}"]
        if c10d
        else [f"--master_port={port}"]
    )
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--nnodes=1",
        *rendezvous,
        str(WORKERS / worker),
        *args,
    ]
    _run(command, {**_env(), **(env or {})}, timeout)


def accelerate_launch(worker: str, nproc: int, *args: str, timeout: float = 300) -> None:
    """Run workers/<worker> on ``nproc`` CPU processes through ``accelerate launch``.

    ``--multi_gpu`` it must be: with ``--cpu``, accelerate 1.x starts a single process whatever
    ``--num_processes`` says. On a machine without GPUs, ``--multi_gpu`` runs on gloo.
    """
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_machines=1",
        f"--num_processes={nproc}",
        f"--main_process_port={free_port()}",
        str(WORKERS / worker),
        *args,
    ]
    _run(command, _env(), timeout)


def plain_processes(worker: str, nproc: int, *args: str, timeout: float = 120) -> None:
    """Start ``nproc`` processes with only RANK/WORLD_SIZE set: no launcher, no group."""
    procs = []
    for rank in range(nproc):
        env = {**_env(), "RANK": str(rank), "WORLD_SIZE": str(nproc)}
        for name in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(name, None)
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKERS / worker), *args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"worker exited {proc.returncode}\n{stdout}\n{stderr}")


def read_ranks(out: Path, nproc: int) -> list[dict[str, Any]]:
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(nproc)]
