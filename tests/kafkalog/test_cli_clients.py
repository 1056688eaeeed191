"""The kafkalog client commands (topics, produce, consume, offsets) run as a user runs them, against a
`kafkalog broker` process."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.support.kafkalog import KAFKALOG, BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("cli") / "data", default_partitions=1) as running:
        yield running


def kafkalog(broker: BrokerProcess, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    command = [str(KAFKALOG), *args, "-b", broker.bootstrap]
    return subprocess.run(command, input=stdin, capture_output=True, timeout=60, check=False)


def test_create_produce_consume_and_offsets(broker: BrokerProcess) -> None:
    created = kafkalog(broker, "topics", "create", "nums", "--partitions", "2")
    assert created.returncode == 0 and created.stdout == b"created nums with 2 partitions\n"
    lines = b"".join(f"{i}\n".encode() for i in range(500))
    produced = kafkalog(broker, "produce", "nums", "-z", "gzip", stdin=lines)
    assert produced.returncode == 0, produced.stderr
    assert b"sent 500 messages" in produced.stderr
    single = kafkalog(broker, "produce", "single", stdin=b"one\n")
    assert single.returncode == 0 and b"sent 1 message, " in single.stderr, single.stderr  # not "1 messages"
    consumed = kafkalog(broker, "consume", "nums", "--print-offsets", "-q")
    assert consumed.returncode == 0, consumed.stderr
    rows = [line.split(b"\t") for line in consumed.stdout.splitlines()]
    assert sorted(int(v) for _, _, v in rows) == list(range(500))
    for partition in (b"0", b"1"):
        offsets = [int(o) for p, o, _ in rows if p == partition]
        assert offsets == list(range(len(offsets)))
    described = kafkalog(broker, "topics", "describe", "nums")
    assert described.stdout.splitlines()[0] == b"partition\tleader\tearliest\tlatest"
    assert sum(int(row.split(b"\t")[3]) for row in described.stdout.splitlines()[1:]) == 500
    listed = kafkalog(broker, "topics", "list")
    assert b"nums\t2" in listed.stdout.splitlines()


def test_keys_partitions_limits_and_time(broker: BrokerProcess) -> None:
    before = int(time.time() * 1000) - 1
    produced = kafkalog(broker, "produce", "keyed", "-K", ":", "-p", "0", "-q", stdin=b"a:1\nb:2\nc:3\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kafkalog(broker, "consume", "keyed", "--print-keys", "-n", "2", "-q")
    assert consumed.stdout == b"a\t1\nb\t2\n"
    from_time = kafkalog(broker, "consume", "keyed", "-o", f"@{before}", "-q")
    assert from_time.stdout == b"1\n2\n3\n"
    offsets = kafkalog(broker, "offsets", "keyed", "--time", str(before))
    assert offsets.stdout.splitlines()[1] == b"0\t0\t3\t0"


def test_errors_are_one_clear_line(broker: BrokerProcess) -> None:
    unreachable = subprocess.run(
        [str(KAFKALOG), "consume", "nums", "-b", "127.0.0.1:1"], capture_output=True, timeout=60, check=False
    )
    assert unreachable.returncode == 1
    assert unreachable.stderr.startswith(b"error: no broker is reachable"), unreachable.stderr  # not click's "Error:"
    assert b"Traceback" not in unreachable.stderr
    missing = kafkalog(broker, "topics", "describe", "never-made")
    assert missing.returncode == 1 and b"UNKNOWN_TOPIC" in missing.stderr
    kafkalog(broker, "topics", "create", "nums")  # whether or not an earlier test made it
    exists = kafkalog(broker, "topics", "create", "nums")
    assert exists.returncode == 1 and b"already exists" in exists.stderr


def test_bad_arguments_name_the_option_or_the_config_key(broker: BrokerProcess) -> None:
    for offset in ("foo", "@yesterday"):
        bad_offset = kafkalog(broker, "consume", "nums", "-o", offset)
        assert bad_offset.returncode == 2, bad_offset.stderr  # a usage error, not a traceback
        assert f"'-o' / '--offset': '{offset}' is not beginning, end".encode() in bad_offset.stderr
        assert b"Traceback" not in bad_offset.stderr
    bad_value = kafkalog(broker, "topics", "create", "configured", "--config", "retention.ms=a week")
    assert bad_value.returncode == 1
    assert b"creating topic 'configured': retention.ms='a week' is not a valid value (expected an integer)" in (
        bad_value.stderr
    )
    unknown = kafkalog(broker, "topics", "create", "configured", "--config", "retention=1")
    assert unknown.returncode == 1
    assert b": unsupported topic config 'retention' (supported: cleanup.policy," in unknown.stderr  # not quoted
