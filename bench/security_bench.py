"""What TLS and a SASL login cost: produce and fetch over SASL_SSL against PLAINTEXT, on kafkalog and
on Apache Kafka 4.x (KRaft), in one run.

Each broker serves both listeners at once (the same log, the same disk, fsync at most once a
second); librdkafka (confluent-kafka) produces 200-byte messages in batches of 1000 (no
compression) and reads them back, once over each listener, ``--repeat`` times; figures are medians,
with the broker's CPU seconds per million messages. SASL_SSL logs in with SCRAM-SHA-512 over TLS 1.3
(an EC P-256 certificate). On kafkalog a PLAINTEXT fetch sends log data with sendfile, a TLS fetch
reads and encrypts it in Python's ssl: the fetch rows show that cost. Ends with ``RESULT`` lines.

``python -m bench.security_bench --repeat 3``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.broker_bench import fetch_rate, produce_rate
from bench.results import print_results, result
from kafkalog.server.security.credentials import UsersFile
from tests.support.certificates import Authority, Issued, authority, person, pkcs12_keystore
from tests.support.kafka4 import Kafka4Process, secured_kafka4
from tests.support.kafkalog import BrokerProcess

USER, PASSWORD = "bench", "bench-Pw-8s2k"
KEYSTORE_PASSWORD = "keystore-Pw-1"


def kafkalog_broker(root: Path, server: Issued) -> tuple[BrokerProcess, dict[str, str]]:
    users = UsersFile(root / "users.json")
    users.set_password(USER, PASSWORD, ["SCRAM-SHA-512"])
    broker = BrokerProcess(
        root / "kafkalog", default_partitions=1, log={"flush_ms": 1000},
        listeners=["PLAINTEXT://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"],
        sasl={"users_file": str(users.path), "mechanisms": ["SCRAM-SHA-512"]},
        tls={"certificate": str(server.certificate), "key": str(server.key)},
    ).start()  # fmt: skip
    return broker, {name: f"127.0.0.1:{port}" for name, port in broker.ports.items()}


def kafka4_broker(root: Path, server: Issued) -> tuple[Kafka4Process, dict[str, str]]:
    keystore = pkcs12_keystore(server, root / "broker.p12", KEYSTORE_PASSWORD)
    broker, secured_port = secured_kafka4(root / "kafka4", keystore, KEYSTORE_PASSWORD, {USER: PASSWORD})
    return broker, {"PLAINTEXT": broker.bootstrap, "SASL_SSL": f"127.0.0.1:{secured_port}"}


def client_settings(listener: str, ca: Authority) -> dict[str, Any]:
    if listener == "PLAINTEXT":
        return {}
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER,
            "sasl.password": PASSWORD, "ssl.ca.location": str(ca.certificate)}  # fmt: skip


def measure(name: str, pid: int, addresses: dict[str, str], ca: Authority, repeat: int, count: int) -> None:
    figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for run in range(repeat):
        for listener in ("PLAINTEXT", "SASL_SSL"):
            topic = f"bench-{listener.lower()}-{run}"
            extra = client_settings(listener, ca)
            rate, _, broker_cpu = produce_rate(addresses[listener], topic, 1000, "none", count, pid, extra)
            figures.setdefault((listener, "produce"), []).append((rate, broker_cpu / rate * 1e6))
            rate, _, broker_cpu = fetch_rate(addresses[listener], topic, count, pid, extra)
            figures.setdefault((listener, "fetch"), []).append((rate, broker_cpu / rate * 1e6))
    for what in ("produce", "fetch"):
        plain = statistics.median(r for r, _ in figures[("PLAINTEXT", what)])
        secured = statistics.median(r for r, _ in figures[("SASL_SSL", what)])
        for listener, rate in (("plaintext", plain), ("sasl_ssl", secured)):
            cpu = statistics.median(c for _, c in figures[(listener.upper(), what)])
            print(f"{name:9} {what:8} {listener:10} {rate:12,.0f} msgs/s  broker {cpu:6.2f} CPU-s per million")
            result(f"security_{name}_{what}_{listener}", rate, "msgs/s")
            result(f"security_{name}_{what}_{listener}_broker_cpu", cpu, "cpu_s_per_million")
        result(f"security_{name}_{what}_sasl_ssl_vs_plaintext", secured / plain, "ratio")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--count", type=int, default=500_000, help="messages per produce and fetch")
    parser.add_argument("--peers", default="kafkalog,kafka4")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="security-bench-"))
    try:
        ca = authority(root / "certs")
        server = ca.issue("broker", person("broker"), server=True)
        starters = {"kafkalog": kafkalog_broker, "kafka4": kafka4_broker}
        for name in args.peers.split(","):
            if name not in starters:
                parser.error(f"unknown peer {name!r} (kafkalog, kafka4)")
            broker, addresses = starters[name](root, server)
            try:
                assert broker.process is not None
                measure(name, broker.process.pid, addresses, ca, args.repeat, args.count)
            finally:
                broker.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_results()
    return 0


if __name__ == "__main__":
    sys.exit(main())
