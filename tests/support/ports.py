"""Free loopback ports: every server in the tests listens on one the kernel handed out."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (bound and released: a peer that loses
    the race to another process fails to start and says so)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
