"""A broker with every kind of listener (PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL) against real
clients: librdkafka, kafka-python and Kafka 4.x's Java clients log in with each mechanism over TLS;
client certificates (trusted, expired, untrusted); a wrong password, a stranger who never logs in,
a request before the login; a thousand bad logins beside a working client; and no secret in any log
line or error message.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import statistics
import struct
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
import yaml

from kafkalog.client import Admin, ClientSecurity, Producer, SimpleConsumer
from kafkalog.errors import AuthenticationError, ClientError
from kafkalog.protocol import ApiKey, ErrorCode, decode_response, encode_request, lookup
from kafkalog.sasl import ScramClient, plain_message
from kafkalog.server.security.credentials import UsersFile
from tests.support.certificates import Authority, Issued, authority, person
from tests.support.kafka4 import CONSOLE_CONSUMER, CONSOLE_PRODUCER, run_tool
from tests.support.kafkalog import KAFKALOG, BrokerProcess, recv_exact

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # type: ignore[import-untyped]

pytestmark = pytest.mark.integration

PASSWORD = "alice-Pw-7f3k!q"
WRONG = "guess-Pw-9x2m#z"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
HANDSHAKE_TIMEOUT_MS = 1500
SECRETS = (PASSWORD, WRONG, "key-Pw-5d8w")


@dataclass(frozen=True)
class Secured:
    broker: BrokerProcess
    ca: Authority
    alice: Issued
    expired: Issued
    stranger: Issued
    errors: list[str]
    """Every error message a client was given in this module: none may hold a secret."""

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.broker.ports[listener]}"

    def librdkafka(self, listener: str, mechanism: str | None = None, password: str = PASSWORD) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap.servers": self.address(listener), "security.protocol": listener,
                                  "error_cb": lambda error: self.errors.append(str(error))}  # fmt: skip
        if "SSL" in listener:
            config["ssl.ca.location"] = str(self.ca.certificate)
        if mechanism is not None:
            config.update({"sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": password})
        return config


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("secured")
    ca = authority(root / "certs")
    broker_cert = ca.issue("broker", person("broker"), server=True, key_password=SECRETS[2])
    users = UsersFile(root / "users.json")
    users.set_password("alice", PASSWORD, ["SCRAM-SHA-256", "SCRAM-SHA-512"])
    config = {
        "listeners": [f"{name}://127.0.0.1:0" for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")],
        # PLAIN on SASL_PLAINTEXT too, where the attack tests send it (allowed explicitly), and refusals
        # answered at once: the thousand bad logins measure the checker, not the failed-login delay
        "sasl": {"users_file": str(users.path), "handshake_timeout_ms": HANDSHAKE_TIMEOUT_MS,
                 "mechanisms": list(MECHANISMS), "plain_in_clear": True, "failed_authentication_delay_ms": 0},
        "tls": {"certificate": str(broker_cert.certificate), "key": str(broker_cert.key),
                "key_password": "${env:KAFKALOG_TEST_KEY_PASSWORD}", "client_ca": str(ca.certificate),
                "client_auth": "requested"},
    }  # fmt: skip
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KAFKALOG_TEST_KEY_PASSWORD", SECRETS[2])  # the key's password from the environment
        with BrokerProcess(root / "data", **config) as broker:
            yield Secured(
                broker, ca,
                alice=ca.issue("alice", person("alice")),
                expired=ca.issue("old", person("old"), expired=True),
                stranger=authority(root / "other", "other").issue("mallory", person("mallory")),
                errors=[],
            )  # fmt: skip


def _produce_and_read(config: dict[str, Any], topic: str, count: int = 5) -> list[bytes]:
    producer = confluent_kafka.Producer({**config, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, b"%s %d" % (topic.encode(), i))
    assert producer.flush(20) == 0, f"{topic}: not all delivered"
    consumer = confluent_kafka.Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    return got


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_librdkafka_logs_in_with_each_mechanism_over_tls(secured: Secured, mechanism: str) -> None:
    topic = f"rdkafka-{mechanism.lower()}"
    assert _produce_and_read(secured.librdkafka("SASL_SSL", mechanism), topic) == [
        b"%s %d" % (topic.encode(), i) for i in range(5)
    ]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_logs_in_with_each_mechanism_over_tls(secured: Secured, mechanism: str) -> None:
    settings = {
        "bootstrap_servers": secured.address("SASL_SSL"), "security_protocol": "SASL_SSL",
        "ssl_cafile": str(secured.ca.certificate), "sasl_mechanism": mechanism,
        "sasl_plain_username": "alice", "sasl_plain_password": PASSWORD,
    }  # fmt: skip
    topic = f"python-{mechanism.lower()}"
    producer = KafkaProducer(**settings)
    for i in range(5):
        producer.send(topic, b"%d" % i).get(20)
    producer.close()
    consumer = KafkaConsumer(**settings, consumer_timeout_ms=20_000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    assert [message.value for _, message in zip(range(5), consumer, strict=False)] == [b"%d" % i for i in range(5)]
    consumer.close()


def test_java_clients_log_in_with_each_mechanism_over_tls(secured: Secured, tmp_path: Path) -> None:
    log4j = tmp_path / "log4j2.properties"
    for mechanism in MECHANISMS:
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        properties = tmp_path / f"{mechanism}.properties"
        properties.write_text(
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={mechanism}\n"
            f"sasl.jaas.config=org.apache.kafka.common.security.{module} required"
            f' username="alice" password="{PASSWORD}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={secured.ca.certificate}\n"
        )
        run_tool(
            CONSOLE_PRODUCER, "--bootstrap-server", secured.address("SASL_SSL"), "--topic", "java",
            "--command-config", str(properties), input=f"from java {mechanism}\n".encode(), log4j=log4j,
        )  # fmt: skip
    read = run_tool(CONSOLE_CONSUMER, "--bootstrap-server", secured.address("SASL_SSL"), "--topic", "java",
                    "--from-beginning", "--max-messages", "3", "--timeout-ms", "20000",
                    "--command-config", str(tmp_path / "SCRAM-SHA-512.properties"), log4j=log4j)  # fmt: skip
    assert read.stdout.decode().splitlines() == [f"from java {mechanism}" for mechanism in MECHANISMS]


def test_client_certificates_name_the_client_and_bad_ones_are_refused(secured: Secured) -> None:
    config = secured.librdkafka("SSL")
    trusted = {**config, "ssl.certificate.location": str(secured.alice.certificate),
               "ssl.key.location": str(secured.alice.key)}  # fmt: skip
    assert _produce_and_read(trusted, "mtls", count=3) == [b"mtls 0", b"mtls 1", b"mtls 2"]
    for issued, reason in [(secured.expired, "certificate has expired"),
                           (secured.stranger, "unable to get local issuer certificate")]:  # fmt: skip
        context = ssl.create_default_context(cafile=str(secured.ca.certificate))
        context.load_cert_chain(issued.certificate, issued.key)
        with (
            socket.create_connection(("127.0.0.1", secured.broker.ports["SSL"]), timeout=10) as raw,
            pytest.raises((ssl.SSLError, ConnectionError)),
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(encode_request(lookup(ApiKey.API_VERSIONS, 0), 1, "t", {}))
            recv_exact(tls, 4)  # TLS 1.3 reports the refusal at the first read
        _wait_for_log(secured, f"failed: {reason}")
    # the others carried on: the trusted client still works
    assert _produce_and_read(trusted, "mtls", count=3)[:1] == [b"mtls 0"]


def _wait_for_log(secured: Secured, text: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while text not in secured.broker.log_text():
        assert time.monotonic() < deadline, f"the broker never logged {text!r}"
        time.sleep(0.05)


# ------------------------------------------------------------------ logins on the wire


def _request(sock: socket.socket, key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    api = lookup(key, version)
    sock.sendall(encode_request(api, 9, "probe", body))
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    correlation_id, answer = decode_response(api, recv_exact(sock, size))
    assert correlation_id == 9
    return answer


def _closed(sock: socket.socket, timeout: float) -> float:
    """Seconds until the broker closed ``sock`` (AssertionError after ``timeout``)."""
    started = time.monotonic()
    sock.settimeout(timeout)
    try:
        assert sock.recv(1) == b"", "the broker sent something instead of closing"
    except TimeoutError:
        raise AssertionError(f"still open after {timeout} s") from None
    except ConnectionResetError:
        pass
    return time.monotonic() - started


def _scram_login(sock: socket.socket, mechanism: str, password: str) -> dict[str, Any]:
    assert _request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})["error_code"] == 0
    client = ScramClient(mechanism, "alice", password)
    first = _request(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.first()})
    assert first["error_code"] == 0, first
    final = _request(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.final(first["auth_bytes"])})
    if final["error_code"] == 0:
        client.verify(final["auth_bytes"])
    return final


def test_a_wrong_password_gets_kafkas_error_and_a_closed_connection_while_others_carry_on(secured: Secured) -> None:
    good = confluent_kafka.Producer({**secured.librdkafka("SASL_SSL", "SCRAM-SHA-512"), "linger.ms": 0})
    good.produce("carry-on", b"before")
    assert good.flush(20) == 0
    with socket.create_connection(("127.0.0.1", secured.broker.ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        refused = _scram_login(sock, "SCRAM-SHA-256", WRONG)
        assert refused["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert refused["error_message"] == "SCRAM-SHA-256: authentication failed for user 'alice'"
        assert _closed(sock, 5) < 5
    bad = confluent_kafka.Producer({**secured.librdkafka("SASL_SSL", "PLAIN", password=WRONG), "linger.ms": 0})
    bad.produce("carry-on", b"never")
    assert bad.flush(3) == 1  # not delivered: it cannot log in
    assert any("authentication failed for user 'alice'" in error for error in secured.errors), secured.errors
    good.produce("carry-on", b"after")
    assert good.flush(20) == 0
    with socket.create_connection(("127.0.0.1", secured.broker.ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        assert _scram_login(sock, "SCRAM-SHA-512", PASSWORD)["error_code"] == 0  # the right one gets in
        assert (
            _request(sock, ApiKey.METADATA, 1, {"topics": []})["brokers"][0]["port"]
            == (secured.broker.ports["SASL_PLAINTEXT"])
        )  # told the address of the listener it came in on


def test_strangers_cannot_hold_a_connection_or_skip_the_login(secured: Secured) -> None:
    with socket.create_connection(("127.0.0.1", secured.broker.ports["SASL_PLAINTEXT"]), timeout=10) as idle, \
         socket.create_connection(("127.0.0.1", secured.broker.ports["SSL"]), timeout=10) as no_tls:  # fmt: skip
        waited = _closed(idle, 10)
        assert HANDSHAKE_TIMEOUT_MS / 1000 - 0.3 < waited < HANDSHAKE_TIMEOUT_MS / 1000 + 2
        _closed(no_tls, 5)  # by then its deadline has passed too
    _wait_for_log(secured, "not authenticated within 1500 ms")
    _wait_for_log(secured, "no TLS handshake within 1500 ms")
    with socket.create_connection(("127.0.0.1", secured.broker.ports["SASL_PLAINTEXT"]), timeout=10) as early:
        assert _request(early, ApiKey.API_VERSIONS, 0, {})["error_code"] == 0  # allowed before the login
        early.sendall(encode_request(lookup(ApiKey.METADATA, 1), 2, "probe", {"topics": []}))
        assert _closed(early, 5) < 1
    _wait_for_log(secured, "sent METADATA before authenticating (waiting for SaslHandshake)")
    with socket.create_connection(("127.0.0.1", secured.broker.ports["SASL_PLAINTEXT"]), timeout=10) as old:
        assert _request(old, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        token = plain_message("alice", PASSWORD)  # v0: the token bare, size-prefixed
        old.sendall(struct.pack(">i", len(token)) + token)
        assert recv_exact(old, 4) == b"\x00\x00\x00\x00"  # an empty token: logged in
        assert _request(old, ApiKey.METADATA, 1, {"topics": []})["brokers"]


def _bad_plain_logins(port: int, count: int, refused: list[int]) -> None:
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            _request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            answer = _request(sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": plain_message("alice", WRONG)})
            refused.append(answer["error_code"])


def test_a_thousand_bad_logins_do_not_slow_good_clients(secured: Secured) -> None:
    """PLAIN, the costly check (PBKDF2 per attempt), from two attackers at once; the good client is
    already logged in and sends one message at a time, waiting for each."""
    good = confluent_kafka.Producer({**secured.librdkafka("SASL_SSL", "SCRAM-SHA-512"), "linger.ms": 0})

    def latencies(seconds: float) -> list[float]:
        out: list[float] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.perf_counter()
            good.produce("steady", b"x" * 100)
            assert good.flush(10) == 0
            out.append(time.perf_counter() - started)
        return out

    latencies(0.5)  # connected and logged in
    before = latencies(2.0)
    refused: list[int] = []
    attackers = [
        threading.Thread(target=_bad_plain_logins, args=(secured.broker.ports["SASL_PLAINTEXT"], 500, refused))
        for _ in range(2)
    ]
    started = time.monotonic()
    for attacker in attackers:
        attacker.start()
    during: list[float] = []
    while any(attacker.is_alive() for attacker in attackers):
        during += latencies(0.5)
    attack_seconds = time.monotonic() - started
    assert refused == [ErrorCode.SASL_AUTHENTICATION_FAILED] * 1000
    median_before, median_during = statistics.median(before), statistics.median(during)
    figures = (
        f"1,000 bad logins in {attack_seconds:.1f} s; a good produce took {median_before * 1000:.2f} ms (median)"
        f" before, {median_during * 1000:.2f} ms during ({len(during)} sends)"
    )
    assert median_during < max(3 * median_before, median_before + 0.005), figures


# ------------------------------------------------------------------ kafkalog's own clients


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafkalogs_own_clients_log_in_over_tls(secured: Secured, mechanism: str) -> None:
    security = ClientSecurity("SASL_SSL", mechanism, "alice", PASSWORD, ca_file=secured.ca.certificate)
    assert PASSWORD not in repr(security)
    topic = f"own-{mechanism.lower()}"
    with Admin(secured.address("SASL_SSL"), security=security) as admin:
        admin.create_topic(topic, 1)
    with Producer(secured.address("SASL_SSL"), security=security, linger_ms=0) as producer:
        for i in range(3):
            producer.send(topic, b"%d" % i)
        producer.flush()
    with SimpleConsumer(secured.address("SASL_SSL"), security=security) as consumer:
        assert [m.value for m in consumer.fetch(topic, 0, 0).messages] == [b"0", b"1", b"2"]


def test_kafkalogs_clients_are_told_why_a_login_or_certificate_is_refused(secured: Secured, tmp_path: Path) -> None:
    wrong = ClientSecurity("SASL_SSL", "SCRAM-SHA-256", "alice", WRONG, ca_file=secured.ca.certificate)
    with (
        SimpleConsumer(secured.address("SASL_SSL"), security=wrong, request_timeout_ms=5000) as consumer,
        pytest.raises(AuthenticationError, match="refused the login: SCRAM-SHA-256: authentication failed") as info,
    ):
        consumer.fetch("own-plain", 0, 0)
    secured.errors.append(str(info.value))  # checked for secrets with the others, last
    stranger = authority(tmp_path / "stranger", "stranger")  # a CA the broker's certificate is not from
    untrusted = ClientSecurity("SSL", ca_file=stranger.certificate)
    with (
        SimpleConsumer(secured.address("SSL"), security=untrusted, request_timeout_ms=5000) as consumer,
        pytest.raises(AuthenticationError, match="the broker's certificate is not trusted"),
    ):
        consumer.fetch("own-plain", 0, 0)
    with pytest.raises(ClientError, match="SASL_SSL needs a username and a password"):
        ClientSecurity("SASL_SSL", "PLAIN", "alice")


def test_the_mirror_reads_a_secured_source_with_credentials_from_the_environment(
    secured: Secured, tmp_path: Path
) -> None:
    security = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", "alice", PASSWORD, ca_file=secured.ca.certificate)
    with Producer(secured.address("SASL_SSL"), security=security, linger_ms=0) as producer:
        for i in range(20):
            producer.send("mirrored", b"%d" % i, partition=0)
        producer.flush()
    config = tmp_path / "mirror.yaml"
    config.write_text(yaml.safe_dump({
        "sources": [{"name": "secured", "bootstrap": secured.address("SASL_SSL"), "security": {
            "protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512", "username": "alice",
            "password": "${env:MIRROR_SOURCE_PASSWORD}", "ca_file": str(secured.ca.certificate)}}],
        "target": {"name": "plain", "bootstrap": "TARGET"},
        "whitelist": "mirrored", "start_from": "earliest", "status_interval_ms": 0,
    }))  # fmt: skip
    with BrokerProcess(tmp_path / "target") as target:
        config.write_text(config.read_text().replace("TARGET", target.bootstrap))
        err = tmp_path / "mirror.err"
        with err.open("wb") as stderr:
            mirror = subprocess.Popen(
                [str(KAFKALOG), "mirror", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=stderr,
                env={**os.environ, "MIRROR_SOURCE_PASSWORD": PASSWORD},
            )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            with SimpleConsumer(target.bootstrap) as consumer:
                while time.monotonic() < deadline and mirror.poll() is None:
                    with contextlib.suppress(ClientError):
                        if consumer.latest_offset("mirrored", 0) >= 20:
                            break
                    time.sleep(0.3)
                assert [m.value for m in consumer.messages("mirrored", 0, 0, 20)] == [b"%d" % i for i in range(20)], (
                    err.read_text()
                )
        finally:
            mirror.send_signal(signal.SIGTERM)
            mirror.wait(30)
    secured.errors.append(err.read_text())  # checked for secrets with the others, last


def test_no_secret_appears_in_any_log_line_or_error_message(secured: Secured) -> None:
    """Last in the module: every login above, good and bad, has been logged by now."""
    log = secured.broker.log_text()
    assert "login from" in log and "refused" in log  # the failures were logged ...
    for secret in SECRETS:  # ... without the passwords, right or wrong, or the key's
        assert secret not in log
        assert not [error for error in secured.errors if secret in error]
