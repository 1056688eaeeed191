"""The registry's HTTP server in this process, over a store in memory: keep-alive, bounds, TLS, basic
authentication, a write forwarded to the primary; and confluent-kafka's own SchemaRegistryClient
and serializers as the peer (no broker: the registry's topic is tested with one apart)."""

from __future__ import annotations

import base64
import http.client
import json
import select
import socket
import ssl
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkalog.schema_registry.api import Api
from kafkalog.schema_registry.auth import BasicAuth, LoginLimits, PasswordHash, hash_password
from kafkalog.schema_registry.config import RegistryTls
from kafkalog.schema_registry.election import StaticPrimary
from kafkalog.schema_registry.errors import ApiError
from kafkalog.schema_registry.forward import Forwarder
from kafkalog.schema_registry.registry import Registry
from kafkalog.schema_registry.server import HttpLimits, RegistryServer
from kafkalog.schema_registry.store import MemoryStore
from tests.support.certificates import authority
from tests.support.schema_registry import PROTO, protobuf_class, schema_id_of

pytestmark = pytest.mark.unit  # servers in this process only: no process, no peer

V1 = {"type": "record", "name": "Ev", "namespace": "demo", "fields": [{"name": "id", "type": "string"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "n", "type": "int"}]}


@contextmanager
def serving(
    store: MemoryStore | None = None,
    *,
    primary: StaticPrimary | None = None,
    limits: HttpLimits | None = None,
    tls: ssl.SSLContext | None = None,
    auth: BasicAuth | None = None,
    forwarder: Forwarder | None = None,
    peer_addresses: frozenset[str] | None = None,
) -> Iterator[RegistryServer]:
    store = store or MemoryStore()
    server = RegistryServer(
        Api(Registry(store)), store, primary or StaticPrimary(None), forwarder or Forwarder(timeout_s=5),
        port=0, limits=limits or HttpLimits(), tls=tls, auth=auth, peer_addresses=peer_addresses,
    )  # fmt: skip
    server.start()
    try:
        yield server
    finally:
        server.stop()


def request(
    connection: http.client.HTTPConnection,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    connection.request(method, path, body=data, headers=headers or {})
    answer = connection.getresponse()
    content = answer.read()
    return answer.status, json.loads(content) if content else None


def test_requests_share_one_kept_alive_connection() -> None:
    with serving() as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        assert request(connection, "POST", "/subjects/s/versions", {"schema": json.dumps(V1)}) == (200, {"id": 1})
        sock = connection.sock
        assert request(connection, "GET", "/subjects") == (200, ["s"])
        assert request(connection, "GET", "/nothing/here")[0] == 404
        assert request(connection, "GET", "/subjects/s/versions/latest")[1]["id"] == 1
        assert connection.sock is sock, "HTTP/1.1 keep-alive: one connection for every request"
        connection.close()


def test_a_head_request_with_a_body_closes_the_connection() -> None:
    """HEAD's body is never read: the connection ends, or the body would be read as the next request
    (here a smuggled GET)."""
    smuggled = b"GET /subjects HTTP/1.1\r\nHost: x\r\n\r\n"
    with serving() as server, socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"HEAD / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(smuggled), smuggled))
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received.startswith(b"HTTP/1.1 405")
    assert received.count(b"HTTP/1.1 ") == 1, received
    assert b"Connection: close" in received
    with serving() as server, socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n" + smuggled)  # no body: kept alive
        received = b""
        while received.count(b"HTTP/1.1 ") < 2 or not received.endswith(b"[]"):
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
        assert received.startswith(b"HTTP/1.1 405")


def test_bodies_past_the_limit_and_bodies_without_a_length_are_refused() -> None:
    with serving(limits=HttpLimits(max_body_bytes=1000)) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        status, body = request(connection, "POST", "/subjects/s/versions", {"schema": "x" * 2000})
        assert (status, body["error_code"]) == (413, 413)
        connection.close()
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        chunked = b"POST /subjects/s/versions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        raw.sendall(chunked + b"5\r\nhello\r\n0\r\n\r\n")
        assert raw.recv(100).startswith(b"HTTP/1.1 411")
        raw.close()
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        raw.sendall(b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")
        assert raw.recv(100).startswith(b"HTTP/1.1 414"), "a request line is bounded"
        raw.close()
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        raw.sendall(b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(150)) + b"\r\n")
        assert raw.recv(100).startswith(b"HTTP/1.1 431"), "headers are bounded"
        raw.close()


def test_an_idle_connection_is_closed_after_the_socket_timeout() -> None:
    with serving(limits=HttpLimits(socket_timeout_s=0.3)) as server:
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        raw.sendall(b"GET / HT")  # and stalls
        started = time.monotonic()
        assert raw.recv(100) == b"", "closed by the server"
        assert time.monotonic() - started < 3
        raw.close()


def test_connections_past_the_limit_are_refused() -> None:
    with serving(limits=HttpLimits(max_connections=1, socket_timeout_s=5)) as server:
        first = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        first.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert first.recv(1000).startswith(b"HTTP/1.1 200")  # its thread now waits for the next request
        second = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        assert second.recv(1000).startswith(b"HTTP/1.1 503")
        first.close()
        second.close()


def dribble(sock: socket.socket, data: bytes, every_s: float, for_s: float) -> float | None:
    """Send ``data`` a byte at a time, one every ``every_s``, for at most ``for_s``; how long it
    took until the server ended the connection (None: it never did)."""
    started = time.monotonic()
    for byte in data:
        if time.monotonic() - started > for_s:
            return None
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            return time.monotonic() - started
        readable, _, _ = select.select([sock], [], [], every_s)
        if readable:
            try:
                if not sock.recv(65536):
                    return time.monotonic() - started
            except OSError:
                return time.monotonic() - started
    return None


def test_a_request_dribbled_in_is_cut_off_at_the_request_timeout() -> None:
    """Slowloris: every byte comes within the idle timeout, the request never ends."""
    limits = HttpLimits(socket_timeout_s=1.0, request_timeout_s=1.5)
    with serving(limits=limits) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            head = b"GET /subjects HTTP/1.1\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"y" * 20) for i in range(90))
            took = dribble(sock, head, 0.2, 10)
            assert took is not None and took < 4, "headers dribbled in: cut off"
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"POST /subjects/s/versions HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n")
            took = dribble(sock, b"{" * 200, 0.2, 10)
            assert took is not None and took < 4, "a body dribbled in: cut off"
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"POST /subjects/s/versions HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n{")
            assert sock.recv(100).startswith(b"HTTP/1.1 408"), "a late body is answered 408"
        # a connection kept alive between requests is idle, not late: the clock starts at each request
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        assert request(connection, "GET", "/subjects") == (200, [])
        time.sleep(0.9)
        assert request(connection, "GET", "/subjects") == (200, [])
        connection.close()


def test_a_request_that_does_not_log_in_is_refused_before_its_body_is_read() -> None:
    auth = BasicAuth({"alice": hash_password("secret", iterations=1000)})
    with (
        serving(auth=auth, limits=HttpLimits(max_body_bytes=200_000_000, socket_timeout_s=10)) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock,
    ):
        sock.sendall(b"POST /subjects/s/versions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
        started = time.monotonic()
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 401"), answer[:100]
        assert time.monotonic() - started < 2
        assert b"Connection: close" in answer
    # logged in, the same length is past the limit for everyone: refused unread too
    good = "Basic " + base64.b64encode(b"alice:secret").decode()
    with (
        serving(auth=auth, limits=HttpLimits(max_body_bytes=1000)) as small,
        socket.create_connection(("127.0.0.1", small.port), timeout=5) as sock,
    ):
        sock.sendall(
            b"POST /subjects/s/versions HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n"
            b"Content-Length: 100000000\r\n\r\n" % good.encode()
        )
        assert sock.recv(65536).startswith(b"HTTP/1.1 413")


def test_logins_past_their_budget_are_answered_429_unchecked() -> None:
    auth = BasicAuth(
        {"alice": hash_password("secret", iterations=1000)},
        LoginLimits(per_client_per_s=1000, total_per_s=100_000, burst_s=2.0),
    )
    good = {"Authorization": "Basic " + base64.b64encode(b"alice:secret").decode()}
    with serving(auth=auth) as server:

        def ask(headers: dict[str, str]) -> tuple[int, Any]:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
            try:
                return request(connection, "GET", "/subjects", headers=headers)
            finally:
                connection.close()

        assert ask(good) == (200, [])
        statuses = []
        for i in range(4):
            status, body = ask({"Authorization": "Basic " + base64.b64encode(b"alice:guess%d" % i).decode()})
            statuses.append((status, body["error_code"]))
        assert statuses[0] == (401, 401) and statuses[-1] == (429, 429), statuses
        assert ask(good) == (200, []), "a known login costs nothing"


def users(tmp_path: Path) -> BasicAuth:
    return BasicAuth({"alice": hash_password("secret", iterations=1000)})


def test_basic_auth_is_asked_on_every_request(tmp_path: Path) -> None:
    with serving(auth=users(tmp_path)) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        status, body = request(connection, "GET", "/subjects")
        assert (status, body["error_code"]) == (401, 401)
        status, body = request(connection, "GET", "/subjects", headers={"Authorization": "Basic é"})
        assert (status, body["error_code"]) == (401, 401), "a header that is not ASCII"
        for wrong in ("alice:nope", "bob:secret", "alice", ""):
            header = {"Authorization": "Basic " + base64.b64encode(wrong.encode()).decode()}
            assert request(connection, "GET", "/subjects", headers=header)[0] == 401, wrong
        assert request(connection, "GET", "/subjects", headers={"Authorization": "Bearer x"})[0] == 401
        good = {"Authorization": "Basic " + base64.b64encode(b"alice:secret").decode()}
        assert request(connection, "GET", "/subjects", headers=good) == (200, [])
        assert request(connection, "GET", "/subjects", headers=good) == (200, []), "the remembered password"
        connection.close()


def test_a_registry_that_is_not_primary_forwards_writes_and_serves_reads(tmp_path: Path) -> None:
    shared = MemoryStore()  # both read one store, as two registries read one topic
    auth = users(tmp_path)
    good = {"Authorization": "Basic " + base64.b64encode(b"alice:secret").decode()}
    with serving(shared, auth=auth) as primary:
        url = f"http://127.0.0.1:{primary.port}"
        with serving(shared, primary=StaticPrimary(url, own=False), auth=auth) as secondary:
            connection = http.client.HTTPConnection("127.0.0.1", secondary.port, timeout=5)
            body = {"schema": json.dumps(V1)}
            assert request(connection, "POST", "/subjects/s/versions", body, good) == (200, {"id": 1})
            assert request(connection, "POST", "/subjects/s", body, good)[1]["version"] == 1, "a lookup is a read"
            status, answer = request(connection, "POST", "/subjects/s/versions", {"schema": json.dumps(V2)}, good)
            assert (status, answer["error_code"]) == (409, 409), "the primary's answer, as it is"
            assert request(connection, "PUT", "/config/s", {"compatibility": "NONE"}, good)[0] == 200
            assert request(connection, "DELETE", "/subjects/s/versions/1", None, good) == (200, 1)
            assert len(shared.log) == 3
            forwarded = {**good, "X-Kafkalog-Registry-Forwarded": "1"}
            status, answer = request(connection, "DELETE", "/subjects/s", None, forwarded)
            assert (status, answer["error_code"]) == (500, 50003), "a forwarded request is never forwarded again"
            connection.close()
        with serving(shared, primary=StaticPrimary(None, own=False)) as orphan:
            connection = http.client.HTTPConnection("127.0.0.1", orphan.port, timeout=5)
            status, answer = request(connection, "PUT", "/config", {"compatibility": "NONE"})
            assert (status, answer) == (500, {"error_code": 50004, "message": "Leader not known."})
            connection.close()
    with serving(shared, primary=StaticPrimary(url, own=False)) as cut_off:  # the primary is gone
        connection = http.client.HTTPConnection("127.0.0.1", cut_off.port, timeout=5)
        status, answer = request(connection, "PUT", "/config", {"compatibility": "NONE"})
        assert (status, answer["error_code"]) == (500, 50003)
        assert answer["message"].startswith("Error while forwarding the request to the leader")
        connection.close()


def test_writes_are_forwarded_to_and_taken_from_the_configured_peers_only() -> None:
    shared = MemoryStore()
    level = {"compatibility": "NONE"}
    forwarded = {"X-Kafkalog-Registry-Forwarded": "1"}
    with serving(shared, peer_addresses=frozenset({"127.0.0.2"})) as primary:
        url = f"http://127.0.0.1:{primary.port}"
        elsewhere = Forwarder(timeout_s=5, peers=["http://127.0.0.1:1", "https://127.0.0.1:" + str(primary.port)])
        with serving(shared, primary=StaticPrimary(url, own=False), forwarder=elsewhere) as secondary:
            connection = http.client.HTTPConnection("127.0.0.1", secondary.port, timeout=5)
            status, answer = request(connection, "PUT", "/config", level)
            assert (status, answer["error_code"]) == (500, 50003)
            assert answer["message"].endswith("not one of the configured peers")
            connection.close()
        assert shared.log == [], "nothing sent to a primary that is not a peer"

        connection = http.client.HTTPConnection("127.0.0.1", primary.port, timeout=5)
        status, answer = request(connection, "PUT", "/config", level, forwarded)
        assert (status, answer["error_code"]) == (403, 40301)
        assert answer["message"].endswith("not from 127.0.0.1")
        assert request(connection, "PUT", "/config", level) == (200, level), "a client's own write"
        connection.close()
        peer = http.client.HTTPConnection("127.0.0.1", primary.port, timeout=5, source_address=("127.0.0.2", 0))
        assert request(peer, "PUT", "/config", level, forwarded) == (200, level), "from a peer's address"
        peer.close()

    with serving(shared) as primary:
        among = Forwarder(timeout_s=5, peers=[f"HTTP://127.0.0.1:{primary.port}/"])  # written another way
        url = f"http://127.0.0.1:{primary.port}"
        with serving(shared, primary=StaticPrimary(url, own=False), forwarder=among) as secondary:
            connection = http.client.HTTPConnection("127.0.0.1", secondary.port, timeout=5)
            assert request(connection, "PUT", "/config", {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
            connection.close()


def test_an_https_registry_never_forwards_to_an_http_primary() -> None:
    """Any member of the group can advertise any URL and become primary: a registry that serves HTTPS
    must not send a write, with the caller's credentials, over plain HTTP to it."""
    shared = MemoryStore()
    secret = {"Authorization": "Basic " + base64.b64encode(b"alice:secret").decode()}
    with serving(shared) as plain_primary:
        url = f"http://127.0.0.1:{plain_primary.port}"
        for forwarder in (Forwarder(timeout_s=5, https_only=True), Forwarder(timeout_s=5)):
            with serving(shared, primary=StaticPrimary(url, own=False), forwarder=forwarder) as secondary:
                connection = http.client.HTTPConnection("127.0.0.1", secondary.port, timeout=5)
                status, answer = request(connection, "PUT", "/config", {"compatibility": "NONE"}, secret)
                connection.close()
            if forwarder.https_only:
                assert (status, answer["error_code"]) == (500, 50003)
                assert "serves HTTPS" in answer["message"]
                assert shared.log == [], "nothing reached the http primary"
            else:
                assert status == 200, "an http registry forwards to an http primary"
                assert len(shared.log) == 1
    with pytest.raises(ApiError, match="not an http"):
        Forwarder(timeout_s=5).forward("ftp://127.0.0.1:1", "PUT", "/config", b"{}", {})


def test_confluent_kafkas_client_and_serializers_against_the_registry() -> None:
    with serving() as server, ExitStack() as clients:
        url = f"http://127.0.0.1:{server.port}"
        client = clients.enter_context(SchemaRegistryClient({"url": url}))
        schema_id = client.register_schema("t-value", Schema(json.dumps(V1), "AVRO"))
        assert schema_id == 1
        assert json.loads(client.get_schema(schema_id).schema_str) == V1
        latest = client.get_latest_version("t-value")
        assert (latest.version, latest.schema_id) == (1, 1)
        assert client.lookup_schema("t-value", Schema(json.dumps(V1), "AVRO")).version == 1
        assert client.get_subjects() == ["t-value"]
        assert client.get_versions("t-value") == [1]
        assert client.get_compatibility() == "BACKWARD"
        assert client.test_compatibility("t-value", Schema(json.dumps(V2), "AVRO")) is False
        with pytest.raises(SchemaRegistryError) as refused:
            client.register_schema("t-value", Schema(json.dumps(V2), "AVRO"))
        assert refused.value.http_status_code == 409 and refused.value.error_code == 409
        assert 'incompatible with an earlier schema for subject "t-value"' in refused.value.error_message
        with pytest.raises(SchemaRegistryError) as missing:
            client.get_schema(99)
        assert (missing.value.http_status_code, missing.value.error_code) == (404, 40403)

        # the serializers (they probe /associations first, and take its 404)
        fresh = clients.enter_context(SchemaRegistryClient({"url": url}))
        context = SerializationContext("events", MessageField.VALUE)
        avro_out = AvroSerializer(fresh, json.dumps(V1))({"id": "a"}, context)
        assert avro_out is not None and schema_id_of(avro_out) == 1
        assert AvroDeserializer(fresh)(avro_out, context) == {"id": "a"}
        json_schema = {"type": "object", "title": "Ev", "properties": {"id": {"type": "string"}}}
        json_context = SerializationContext("j", MessageField.VALUE)
        json_out = JSONSerializer(json.dumps(json_schema), fresh)({"id": "j"}, json_context)
        assert json_out is not None and schema_id_of(json_out) == 2
        assert JSONDeserializer(json.dumps(json_schema))(json_out, json_context) == {"id": "j"}
        # Python's ProtobufSerializer registers a base64 descriptor, its well-known imports unregistered
        event = protobuf_class(PROTO, "demo.Ev")
        pb_context = SerializationContext("pb", MessageField.VALUE)
        message = event(id="p", n=5)
        message.at.seconds = 100
        pb_out = ProtobufSerializer(event, fresh, {"use.deprecated.format": False})(message, pb_context)
        assert pb_out is not None and schema_id_of(pb_out) == 3
        assert pb_out[5:6] == b"\x02", "message indexes [1]: Ev is the second message"
        assert ProtobufDeserializer(event, {"use.deprecated.format": False})(pb_out, pb_context) == message
        stored = client.get_latest_version("pb-value").schema
        assert stored.schema_type == "PROTOBUF" and 'import "google/protobuf/timestamp.proto";' in stored.schema_str
        assert client.delete_subject("t-value") == [1]
        assert client.delete_subject("t-value", permanent=True) == [1]


def test_tls_and_basic_auth_through_confluent_kafkas_client(tmp_path: Path) -> None:
    ca = authority(tmp_path)
    issued = ca.issue("registry", [], server=True)
    tls = RegistryTls(issued.certificate, issued.key, ca_file=ca.certificate)
    with serving(tls=tls.server_context(), auth=users(tmp_path)) as server, ExitStack() as clients:
        url = f"https://127.0.0.1:{server.port}"
        trusting = {"url": url, "ssl.ca.location": str(ca.certificate)}
        client = clients.enter_context(SchemaRegistryClient({**trusting, "basic.auth.user.info": "alice:secret"}))
        assert client.register_schema("s", Schema(json.dumps(V1), "AVRO")) == 1
        assert client.get_subjects() == ["s"]
        wrong = clients.enter_context(SchemaRegistryClient({**trusting, "basic.auth.user.info": "alice:wrong"}))
        with pytest.raises(SchemaRegistryError) as refused:
            wrong.get_subjects()
        assert refused.value.http_status_code == 401
        untrusting = clients.enter_context(SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:secret"}))
        with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
            untrusting.get_subjects()
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as plain:
            plain.sendall(b"GET / HTTP/1.1\r\n\r\n")  # not TLS: the handshake fails, the connection ends
            try:
                got = plain.recv(100)
            except ConnectionResetError:
                got = b""
        assert not got.startswith(b"HTTP/"), "no HTTP without TLS"
        assert client.get_subjects() == ["s"], "a failed handshake stopped nobody else"


def test_the_users_file_hash_format() -> None:
    hashed = hash_password("pw", iterations=1000)
    again = PasswordHash.of(str(hashed))
    assert again == hashed and again.matches("pw") and not again.matches("PW")
    assert str(hashed).startswith("pbkdf2-sha256$1000$")
