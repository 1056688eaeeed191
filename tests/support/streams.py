"""Kafka Streams 4.x's word count (tests/support/java/WordCount.java) as a child process against any
broker (Apache Kafka 4.x or ours), and the counts it should reach.

The application is a Java source file run by the ``java`` launcher (compiled in memory at each start,
as tests/support/java/TransactionalClients.java is), with Kafka 4.x's jars (Streams among them) on
the class path. Its log (Streams' INFO lines and its ``STATE`` lines) is appended to one file across
restarts, so a failure shows every run.
"""

from __future__ import annotations

import collections
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tests.support.connect import peer_java
from tests.support.installed import require_jar
from tests.support.processes import spawn, stop_group, wait_until

WORD_COUNT = Path(__file__).with_name("java") / "WordCount.java"
Guarantee = Literal["at_least_once", "exactly_once_v2"]


def word_counts(lines: Iterable[str]) -> dict[str, int]:
    """What WordCount.java counts in ``lines``: lower-case runs of word characters."""
    counts: collections.Counter[str] = collections.Counter()
    for line in lines:
        counts.update(word for word in re.split(r"\W+", line.lower()) if word)
    return dict(counts)


@dataclass(frozen=True)
class WordCountConfig:
    """One word-count application: where it reads and writes, and its processing guarantee."""

    bootstrap: str
    application_id: str
    input_topic: str
    output_topic: str
    guarantee: Guarantee = "exactly_once_v2"

    @property
    def changelog_topic(self) -> str:
        """The compacted topic Streams creates for the ``counts`` store and restores it from."""
        return f"{self.application_id}-counts-changelog"

    @property
    def repartition_topic(self) -> str:
        """The topic the grouping by word goes through (Streams creates it; deletes what it read)."""
        return f"{self.application_id}-words-repartition"


class WordCountApp:
    """The application of ``config``, logging to ``log``; each ``start`` takes the state directory
    to use (a fresh one makes it restore its store from the changelog)."""

    def __init__(self, config: WordCountConfig, log: Path) -> None:
        require_jar("kafka-streams-4.*.jar", "Kafka Streams 4.x (Maven Central)")
        self.config = config
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, state_dir: Path, timeout: float = 120) -> WordCountApp:
        """Start it and wait until Streams says RUNNING (its tasks assigned, its stores restored)."""
        state_dir.mkdir(parents=True, exist_ok=True)
        since = self.log.stat().st_size if self.log.exists() else 0
        c = self.config
        self.process = spawn(
            [*peer_java(self.log.with_name("streams-log4j2.properties")), WORD_COUNT, c.bootstrap,
             c.application_id, state_dir, c.guarantee, c.input_topic, c.output_topic],
            log=self.log,
        )  # fmt: skip

        def running() -> bool | None:
            text = self.log.read_bytes()[since:].decode(errors="replace")
            return True if "\nSTATE RUNNING" in "\n" + text else None

        wait_until("Kafka Streams word count", running, process=self.process, log=self.log, timeout=timeout)
        return self

    def kill(self) -> None:
        """SIGKILL: a crash mid-run (an open transaction stays open until it times out)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM: Streams closes (commits, leaves its group)."""
        stop_group(self.process, grace=30)
