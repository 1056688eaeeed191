"""Listeners: the ports a broker serves, each with its security protocol, as Kafka writes them.

Role: parse and check ``listeners``, ``advertised_listeners`` and ``listener_security_protocol_map``
(Kafka's own syntax, ``NAME://host:port``) into :class:`Listener` values the network layer binds and
the handlers advertise. A listener's name is its security protocol unless the map names it
(``INTERNAL: SASL_PLAINTEXT``); a client is told the brokers' addresses on the listener it came in
on, so a client inside and one outside each get addresses they can reach.

Invariants: names are unique, as are (host, port) pairs; an advertised listener names a listener
that exists; host ``0.0.0.0`` (or empty) is never advertised (it is not an address a client can
reach: the advertised host must be given).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from kafkalog.errors import KafkalogError


class ListenerError(KafkalogError):
    """A listener definition that cannot be used; the message names it and the rule."""


class SecurityProtocol(StrEnum):
    """Kafka's four: TLS or not, SASL or not."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


_ENDPOINT = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9_]*)://(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\s]*):(?P<port>\d{1,5})")
_UNREACHABLE = ("", "0.0.0.0", "::", "[::]")


@dataclass(frozen=True, slots=True)
class Listener:
    """One port the broker serves: where it binds, what it tells clients, how it is secured."""

    name: str
    security_protocol: SecurityProtocol
    host: str
    port: int
    advertised_host: str
    advertised_port: int

    def with_port(self, port: int) -> Listener:
        """The listener after binding: port 0 became ``port``, and so did its advertised port."""
        advertised = port if self.advertised_port == 0 else self.advertised_port
        return Listener(self.name, self.security_protocol, self.host, port, self.advertised_host, advertised)

    @property
    def endpoint(self) -> str:
        """``NAME://host:port`` as clients are told (and ZooKeeper's registration lists)."""
        return f"{self.name}://{self.advertised_host}:{self.advertised_port}"


def parse_endpoint(text: str, where: str) -> tuple[str, str, int]:
    """``NAME://host:port`` → (NAME, host, port); ListenerError naming ``where`` otherwise."""
    match = _ENDPOINT.fullmatch(text.strip())
    if match is None:
        raise ListenerError(f"{where}: {text!r} is not NAME://host:port (e.g. SASL_SSL://0.0.0.0:9093)")
    port = int(match["port"])
    if port > 65535:
        raise ListenerError(f"{where}: {text!r}: port {port} is not a TCP port")
    return match["name"].upper(), match["host"].strip("[]"), port


def parse_listeners(
    listeners: tuple[str, ...],
    advertised: tuple[str, ...],
    protocol_map: dict[str, str],
) -> tuple[Listener, ...]:
    """The broker's listeners from its three settings (see the module doc for the rules)."""
    known = {p.value for p in SecurityProtocol}
    mapped: dict[str, SecurityProtocol] = {}
    for name, protocol in protocol_map.items():
        if protocol.upper() not in known:
            raise ListenerError(
                f"listener_security_protocol_map.{name}: {protocol!r} is not one of {', '.join(sorted(known))}"
            )
        mapped[name.upper()] = SecurityProtocol(protocol.upper())
    parsed: list[tuple[str, SecurityProtocol, str, int]] = []
    for i, text in enumerate(listeners):
        name, host, port = parse_endpoint(text, f"listeners[{i}]")
        found = mapped.get(name) or (SecurityProtocol(name) if name in known else None)
        if found is None:
            raise ListenerError(
                f"listeners[{i}]: {name} is neither a security protocol ({', '.join(sorted(known))}) nor named"
                " in listener_security_protocol_map"
            )
        if any(name == other for other, *_ in parsed):
            raise ListenerError(f"listeners[{i}]: a second listener named {name} (names must be unique)")
        if any((host, port) == (h, p) and port != 0 for _, _, h, p in parsed):
            raise ListenerError(f"listeners[{i}]: {host}:{port} is taken by another listener")
        parsed.append((name, found, host, port))
    told: dict[str, tuple[str, int]] = {}
    for i, text in enumerate(advertised):
        name, host, port = parse_endpoint(text, f"advertised_listeners[{i}]")
        if name not in {n for n, *_ in parsed}:
            raise ListenerError(f"advertised_listeners[{i}]: no listener is named {name}")
        if host in _UNREACHABLE:
            raise ListenerError(f"advertised_listeners[{i}]: {text!r} is not an address a client can reach")
        told[name] = (host, port)
    out = []
    for name, protocol, host, port in parsed:
        advertised_host, advertised_port = told.get(name, (host, port))
        if advertised_host in _UNREACHABLE:
            raise ListenerError(
                f"listeners: {name} binds {host or 'every address'}, which clients cannot be told: give"
                f" advertised_listeners a {name}://host:port clients reach"
            )
        out.append(Listener(name, protocol, host, port, advertised_host, advertised_port))
    return tuple(out)
