"""Broker behaviours not covered by the client suites: long-poll fetches (min_bytes, max_wait_ms),
acks=0, explicit topic creation with configs and its errors, metrics, configuration errors, and a
graceful SIGTERM that leaves a clean shutdown."""

from __future__ import annotations

import re
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.log.manager import CLEAN_SHUTDOWN_FILE
from kafkalog.protocol import ApiKey, decode_response, encode_request, lookup
from kafkalog.record import MessageSetBuilder, decode_all
from kafkalog.server import Broker, BrokerConfig, BrokerConfigError, load_config
from tests.support.kafkalog import BrokerProcess, recv_exact, roundtrip


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(BrokerConfig(port=0, data_dirs=(tmp_path / "data",), default_partitions=1, metrics_port=0)) as running:
        yield running


def call(
    port: int, key: ApiKey, version: int, body: dict[str, object], *, expect_response: bool = True
) -> dict[str, object] | None:
    if expect_response:
        return roundtrip(port, key, version, body)
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(encode_request(lookup(key, version), 3, "features", body))
        sock.settimeout(0.5)
        try:
            return {"unexpected": sock.recv(4)}
        except TimeoutError:
            return None


def message_set(*values: bytes) -> bytes:
    builder = MessageSetBuilder()
    now = int(time.time() * 1000)  # old timestamps would be deleted by retention (7 days by message time)
    for value in values:
        builder.append(value, None, now)
    return builder.build()


def produce(port: int, topic: str, data: bytes, acks: int = 1) -> dict[str, object] | None:
    body = {
        "acks": acks,
        "timeout_ms": 100,
        "topic_data": [{"topic": topic, "data": [{"partition": 0, "record_set": data}]}],
    }
    return call(port, ApiKey.PRODUCE, 2, body, expect_response=acks != 0)


def fetch_body(topic: str, offset: int, *, min_bytes: int, max_wait_ms: int) -> dict[str, object]:
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset, "max_bytes": 1 << 20}]}],
    }


def test_a_fetch_waits_for_data_then_answers_as_soon_as_it_arrives(broker: Broker) -> None:
    call(broker.port, ApiKey.METADATA, 1, {"topics": [{"name": "lp"}]})
    answers: list[tuple[float, dict[str, object] | None]] = []

    def long_poll() -> None:
        started = time.monotonic()
        answer = call(broker.port, ApiKey.FETCH, 3, fetch_body("lp", 0, min_bytes=1, max_wait_ms=10_000))
        answers.append((time.monotonic() - started, answer))

    thread = threading.Thread(target=long_poll)
    thread.start()
    time.sleep(0.8)
    assert not answers, "no data yet: the fetch waits"
    produce(broker.port, "lp", message_set(b"wake up"))
    thread.join(5)
    ((elapsed, answer),) = answers
    assert 0.7 < elapsed < 3, "answered when the data came, long before max_wait_ms"
    part = answer["responses"][0]["partition_responses"][0]  # type: ignore[index]
    assert [m.value for m in decode_all(part["record_set"])] == [b"wake up"]


def test_a_fetch_without_enough_data_answers_at_max_wait(broker: Broker) -> None:
    call(broker.port, ApiKey.METADATA, 1, {"topics": [{"name": "mw"}]})
    produce(broker.port, "mw", message_set(b"small"))
    started = time.monotonic()
    answer = call(broker.port, ApiKey.FETCH, 3, fetch_body("mw", 0, min_bytes=1 << 20, max_wait_ms=600))
    elapsed = time.monotonic() - started
    assert 0.5 < elapsed < 3
    part = answer["responses"][0]["partition_responses"][0]  # type: ignore[index]
    assert [m.value for m in decode_all(part["record_set"])] == [b"small"], "what there is, once the wait is over"


def test_pipelined_requests_are_all_answered_in_order(broker: Broker) -> None:
    """Requests that arrive together are answered together (their responses leave in one write, a
    fetch's log region by sendfile between them): every response whole, in the order asked."""
    call(broker.port, ApiKey.METADATA, 1, {"topics": [{"name": "pipelined"}]})  # creates it
    assert produce(broker.port, "pipelined", message_set(b"first")) is not None
    produce_api, fetch_api, versions_api = (
        lookup(ApiKey.PRODUCE, 2),
        lookup(ApiKey.FETCH, 4),
        lookup(ApiKey.API_VERSIONS, 0),
    )
    produce_body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"topic": "pipelined", "data": [{"partition": 0, "record_set": message_set(b"again")}]}],
    }
    fetch = {**fetch_body("pipelined", 0, min_bytes=0, max_wait_ms=0), "isolation_level": 0}
    asked = [(produce_api, produce_body), (fetch_api, fetch), (versions_api, {})] * 40
    frames = b"".join(encode_request(api, number, "pipeline", body) for number, (api, body) in enumerate(asked))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=15) as sock:
        sock.sendall(frames)
        answers = []
        for api, _ in asked:
            size = struct.unpack(">i", recv_exact(sock, 4))[0]
            answers.append(decode_response(api, recv_exact(sock, size)))
    assert [number for number, _ in answers] == list(range(len(asked)))
    parts = [a["responses"][0]["partition_responses"][0] for _, a in answers[0::3]]
    assert {p["error_code"] for p in parts} == {0}, parts[0]
    offsets = [p["base_offset"] for p in parts]
    assert offsets == list(range(1, 41))  # each produce appended once, in the order sent
    for number, fetched in answers[1::3]:
        part = fetched["responses"][0]["partition_responses"][0]
        values = [m.value for m in decode_all(bytes(part["record_set"]))]
        assert values[:2] == [b"first", b"again"] and len(values) == number // 3 + 2
    assert all(a["error_code"] == 0 for _, a in answers[2::3])


def test_acks_0_gets_no_response_but_is_appended(broker: Broker) -> None:
    call(broker.port, ApiKey.METADATA, 1, {"topics": [{"name": "a0"}]})
    assert produce(broker.port, "a0", message_set(b"fire", b"forget"), acks=0) is None
    time.sleep(0.2)
    log = broker.logs.get_log("a0", 0)
    assert log is not None and log.log_end_offset == 2
    answer = produce(broker.port, "a0", message_set(b"x"), acks=7)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 21  # type: ignore[index]


def create(
    port: int, topic: str, partitions: int, configs: dict[str, str] | None = None, **extra: object
) -> dict[str, object]:
    request = {
        "topic": topic,
        "num_partitions": partitions,
        "replication_factor": extra.pop("replication_factor", 1),
        "replica_assignment": extra.pop("replica_assignment", []),
        "config_entries": [{"config_name": k, "config_value": v} for k, v in (configs or {}).items()],
    }
    response = call(
        port,
        ApiKey.CREATE_TOPICS,
        1,
        {"create_topic_requests": [request], "timeout_ms": 1000, "validate_only": extra.pop("validate_only", False)},
    )
    return response["topic_errors"][0]  # type: ignore[index, no-any-return]


def test_create_topics_with_configs_and_errors(broker: Broker) -> None:
    assert (
        create(broker.port, "made", 4, {"retention.ms": "3600000", "message.timestamp.type": "LogAppendTime"})[
            "error_code"
        ]
        == 0
    )
    log = broker.logs.get_log("made", 3)
    assert log is not None and log.config.retention_ms == 3_600_000 and log.config.log_append_time
    metadata = call(broker.port, ApiKey.METADATA, 1, {"topics": [{"name": "made"}]})
    assert len(metadata["topic_metadata"][0]["partition_metadata"]) == 4  # type: ignore[index]
    assert create(broker.port, "made", 1)["error_code"] == 36  # TOPIC_ALREADY_EXISTS
    assert create(broker.port, "bad/name", 1)["error_code"] == 17  # INVALID_TOPIC_EXCEPTION
    assert create(broker.port, "zero", 0)["error_code"] == 37  # INVALID_PARTITIONS
    assert create(broker.port, "rf3", 1, replication_factor=3)["error_code"] == 38  # INVALID_REPLICATION_FACTOR
    bad_config = create(broker.port, "cfg", 1, {"cleanup.policy": "shred"})
    assert bad_config["error_code"] == 40 and "cleanup.policy" in bad_config["error_message"]  # type: ignore[operator]
    assert create(broker.port, "dry", 2, validate_only=True)["error_code"] == 0
    assert broker.cluster.partition_count("dry") is None, "validate_only creates nothing"
    # the message format by Kafka's version names: record batches from 0.11 on, message sets before
    for name, version, expected in (("batches", "3.0-IV1", 2), ("sets", "0.10.2", 1)):
        assert create(broker.port, name, 1, {"message.format.version": version})["error_code"] == 0
        stored = broker.logs.get_log(name, 0)
        assert stored is not None and stored.config.message_format == expected
    wrong = create(broker.port, "fmt", 1, {"message.format.version": "latest"})
    assert wrong["error_code"] == 40 and "message.format.version" in wrong["error_message"]  # type: ignore[operator]


def test_metrics_are_served(broker: Broker) -> None:
    call(broker.port, ApiKey.METADATA, 1, {"topics": [{"name": "m"}]})
    produce(broker.port, "m", message_set(b"a", b"b", b"c"))
    assert broker._metrics_http is not None
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker._metrics_http.port}/metrics", timeout=5).read().decode()
    assert 'kafkalog_requests_total{api="PRODUCE"} 1' in text
    assert 'kafkalog_log_end_offset{topic="m",partition="0"} 3' in text
    assert "kafkalog_bytes_in_total" in text


def test_configuration_errors_name_the_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "broker.yaml"
    path.write_text("log:\n  segment_bytes: 10\n")
    with pytest.raises(
        BrokerConfigError, match=r"broker.yaml:log.segment_bytes: must be in \[64, 2147483647\], not 10$"
    ):
        load_config(path)
    path.write_text("limits:\n  idle_timeout_ms: soon\n")
    with pytest.raises(BrokerConfigError, match=r"broker.yaml:limits.idle_timeout_ms: expected an integer"):
        load_config(path)
    path.write_text("port: [9092\n")  # not YAML: the place is in the file, not in "<unicode string>"
    where = re.escape(str(path))
    with pytest.raises(
        BrokerConfigError, match=rf'^{where}: not valid YAML: while parsing a flow sequence\n  in "{where}", line 1'
    ):
        load_config(path)
    path.write_text("port: 9092\nlog:\n  retention_ms: 1\n  retention_ms: 2\n")  # the second would have won
    with pytest.raises(BrokerConfigError, match=rf"^{where}:line 4: duplicate key 'retention_ms'$"):
        load_config(path)
    path.write_bytes(b"port: \xff\n")
    with pytest.raises(BrokerConfigError, match=rf"^{where}: not UTF-8 text \(invalid start byte at byte 6\)$"):
        load_config(path)
    config = load_config(None, {"port": 1234, "data_dirs": [str(tmp_path)]})
    assert config.port == 1234 and config.data_dirs == (tmp_path,)


@pytest.mark.integration
def test_sigterm_stops_cleanly_and_restart_skips_recovery(tmp_path: Path) -> None:
    running = BrokerProcess(tmp_path / "data", default_partitions=1).start()
    call(running.port, ApiKey.METADATA, 1, {"topics": [{"name": "t"}]})
    produce(running.port, "t", message_set(b"kept"))
    assert running.stop() == 0
    assert (tmp_path / "data" / CLEAN_SHUTDOWN_FILE).exists()
    log = running.log_path.read_text()
    assert "stopped cleanly" in log and "Traceback" not in log
    running.start()
    try:
        assert (
            "recovering"
            not in running.log_path.read_text().rsplit("listening on", 1)[0].rsplit("stopped cleanly", 1)[-1]
        )
        answer = call(running.port, ApiKey.FETCH, 3, fetch_body("t", 0, min_bytes=0, max_wait_ms=0))
        part = answer["responses"][0]["partition_responses"][0]  # type: ignore[index]
        assert [m.value for m in decode_all(part["record_set"])] == [b"kept"]
    finally:
        running.stop()
