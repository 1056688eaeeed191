"""Who sent a request: what the handlers (and the ACLs) know of the client beyond the request itself."""

from __future__ import annotations

from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"
"""The principal of a connection nobody authenticated (Kafka's name for it)."""


@dataclass(frozen=True, slots=True)
class Caller:
    """The client's address, the listener it came in on (the addresses it is told are that
    listener's) and the principal its connection authenticated as."""

    host: str = ""
    listener: str = "PLAINTEXT"
    principal: str = ANONYMOUS


LOCAL = Caller()
"""A caller in the same process (tests, tools): the default listener, no one authenticated."""
