"""free_port: ports below the ephemeral range, free with their neighbour, not repeated."""

from __future__ import annotations

import socket

from apogee._util import net


def test_free_ports_lie_below_the_ephemeral_range_and_are_not_handed_out_twice() -> None:
    floor = net._ephemeral_floor()
    ports = [net.free_port() for _ in range(300)]
    assert all(port < floor for port in ports)  # no outgoing connection can take one
    assert len(set(ports)) == len(ports)
    taken = set(ports)
    assert not any(port + 1 in taken for port in ports)  # nor a broker's port + 1


def test_a_free_port_and_the_next_one_can_be_listened_on() -> None:
    port = net.free_port()
    with socket.socket() as first, socket.socket() as second:
        first.bind(("127.0.0.1", port))
        second.bind(("127.0.0.1", port + 1))
        first.listen()
        second.listen()
