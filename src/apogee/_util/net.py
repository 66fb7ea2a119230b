"""This host's address as peers see it.

Owns: ``local_ipv4`` (the address of the interface outgoing traffic leaves
by), which client ids and message ids carry. Imports: stdlib.
"""

from __future__ import annotations

import functools
import socket


@functools.cache
def local_ipv4() -> str:
    """The IPv4 address of the outgoing interface; 127.0.0.1 without a network."""
    # A connected UDP socket reveals the outgoing interface without sending anything.
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("10.255.255.255", 1))
            address: str = sock.getsockname()[0]
            return address
    except OSError:
        return "127.0.0.1"
