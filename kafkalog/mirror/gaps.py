"""What to do when a source partition's next offset is no longer (or not yet) on its broker.

Two cases (reliability rows M3, M5):
- *a gap*: the offset to mirror from is below the partition's earliest offset: retention deleted
  messages before they were mirrored;
- *a backward jump*: the offset is beyond the partition's end: the topic was deleted and created
  again (its offsets restarted), or the committed offset belongs to another cluster.

Policy ``fail`` (the default) stops the mirror with an error naming source, topic, partition, the
offset and the partition's range. Policy ``continue`` goes on from the earliest offset and records
the lost range: a warning, a counter, and a line in the gap file (JSON lines).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

from kafkalog.errors import KafkalogError

log = logging.getLogger(__name__)


class MirrorGapError(KafkalogError):
    """A source partition cannot be mirrored from where it should be (see the module doc)."""


class GapPolicy:
    """Decides, for one source cluster, where a partition goes on from. Thread-safe."""

    def __init__(self, source: str, policy: str, gap_file: Path | None) -> None:
        if policy not in ("fail", "continue"):
            raise MirrorGapError(f"on_gap must be fail or continue, not {policy!r}")
        self.source = source
        self.policy = policy
        self.gap_file = gap_file
        self.lost_messages = 0
        self.gaps = 0
        self._lock = threading.Lock()

    def resolve(self, tp: tuple[str, int], offset: int, earliest: int, latest: int) -> int:
        """Where to mirror ``tp`` from, given the wanted ``offset`` and the broker's range."""
        topic, partition = tp
        if earliest <= offset <= latest:
            return offset
        if offset < earliest:
            what = (
                f"{topic}-{partition}: offset {offset} is no longer on the broker (earliest "
                f"{earliest}, latest {latest}): messages {offset}..{earliest - 1} were deleted by retention "
                "before they were mirrored"
            )
            lost_from, lost_to = offset, earliest - 1
        else:
            what = (
                f"{topic}-{partition}: offset {offset} is beyond the partition's end {latest} "
                f"(earliest {earliest}): the topic was recreated, or the offset belongs to another cluster"
            )
            lost_from, lost_to = latest, offset - 1  # nothing is known lost; the range is what we skip past
        if self.policy == "fail":
            raise MirrorGapError(
                what + "; to skip them and go on, run with on_gap: continue (recorded in the gap file)"
            )
        log.warning("source %s: %s; continuing from %d (on_gap: continue)", self.source, what, earliest)
        with self._lock:
            self.gaps += 1
            if offset < earliest:
                self.lost_messages += earliest - offset
            if self.gap_file is not None:
                self.gap_file.parent.mkdir(parents=True, exist_ok=True)
                record = {
                    "source": self.source, "topic": topic, "partition": partition, "wanted": offset,
                    "earliest": earliest, "latest": latest, "lost_from": lost_from, "lost_to": lost_to,
                    "continued_at": earliest, "detected_at_ms": int(time.time() * 1000),
                }  # fmt: skip
                with self.gap_file.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(record) + "\n")
        return earliest
