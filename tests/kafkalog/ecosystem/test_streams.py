"""Kafka Streams 4.x on a broker: the word count (tests/support/java/WordCount.java) counts every
line once, exactly, through a SIGKILL mid-run and a restart that has lost its local state.

What the broker must serve for it: the topics Streams creates itself (the store's changelog,
compacted, and the repartition topic it deletes records of), a consumer group, and exactly-once v2
(a transactional producer per thread, offsets committed in its transactions, read-committed reads;
a transaction left open by the killed instance aborted when it times out), and a log cleaner: the
changelog is compacted before the crash. With a fresh state directory the restarted application
has no store: it must restore it from the compacted changelog (offsets the cleaner removed, the
latest count of every word kept), or its counts start again from zero."""

from __future__ import annotations

import random
import re
import shutil
import threading
import time
import uuid
from pathlib import Path

import pytest

from kafkalog.client import Admin, Producer
from tests.support.ecosystem import Broker, eventually, last_values, log_of, read_all, topic_configs
from tests.support.processes import tail
from tests.support.streams import WordCountApp, WordCountConfig, word_counts

pytestmark = pytest.mark.integration

# Written against Kafka 4.x as well (the same code passes there); the suite runs them where they
# prove something: on kafkalog.
BROKERS = ("kafkalog",)
WORDS = [f"w{i:02d}" for i in range(40)] + ["Kafka", "log", "compaction", "stream"]


def lines(start: int, count: int) -> list[str]:
    """Lines ``start`` .. ``start + count - 1``: 3 to 8 words each (mixed case: counted lower-case)."""
    return [
        " ".join(random.Random(i).choices(WORDS, k=3 + i % 6)) + f" line{i % 7}" for i in range(start, start + count)
    ]


def produce(bootstrap: str, topic: str, batch: list[str]) -> None:
    with Producer(bootstrap, acks=-1) as producer:
        for line in batch:
            producer.send(topic, line.encode())


def offsets(bootstrap: str, topic: str) -> set[tuple[int, int]]:
    """(partition, offset) of every committed record of ``topic``."""
    return {(p, m.offset) for p, messages in read_all(bootstrap, topic).items() for m in messages}


def counts(bootstrap: str, topic: str) -> dict[str, int]:
    return {word: int(count) for word, count in last_values(bootstrap, topic).items()}


@pytest.mark.parametrize("broker", BROKERS, indirect=True)
def test_word_count_is_exact_through_a_crash_and_a_restore_from_its_compacted_changelog(
    broker: Broker, tmp_path: Path
) -> None:
    name = f"wordcount-{uuid.uuid4().hex[:8]}"
    config = WordCountConfig(broker.bootstrap, name, f"{name}-lines", f"{name}-counts", "exactly_once_v2")
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(config.input_topic, 2)
        admin.create_topic(config.output_topic, 2)
    log = tmp_path / "streams.log"
    app = WordCountApp(config, log)

    def explain(expected: dict[str, int]) -> str:
        seen = counts(broker.bootstrap, config.output_topic)
        wrong = {w: (seen.get(w), n) for w, n in expected.items() if seen.get(w) != n}
        return f"(seen, expected) of the words that differ: {dict(list(wrong.items())[:10])}\n{tail(log, 60)}"

    def reach(expected: dict[str, int]) -> None:
        eventually(
            "the output's counts equal the input's",
            lambda: True if counts(broker.bootstrap, config.output_topic) == expected else None,
            timeout=90,
            explain=lambda: explain(expected),
        )

    try:
        app.start(tmp_path / "state-1")
        first = lines(0, 200)
        produce(broker.bootstrap, config.input_topic, first)
        reach(word_counts(first))

        changelog = topic_configs(broker.bootstrap, config.changelog_topic)
        assert changelog["cleanup.policy"] == "compact", f"{config.changelog_topic}: {changelog}"

        # more of every word, in two steps more than the changelog's segment.ms (1 s) apart: each
        # step's counts start a segment of their own, so the first step's segment is no longer
        # active, holds newer counts of the first batch's words, and the cleaner removes the older
        before_cleaning = offsets(broker.bootstrap, config.changelog_topic)
        for start in (200, 300):
            time.sleep(1.1)
            more = lines(start, 100)
            produce(broker.bootstrap, config.input_topic, more)
            first += more
            reach(word_counts(first))

        def cleaning() -> str:
            configs = topic_configs(broker.bootstrap, config.changelog_topic)
            return f"{len(before_cleaning)} offsets before, all still there; {configs}\n{tail(log_of(broker), 30)}"

        eventually(
            f"the cleaner removes records of {config.changelog_topic}",
            lambda: True if before_cleaning - offsets(broker.bootstrap, config.changelog_topic) else None,
            timeout=60,
            explain=cleaning,
        )

        # the second batch is fed in steps; the application is SIGKILLed once it has committed some
        # of it (its output moved on) and while the rest is still coming
        second = lines(400, 1000)
        halfway = threading.Event()

        def feed() -> None:
            with Producer(broker.bootstrap, acks=-1) as producer:
                for step in range(20):
                    for line in second[step * 50 : (step + 1) * 50]:
                        producer.send(config.input_topic, line.encode())
                    producer.flush()
                    if step == 9:
                        halfway.set()
                    time.sleep(0.1)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        assert halfway.wait(60), "the feeder did not send half the second batch in 60 s"
        before = word_counts(first)
        eventually(
            "the output counts part of the second batch",
            lambda: True if counts(broker.bootstrap, config.output_topic) != before else None,
            timeout=60,
            explain=lambda: tail(log, 60),
        )
        app.kill()
        feeder.join(60)
        assert not feeder.is_alive(), "the feeder did not finish in 60 s"
        assert counts(broker.bootstrap, config.output_topic) != word_counts(first + second), (
            "the application had counted everything before it was killed: nothing to recover"
        )

        shutil.rmtree(tmp_path / "state-1")
        since = log.stat().st_size
        app.start(tmp_path / "state-2")
        reach(word_counts(first + second))
        restored = re.findall(
            rf"Finished restoring changelog {re.escape(config.changelog_topic)}-\d+ to store counts with a total "
            r"number of (\d+) records",
            log.read_bytes()[since:].decode(errors="replace"),
        )
        assert sum(int(n) for n in restored) > 0, (
            f"the restarted application restored no record of {config.changelog_topic}:\n{tail(log, 60)}"
        )

        # exactly once: every committed count of a word is one more step of its total, never a
        # count repeated or gone back (what reprocessing without the transactions would show)
        for partition, messages in read_all(broker.bootstrap, config.output_topic).items():
            by_word: dict[str, list[int]] = {}
            for m in messages:
                assert m.key is not None and m.value is not None
                by_word.setdefault(m.key.decode(), []).append(int(m.value))
            for word, seen in by_word.items():
                assert seen == sorted(set(seen)), f"{word} (partition {partition}) counted {seen}"
    finally:
        app.stop()
