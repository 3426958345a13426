"""``accmt launch`` picks the port its processes meet on below Linux's ephemeral range, where no
outgoing connection is handed it between the pick and the launcher's bind."""

from __future__ import annotations

import socket

import pytest

from accmt import _rendezvous
from accmt._rendezvous import free_port


def test_the_port_is_free_and_outside_the_ephemeral_range() -> None:
    ports = {free_port() for _ in range(20)}
    assert all(20000 <= port < 32768 for port in ports)
    assert len(ports) > 1  # chosen at random: two launches side by side rarely meet
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_someone_listens_on_is_not_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    block = [port for port in range(20000, 21000) if _bindable(port)][:64]
    monkeypatch.setattr(_rendezvous, "_QUIET_PORTS", block)
    listening = [socket.create_server(("127.0.0.1", port)) for port in block[:-1]]
    try:
        assert {free_port() for _ in range(10)} == {block[-1]}
    finally:
        for sock in listening:
            sock.close()


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
