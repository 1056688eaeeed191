"""A write sent on to the primary registry over HTTP(S), and its answer brought back as it is.

Only the primary writes to the topic; a registry that is not primary forwards every request that
changes the state, with the caller's body, media type and credentials (every registry of a group
reads the same users file), and answers what the primary answered. A forwarded request carries
``FORWARDED_HEADER``: a registry that receives one while it is not primary (the election moved
meanwhile) answers 50003 rather than forwarding it again, so a request never goes round in circles.
A registry that serves HTTPS forwards to ``https://`` URLs only (50003 otherwise): any member of the
group can become primary, and a downgrade would send the caller's credentials in the clear.

``peers`` (the registries of the group, by URL) narrows that further: a registry given them forwards
only to a primary among them (50003 otherwise), and takes forwarded requests only from their
addresses (the server answers 403 to others, :func:`peer_addresses`), so a member that joined the
group without being one of them is never sent a write, nor the caller's credentials.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from kafkalog.schema_registry import errors
from kafkalog.schema_registry.errors import RegistryConfigError

FORWARDED_HEADER: Final = "X-Kafkalog-Registry-Forwarded"
_MAX_ANSWER: Final = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Forwarded:
    status: int
    body: bytes
    content_type: str


def normal_url(url: str) -> str:
    """``scheme://host:port`` in lower case, the port written out: how peers' URLs are compared."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:  # a port that is no number: never equal to a peer's
        return url
    return f"{scheme}://{host}:{port}"


def peer_addresses(peers: Iterable[str]) -> frozenset[str]:
    """The addresses the peers' host names resolve to (forwarded requests are taken from these
    only); RegistryConfigError naming a peer that does not resolve."""
    found: set[str] = set()
    for url in peers:
        host = urlsplit(url).hostname or ""
        try:
            found.update(str(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP))
        except OSError as e:
            raise RegistryConfigError(f"peers: {url}: {host} does not resolve: {e}") from None
    return frozenset(found)


class Forwarder:
    """Sends requests to a primary's URL. Thread-safe (a connection per request)."""

    def __init__(
        self,
        *,
        timeout_s: float,
        tls: ssl.SSLContext | None = None,
        https_only: bool = False,
        peers: Iterable[str] | None = None,
    ) -> None:
        """``https_only``: this registry serves HTTPS, so a write (and the caller's credentials) is never
        sent on over plain HTTP, whatever URL a member of the group advertises. ``peers``: the only
        URLs a write is forwarded to (None: any primary the group elects)."""
        self.timeout_s = timeout_s
        self.tls = tls
        self.https_only = https_only
        self.peers = None if peers is None else frozenset(normal_url(p) for p in peers)

    def forward(self, primary_url: str, method: str, target: str, body: bytes, headers: dict[str, str]) -> Forwarded:
        """``method target`` (``/path?query``) at the primary; 50003 naming the cause if it fails."""
        parts = urlsplit(primary_url)
        if parts.scheme not in ("http", "https") or (self.https_only and parts.scheme != "https"):
            raise errors.forward_error(
                f"Error while forwarding the request to the leader {primary_url}: this registry serves HTTPS"
                " and sends no request (nor its credentials) to a leader without it"
                if self.https_only
                else f"Error while forwarding the request to the leader {primary_url}: not an http(s) URL"
            )
        if self.peers is not None and normal_url(primary_url) not in self.peers:
            raise errors.forward_error(
                f"Error while forwarding the request to the leader {primary_url}: not one of the configured peers"
            )
        host, port = parts.hostname or "", parts.port
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            context = self.tls or ssl.create_default_context()
            connection = http.client.HTTPSConnection(host, port, timeout=self.timeout_s, context=context)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=self.timeout_s)
        try:
            connection.request(method, target, body=body, headers={**headers, FORWARDED_HEADER: "1"})
            answer = connection.getresponse()
            content = answer.read(_MAX_ANSWER + 1)
            if len(content) > _MAX_ANSWER:
                raise errors.forward_error(
                    f"Error while forwarding the request to the leader: an answer over {_MAX_ANSWER} bytes"
                )
            return Forwarded(answer.status, content, answer.getheader("Content-Type") or "application/json")
        except (OSError, http.client.HTTPException, ValueError) as e:  # ValueError: a target http.client refuses
            raise errors.forward_error(
                f"Error while forwarding the request to the leader {primary_url}: {e or type(e).__name__}"
            ) from None
        finally:
            connection.close()
