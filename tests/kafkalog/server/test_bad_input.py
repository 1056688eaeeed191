"""Bad input and abuse against a real broker process (reliability matrix P1-P9): lying sizes,
malformed headers, unknown APIs, lying inner counts, a bad CRC in one partition, oversized messages,
fetch sizes smaller than a message, slow senders, connection floods, clients that vanish. The broker
stays up, its memory and descriptors stay bounded, and well-behaved clients are unaffected."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.protocol import VERSION_RANGES, ApiKey, ErrorCode, decode_response, encode_request, lookup
from kafkalog.record import MessageSetBuilder, decode_all
from kafkalog.record.batch_format import RecordInput, encode_batch
from tests.support.kafkalog import BrokerProcess, recv_exact

MAX_REQUEST = 1024 * 1024
MAX_CONNECTIONS = 24
MAX_MESSAGE = 10_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("bad-input")
    with BrokerProcess(
        root / "data",
        default_partitions=2,
        log={"max_message_bytes": MAX_MESSAGE},
        limits={
            "max_request_bytes": MAX_REQUEST,
            "max_connections_per_ip": MAX_CONNECTIONS,
            "frame_read_timeout_ms": 1000,
            "idle_timeout_ms": 60_000,
        },
    ) as running:
        yield running


def connect(broker: BrokerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def closed_by_peer(sock: socket.socket, within: float = 5.0) -> bool:
    sock.settimeout(within)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def request(sock: socket.socket, key: ApiKey, version: int, body: dict[str, object], cid: int = 1) -> dict[str, object]:
    api = lookup(key, version)
    sock.sendall(encode_request(api, cid, "bad-input-test", body))
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    correlation_id, response = decode_response(api, recv_exact(sock, size))
    assert correlation_id == cid
    return response


def healthy(broker: BrokerProcess) -> None:
    """A well-behaved client still gets answers."""
    with connect(broker) as sock:
        response = request(sock, ApiKey.API_VERSIONS, 0, {})
        assert response["error_code"] == 0


def open_fds(broker: BrokerProcess) -> int:
    assert broker.process is not None
    return len(list(Path(f"/proc/{broker.process.pid}/fd").iterdir()))


def produce(sock: socket.socket, topic: str, sets: dict[int, bytes], acks: int = 1) -> dict[int, dict[str, int]]:
    body = {
        "acks": acks,
        "timeout_ms": 1000,
        "topic_data": [{"topic": topic, "data": [{"partition": p, "record_set": s} for p, s in sets.items()]}],
    }
    response = request(sock, ApiKey.PRODUCE, 2, body)
    return {p["partition"]: p for p in response["responses"][0]["partition_responses"]}  # type: ignore[index]


def one_set(value: bytes, *, key: bytes | None = None) -> bytes:
    builder = MessageSetBuilder()
    builder.append(value, key, 1000)
    return builder.build()


def ensure_topic(sock: socket.socket, topic: str) -> None:
    request(sock, ApiKey.METADATA, 1, {"topics": [{"name": topic}]})  # auto-creates it


# ---------------------------------------------------------------------------------------- P1, P2


@pytest.mark.parametrize("size", [2**31 - 1, MAX_REQUEST + 1, -1, -(2**31)])
def test_a_size_prefix_outside_the_limit_closes_without_allocating(broker: BrokerProcess, size: int) -> None:
    rss_before = broker.rss_bytes()
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", size) + b"\x00" * 64)
        assert closed_by_peer(sock)
    assert broker.rss_bytes() - rss_before < 8 * 1024 * 1024
    healthy(broker)


def test_a_request_of_exactly_the_limit_is_read(broker: BrokerProcess) -> None:
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", MAX_REQUEST))
        assert not closed_by_peer(sock, within=0.5), "a frame at the limit is allowed to arrive"


@pytest.mark.parametrize("frame", [b"", b"\x00\x03\x00", b"\x00\x03\x00\x00\x00\x00\x00\x01"])
def test_zero_and_truncated_frames_close_cleanly(broker: BrokerProcess, frame: bytes) -> None:
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        assert closed_by_peer(sock)
    healthy(broker)


def test_a_frame_cut_short_by_the_client_leaves_no_trace(broker: BrokerProcess) -> None:
    before = open_fds(broker)
    for _ in range(20):
        with connect(broker) as sock:
            sock.sendall(struct.pack(">i", 5000) + b"x" * 100)
    time.sleep(0.5)
    healthy(broker)
    assert open_fds(broker) <= before + 2
    assert "Traceback" not in broker.log_path.read_text()


# -------------------------------------------------------------------------------------------- P3


def _frame(api_key: int, version: int, rest: bytes = b"", client_id: bytes | None = b"c") -> bytes:
    cid = struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    payload = struct.pack(">hhi", api_key, version, 7) + cid + rest
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (-1, 0),
        (9999, 0),
        (ApiKey.METADATA, -1),
        (ApiKey.METADATA, 99),
        (ApiKey.PRODUCE, VERSION_RANGES[ApiKey.PRODUCE][1] + 1),
    ],
)
def test_unknown_apis_and_versions_disconnect(broker: BrokerProcess, api_key: int, version: int) -> None:
    """Nothing a client could read can be answered to an API or version we know nothing of."""
    with connect(broker) as sock:
        sock.sendall(_frame(api_key, version, struct.pack(">i", 0)))
        assert closed_by_peer(sock)
    healthy(broker)
    assert f"v{version} from 'c' at 127.0.0.1:" in broker.log_text()  # named in the log, with its client


@pytest.mark.parametrize("version", [0, 1])
def test_a_sasl_handshake_on_a_plaintext_listener_is_told_no_mechanism_and_goes_on(
    broker: BrokerProcess, version: int
) -> None:
    """A client configured for SASL against a listener without it gets an error it reports (no
    mechanism offered) instead of a closed connection it would retry forever."""
    with connect(broker) as sock:
        answer = request(sock, ApiKey.SASL_HANDSHAKE, version, {"mechanism": "SCRAM-SHA-512"})
        assert answer == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": []}
        assert request(sock, ApiKey.API_VERSIONS, 0, {})["error_code"] == 0  # the connection goes on


def test_a_sasl_authenticate_on_a_plaintext_listener_is_refused_cleanly(broker: BrokerProcess) -> None:
    with connect(broker) as sock:
        answer = request(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"n,,n=alice,r=x"})
        assert answer["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert closed_by_peer(sock)
    healthy(broker)
    assert "refused: SaslAuthenticate while authenticated" in broker.log_text()
    assert "Traceback" not in broker.log_text()


def test_a_header_only_request_disconnects(broker: BrokerProcess) -> None:
    with connect(broker) as sock:
        sock.sendall(_frame(ApiKey.METADATA, 0))  # no topics array at all
        assert closed_by_peer(sock)


@pytest.mark.parametrize("client_id", [None, b""])
def test_null_and_empty_client_ids_are_served(broker: BrokerProcess, client_id: bytes | None) -> None:
    with connect(broker) as sock:
        sock.sendall(_frame(ApiKey.METADATA, 0, struct.pack(">i", 0), client_id=client_id))
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        correlation_id, body = decode_response(lookup(ApiKey.METADATA, 0), recv_exact(sock, size))
        assert correlation_id == 7 and body["brokers"]


def test_an_api_versions_request_too_new_gets_our_ranges(broker: BrokerProcess) -> None:
    with connect(broker) as sock:
        sock.sendall(_frame(ApiKey.API_VERSIONS, 4, b"\x00"))  # v4: flexible header (tagged fields)
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        correlation_id, body = decode_response(lookup(ApiKey.API_VERSIONS, 0), recv_exact(sock, size))
        assert correlation_id == 7 and body["error_code"] == 35
        assert {v["api_key"]: (v["min_version"], v["max_version"]) for v in body["api_versions"]} == {
            int(k): r for k, r in VERSION_RANGES.items()
        }


# -------------------------------------------------------------------------------------------- P4


@pytest.mark.parametrize(
    "rest",
    [
        struct.pack(">i", 2**31 - 1),  # a topics array claiming 2^31-1 entries
        struct.pack(">ih", 1, 30000) + b"x" * 20,  # a topic name claiming 30000 bytes
        struct.pack(">ih", 1, -5),  # a negative string length that is not -1
        struct.pack(">i", -7),  # a negative array count that is not -1
    ],
)
def test_lying_inner_lengths_disconnect_with_bounded_memory(broker: BrokerProcess, rest: bytes) -> None:
    rss_before = broker.rss_bytes()
    with connect(broker) as sock:
        sock.sendall(_frame(ApiKey.METADATA, 1, rest))
        assert closed_by_peer(sock)
    assert broker.rss_bytes() - rss_before < 8 * 1024 * 1024
    healthy(broker)


# -------------------------------------------------------------------------------------------- P5


def test_a_bad_crc_in_one_partition_rejects_only_that_partition(broker: BrokerProcess) -> None:
    with connect(broker) as sock:
        ensure_topic(sock, "p5")
        good = one_set(b"good")
        bad = bytearray(one_set(b"bad!"))
        bad[-1] ^= 0x01  # flipped after the CRC was computed
        answers = produce(sock, "p5", {0: good, 1: bytes(bad)})
        assert answers[0]["error_code"] == 0 and answers[0]["base_offset"] == 0
        assert answers[1]["error_code"] == 2 and answers[1]["base_offset"] == -1
        offsets = request(
            sock,
            ApiKey.LIST_OFFSETS,
            1,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": "p5",
                        "partitions": [{"partition": 0, "timestamp": -1}, {"partition": 1, "timestamp": -1}],
                    }
                ],
            },
        )
        ends = {p["partition"]: p["offset"] for p in offsets["responses"][0]["partition_responses"]}  # type: ignore[index]
        assert ends == {0: 1, 1: 0}, "nothing of the bad partition was appended"


# -------------------------------------------------------------------------------------------- P6


def test_message_size_limit_boundaries(broker: BrokerProcess) -> None:
    """max_message_bytes bounds an entry as the log stores it: a record batch of exactly the limit
    is taken, one byte more is MESSAGE_TOO_LARGE."""
    with connect(broker) as sock:
        ensure_topic(sock, "p6")
        for size, error in ((MAX_MESSAGE - 1, 0), (MAX_MESSAGE, 0), (MAX_MESSAGE + 1, 10)):
            answer = produce(sock, "p6", {0: batch_of_size(size)})[0]
            assert answer["error_code"] == error, size


def batch_of_size(size: int) -> bytes:
    """A one-record batch of exactly ``size`` bytes (the value's varint length grows with it)."""
    for length in range(size, 0, -1):
        batch = encode_batch([RecordInput(None, b"x" * length, 1000)])
        if len(batch) == size:
            return batch
        if len(batch) < size:
            break
    raise AssertionError(f"no one-record batch is exactly {size} bytes")


@pytest.mark.parametrize("version", [0, 2, 3])
def test_a_fetch_smaller_than_one_message_still_makes_progress(broker: BrokerProcess, version: int) -> None:
    topic = f"p6-fetch-v{version}"
    with connect(broker) as sock:
        ensure_topic(sock, topic)
        values = [bytes([65 + i]) * 3000 for i in range(3)]
        for value in values:
            produce(sock, topic, {0: one_set(value)})
        got = []
        offset = 0
        while offset < 3:
            body = {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": 10,
                "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset, "max_bytes": 10}]}],
            }
            response = request(sock, ApiKey.FETCH, version, body)
            part = response["responses"][0]["partition_responses"][0]  # type: ignore[index]
            assert part["error_code"] == 0
            messages = decode_all(part["record_set"], min_offset=offset)
            assert messages, "each fetch returns at least one whole message"
            got += [m.value for m in messages]
            offset = messages[-1].offset + 1
        assert got == values


# -------------------------------------------------------------------------------------------- P7


def test_slow_senders_are_cut_off_and_others_keep_their_latency(broker: BrokerProcess) -> None:
    stop = threading.Event()
    trickling: list[socket.socket] = []
    for _ in range(MAX_CONNECTIONS - 4):
        sock = connect(broker)
        sock.sendall(struct.pack(">i", 100) + b"\x00")  # a frame that never completes in time
        trickling.append(sock)

    def trickle() -> None:
        while not stop.is_set():
            for sock in trickling:
                with contextlib.suppress(OSError):  # closed by the broker: what we expect
                    sock.send(b"\x00")
            time.sleep(0.2)

    thread = threading.Thread(target=trickle)
    thread.start()
    try:
        latencies = []
        with connect(broker) as sock:
            ensure_topic(sock, "p7")
            for _ in range(20):
                started = time.perf_counter()
                produce(sock, "p7", {0: one_set(b"steady")})
                latencies.append(time.perf_counter() - started)
        assert sorted(latencies)[-2] < 0.5, f"a normal client's latency stays low: {latencies}"
        assert all(closed_by_peer(sock, within=3) for sock in trickling), "slow senders are closed by the deadline"
    finally:
        stop.set()
        thread.join()
        for sock in trickling:
            sock.close()
    healthy(broker)


# -------------------------------------------------------------------------------------------- P8


def test_connection_flood_from_one_address(broker: BrokerProcess) -> None:
    time.sleep(0.5)  # earlier tests' connections are gone
    sockets = [connect(broker) for _ in range(MAX_CONNECTIONS)]
    try:
        for sock in sockets[:3]:  # they are served
            assert request(sock, ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
        extra = connect(broker)
        assert closed_by_peer(extra), "the connection over the limit is closed"
        extra.close()
        sockets.pop().close()
        time.sleep(0.3)
        again = connect(broker)
        assert request(again, ApiKey.API_VERSIONS, 0, {})["error_code"] == 0, "a slot freed is usable"
        sockets.append(again)
    finally:
        for sock in sockets:
            sock.close()
    # abrupt disconnects (RST) do not leak slots
    for _ in range(3 * MAX_CONNECTIONS):
        sock = connect(broker)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    time.sleep(0.5)
    sockets = [connect(broker) for _ in range(MAX_CONNECTIONS - 1)]
    try:
        assert all(request(s, ApiKey.API_VERSIONS, 0, {})["error_code"] == 0 for s in sockets)
    finally:
        for sock in sockets:
            sock.close()


# -------------------------------------------------------------------------------------------- P9


def test_clients_that_pipeline_and_vanish_leak_nothing(broker: BrokerProcess) -> None:
    with connect(broker) as sock:
        ensure_topic(sock, "p9")
        big = MessageSetBuilder()
        for i in range(200):
            big.append(b"y" * 4000, None, 1000 + i)
        produce(sock, "p9", {0: big.build()})
    time.sleep(0.3)
    fds_before, rss_before = open_fds(broker), broker.rss_bytes()
    fetch = encode_request(
        lookup(ApiKey.FETCH, 3),
        1,
        "vanishing",
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "topics": [{"topic": "p9", "partitions": [{"partition": 0, "fetch_offset": 0, "max_bytes": 1 << 20}]}],
        },
    )
    for _ in range(30):
        sock = connect(broker)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(fetch * 300)  # pipelined, never read: the broker's send buffer fills
        sock.close()
    time.sleep(1.5)
    healthy(broker)
    assert open_fds(broker) <= fds_before + 2, "no descriptor (socket or file region) leaked"
    assert broker.rss_bytes() - rss_before < 32 * 1024 * 1024
