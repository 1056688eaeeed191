"""What a stranger can make a SASL broker do before logging in, tried as an attacker would, on a
broker process of its own: frames larger than a login's are refused before they are read (the
broker's own RSS is measured under the attack), the bytes of every connection not yet logged in are
bounded together, a wrong password is answered only after the failed-login delay and logged once
per interval, and each listener offers only its own mechanisms (PLAIN nowhere in clear)."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.protocol import ApiKey, ErrorCode, decode_response, encode_request, lookup
from kafkalog.sasl import ScramClient
from kafkalog.server.security.credentials import UsersFile
from tests.support.kafkalog import BrokerProcess, recv_exact

pytestmark = pytest.mark.integration

PASSWORD = "correct horse"
BUDGET = 4 * 1024 * 1024
DELAY_MS = 300


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("prelogin")
    users = UsersFile(root / "users.json")
    users.set_password("alice", PASSWORD, ["SCRAM-SHA-256", "SCRAM-SHA-512"])
    config: dict[str, Any] = {
        "listeners": ["SASL_PLAINTEXT://127.0.0.1:0", "LOCAL://127.0.0.1:0"],
        "listener_security_protocol_map": {"LOCAL": "SASL_PLAINTEXT"},
        "sasl": {"users_file": str(users.path), "listener_mechanisms": {"LOCAL": ["SCRAM-SHA-256"]},
                 "max_login_buffer_bytes": BUDGET, "failed_authentication_delay_ms": DELAY_MS},
    }  # fmt: skip
    with BrokerProcess(root / "data", **config) as process:
        yield process


def _request(sock: socket.socket, key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    api = lookup(key, version)
    sock.sendall(encode_request(api, 9, "probe", body))
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return decode_response(api, recv_exact(sock, size))[1]


def _is_closed(sock: socket.socket, timeout: float = 5) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:  # reset: closed with our bytes unread
        return True


def _connect(broker: BrokerProcess, listener: str = "SASL_PLAINTEXT") -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.ports[listener]), timeout=10)


def test_a_stranger_s_huge_frames_are_refused_before_they_are_read(broker: BrokerProcess) -> None:
    """Eight connections announce 98 MiB frames and send 8 MiB of each: before, the broker buffered
    them (38 to 823 MiB); now each is closed at its length."""
    before = broker.rss_bytes()
    with contextlib.ExitStack() as stack:
        attackers = [stack.enter_context(_connect(broker)) for _ in range(8)]
        chunk = b"\0" * (1024 * 1024)
        for sock in attackers:
            with contextlib.suppress(OSError):  # the broker closes mid-send
                sock.sendall(struct.pack(">i", 98 * 1024 * 1024))
                for _ in range(8):
                    sock.sendall(chunk)
        assert all(_is_closed(sock) for sock in attackers)
    grown = broker.rss_bytes() - before
    assert grown < 16 * 1024 * 1024, f"the broker grew by {grown / 2**20:.1f} MiB"
    assert "a frame of 102760448 bytes before logging in (sasl.max_receive_bytes is 524288)" in broker.log_text()
    # a frame of a login's size is still read and answered
    with _connect(broker) as sock:
        assert _request(sock, ApiKey.API_VERSIONS, 0, {})["error_code"] == 0


def test_what_strangers_hold_together_is_bounded(broker: BrokerProcess) -> None:
    """Each connection keeps a frame under the per-frame limit unfinished (500 KiB of it): the
    connections past the shared budget (4 MiB here) are closed, the rest stay."""
    before = broker.rss_bytes()
    part = 500 * 1024
    with contextlib.ExitStack() as stack:
        strangers = [stack.enter_context(_connect(broker)) for _ in range(24)]
        for sock in strangers:
            with contextlib.suppress(OSError):
                sock.sendall(struct.pack(">i", 510 * 1024) + b"\0" * part)
        time.sleep(1)
        closed = [_is_closed(sock, timeout=0.2) for sock in strangers]
        grown = broker.rss_bytes() - before
        # while they fill the budget, a client logging in is not refused: a login's frames are small
        with _connect(broker) as client:
            assert _login(client, PASSWORD)["error_code"] == ErrorCode.NONE
            assert _request(client, ApiKey.METADATA, 1, {"topics": []})["brokers"]
    kept = closed.count(False)
    assert 0 < kept <= BUDGET // part and closed.count(True) == len(strangers) - kept, closed
    assert grown < 12 * 1024 * 1024, f"the broker grew by {grown / 2**20:.1f} MiB"
    assert "would go over sasl.max_login_buffer_bytes (4194304)" in broker.log_text()
    with _connect(broker) as sock:  # the budget came back with the closed connections
        assert _request(sock, ApiKey.API_VERSIONS, 0, {})["error_code"] == 0


def test_a_stranger_s_unread_answers_are_bounded(broker: BrokerProcess) -> None:
    """Thirty connections each pipeline 20,000 ApiVersions requests and read none of the answers
    (184 bytes each): before login a connection stops being read once 64 KiB of answers wait, and
    those count in the budget (before, each queued up to 8 MiB: 17.6 MiB for thirty)."""
    before = broker.rss_bytes()
    request = encode_request(lookup(ApiKey.API_VERSIONS, 0), 1, "p", {})
    with contextlib.ExitStack() as stack:
        strangers = [stack.enter_context(_connect(broker)) for _ in range(30)]
        for sock in strangers:
            sock.setblocking(False)
            with contextlib.suppress(OSError):  # the kernel's buffers fill: the broker stopped reading
                sock.send(request * 20_000)
        time.sleep(2)
        grown = broker.rss_bytes() - before
    assert grown < 12 * 1024 * 1024, f"the broker grew by {grown / 2**20:.1f} MiB"


def _login(sock: socket.socket, password: str, user: str = "alice") -> dict[str, Any]:
    assert _request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})["error_code"] == 0
    client = ScramClient("SCRAM-SHA-512", user, password)
    first = _request(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.first()})
    return _request(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.final(first["auth_bytes"])})


def _wrong_login(broker: BrokerProcess, user: str = "alice") -> float:
    """One SCRAM login with a wrong password, as a client in a retry loop makes it; seconds from
    the proof sent to the refusal."""
    with _connect(broker) as sock:
        assert _request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})["error_code"] == 0
        client = ScramClient("SCRAM-SHA-512", user, "wrong")
        first = _request(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.first()})
        started = time.monotonic()
        final = _request(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.final(first["auth_bytes"])})
        waited = time.monotonic() - started
        assert final["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert _is_closed(sock)
    return waited


def test_a_wrong_password_waits_out_the_delay_and_is_logged_once_per_interval(broker: BrokerProcess) -> None:
    """Twelve refusals from one address, half of them for made-up names (a key with the user in
    it would give each its own line): one line, at most."""
    logged_before = broker.log_text().count("authentication failed for user")
    waits = [_wrong_login(broker, "alice" if i % 2 else f"made-up-{i}") for i in range(12)]
    assert min(waits) >= DELAY_MS / 1000 * 0.95, waits
    lines = broker.log_text().count("authentication failed for user") - logged_before
    assert lines <= 1, f"{lines} log lines for 12 refusals of one client"


def test_each_listener_offers_its_own_mechanisms_and_plain_is_not_offered_in_clear(broker: BrokerProcess) -> None:
    with _connect(broker) as default, _connect(broker, "LOCAL") as local:
        offered = _request(default, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert offered == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                           "mechanisms": ["SCRAM-SHA-512", "SCRAM-SHA-256"]}  # fmt: skip
        own = _request(local, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
        assert own == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["SCRAM-SHA-256"]}
    with _connect(broker, "LOCAL") as local:
        assert _request(local, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        scram = ScramClient("SCRAM-SHA-256", "alice", PASSWORD)
        first = _request(local, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.first()})
        final = _request(local, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.final(first["auth_bytes"])})
        assert final["error_code"] == 0
        assert _request(local, ApiKey.METADATA, 1, {"topics": []})["brokers"]


def test_plain_on_a_listener_without_tls_stops_the_broker_unless_allowed(tmp_path: Path) -> None:
    users = UsersFile(tmp_path / "users.json")
    users.set_password("alice", PASSWORD, ["SCRAM-SHA-512"])
    refused = BrokerProcess(tmp_path / "data", listeners=["SASL_PLAINTEXT://127.0.0.1:0"],
                            sasl={"users_file": str(users.path), "mechanisms": ["SCRAM-SHA-512", "PLAIN"]})  # fmt: skip
    with pytest.raises(RuntimeError, match="PLAIN is offered on listener SASL_PLAINTEXT"):
        refused.start(timeout=20)
