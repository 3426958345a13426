"""Where the processes of ``accmt launch`` meet: one machine or several, restarts or none;
and the checks of the options that say so."""

from __future__ import annotations

import argparse
import random
import socket

import attrs

from ._errors import LaunchError


@attrs.frozen
class Rendezvous:
    """Where and how the processes of every machine meet."""

    backend: str
    address: str
    port: int

    @property
    def endpoint(self) -> str:
        return f"{self.address}:{self.port}"


def rendezvous(options: argparse.Namespace) -> Rendezvous:
    machines, rank = options.num_machines, options.machine_rank
    if rank >= machines:
        raise LaunchError(
            f"--machine-rank {rank}: with --num-machines {machines}, 0 to {machines - 1}"
        )
    several = machines > 1
    if several and (options.main_address is None or options.main_port is None):
        raise LaunchError(
            f"--num-machines {machines}: give --main-address and --main-port, machine 0's "
            "address and a port every machine can reach, the same on each machine"
        )
    backend = options.rdzv_backend or ("c10d" if options.max_restarts else "static")
    address = options.main_address or "127.0.0.1"
    return Rendezvous(backend, address, options.main_port or free_port())


def count(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number (0 or more), got {value!r}")
    return int(value)


def positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number (1 or more), got {value!r}")
    return int(value)


def port(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port (1 to 65535), got {value!r}")
    return int(value)


# Below Linux's ephemeral range (32768-60999): a port the kernel hands out to outgoing
# connections (gloo's, a TCP store client's) can be taken between this check and the
# launcher's bind; one chosen here is taken only by another program listening on it.
_QUIET_PORTS = range(20000, 32768)


def free_port() -> int:
    """A loopback port that nothing listens on, at random outside the ephemeral range."""
    for candidate in random.sample(_QUIET_PORTS, 64):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return candidate
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
