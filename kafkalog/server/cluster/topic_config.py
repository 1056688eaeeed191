"""Topic-level configuration by Kafka's names (``retention.ms``...), as CreateTopics carries it and
as ZooKeeper keeps it at ``/config/topics/<topic>``: parsed into the LogConfig of the topic's logs."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kafkalog.errors import KafkalogError, LogConfigError
from kafkalog.log import LogConfig
from kafkalog.log.files import write_atomically


def _message_format(version: str) -> int:
    """Kafka's ``message.format.version`` ("0.10.2", "2.8", "3.0-IV1"...) as the format it means:
    1 (message sets) before 0.11, 2 (record batches) from 0.11 on."""
    major, minor = (int(part) for part in version.split("-", maxsplit=1)[0].split(".")[:2])
    if major < 0 or minor < 0:
        raise ValueError(version)
    return 1 if (major, minor) < (0, 11) else 2


def _cleanup_policy(value: str) -> str:
    """Kafka's list ``compact``, ``delete`` or both (either order, spaces allowed) as LogConfig's one
    spelling."""
    words = {word.strip() for word in value.split(",")}
    if not words or not words <= {"compact", "delete"}:
        raise ValueError(value)
    return ",".join(sorted(words))


_LONG_MAX = 2**63 - 1  # Kafka's "no bound" for max.compaction.lag.ms

_KAFKA_CODECS = ("uncompressed", "gzip", "snappy", "lz4", "zstd")
"""Kafka's values of a topic's ``compression.type`` beside ``producer``: a codec its broker
recompresses every batch into."""


class _RefusedValue(ValueError):
    """A valid Kafka value this broker does not serve, refused in words of its own."""


def _compression_type(value: str) -> str:
    """Kafka's ``compression.type``: only ``producer`` (batches kept as their producer compressed
    them). A codec of Kafka's is refused in words that say what to do instead."""
    if value == "producer":
        return value
    if value in _KAFKA_CODECS:
        raise _RefusedValue(
            f"compression.type={value!r}: this broker keeps batches as their producer compressed them and does "
            f"not recompress; set the producer's compression.type={value} instead (in Kafka Connect: the "
            f"connector's producer.override.compression.type), and leave the topic's at producer"
        )
    raise KeyError(value)


# Topic-level configs accepted, and the LogConfig field each one sets.
TOPIC_CONFIGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "retention.ms": ("retention_ms", lambda v: None if int(v) < 0 else int(v)),
    "retention.bytes": ("retention_bytes", lambda v: None if int(v) < 0 else int(v)),
    "segment.bytes": ("segment_bytes", int),
    "segment.ms": ("segment_ms", int),
    "max.message.bytes": ("max_message_bytes", int),
    "flush.messages": ("flush_messages", int),
    "flush.ms": ("flush_ms", int),
    "message.format.version": ("message_format", _message_format),
    "message.timestamp.type": (
        "message_timestamp_type",
        lambda v: {"CreateTime": "create_time", "LogAppendTime": "log_append_time"}[v],
    ),
    "cleanup.policy": ("cleanup_policy", _cleanup_policy),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", int),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", lambda v: None if int(v) == _LONG_MAX else int(v)),
    "delete.retention.ms": ("delete_retention_ms", int),
    "compression.type": ("compression_type", _compression_type),
}


def topic_log_config(base: LogConfig, entries: Mapping[str, str]) -> LogConfig | None:
    """``base`` with ``entries`` applied (None when there are none). Raises KeyError for an unknown
    name, ValueError (or LogConfigError) for a bad value: the caller names the topic."""
    if not entries:
        return None
    values: dict[str, Any] = {}
    for name, value in entries.items():
        if name not in TOPIC_CONFIGS:
            raise KeyError(f"unsupported topic config {name!r} (supported: {', '.join(sorted(TOPIC_CONFIGS))})")
        field, parse = TOPIC_CONFIGS[name]
        try:
            values[field] = parse(value)
        except _RefusedValue:
            raise
        except (KeyError, ValueError, TypeError):
            expected = {
                "message.timestamp.type": "CreateTime or LogAppendTime",
                "message.format.version": "a Kafka version such as 0.10.2 (message sets) or 3.0 (record batches)",
                "cleanup.policy": "compact, delete or compact,delete",
                "min.cleanable.dirty.ratio": "a number in [0, 1]",
                "compression.type": "producer",
            }.get(name, "an integer")
            raise ValueError(f"{name}={value!r} is not a valid value (expected {expected})") from None
    try:
        return LogConfig(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, **values})
    except LogConfigError as exc:
        # LogConfig names its own field ("segment_bytes: ..."): name the topic config the client sent
        field, sep, rule = str(exc).partition(": ")
        kafka_name = next((name for name, (f, _) in TOPIC_CONFIGS.items() if f == field), field)
        raise LogConfigError(f"{kafka_name}: {rule}" if sep else str(exc)) from exc


def kafka_value(name: str, config: LogConfig) -> str | None:
    """The value of topic config ``name`` that ``config`` amounts to, written as Kafka writes it
    (``retention.ms`` -1 for forever, ``message.format.version`` 0.10.2 or 3.0, ...)."""
    field = TOPIC_CONFIGS[name][0]
    value = getattr(config, field)
    if name in ("retention.ms", "retention.bytes"):
        return "-1" if value is None else str(value)
    if name == "message.format.version":
        return "0.10.2" if value == 1 else "3.0"
    if name == "message.timestamp.type":
        return "LogAppendTime" if value == "log_append_time" else "CreateTime"
    if name == "max.compaction.lag.ms":
        return str(_LONG_MAX) if value is None else str(value)
    return None if value is None else str(value)


class TopicConfigFiles:
    """The topic configs of a broker without ZooKeeper, kept durably (ZooKeeper keeps them at
    /config/topics otherwise): one JSON file per topic of its overrides by Kafka name,

        <first data dir>/.topic_configs/<hex of the topic name>.json
        {"format_version": 1, "topic": "<name>", "configs": {"retention.ms": "...", ...}}

    replaced atomically. Thread-safe."""

    FORMAT_VERSION = 1

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / ".topic_configs"
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, str]] = {}
        if self.directory.is_dir():
            for path in sorted(self.directory.glob("*.json")):
                try:
                    document = json.loads(path.read_text(encoding="utf-8"))
                    if document.get("format_version") != self.FORMAT_VERSION:
                        raise ValueError(f"unknown format_version {document.get('format_version')!r}")
                    topic, configs = document["topic"], document["configs"]
                    if bytes.fromhex(path.stem).decode() != topic or not isinstance(configs, dict):
                        raise ValueError("the topic inside does not match the file name")
                    self._entries[topic] = {str(k): str(v) for k, v in configs.items()}
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    # a topic silently back on default retention could delete data early: refuse
                    raise TopicConfigError(f"topic config file {path} is unreadable: {exc}") from exc

    def all(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {topic: dict(entries) for topic, entries in self._entries.items()}

    def get(self, topic: str) -> dict[str, str]:
        with self._lock:
            return dict(self._entries.get(topic, {}))

    def put(self, topic: str, entries: Mapping[str, str]) -> None:
        """Store ``entries`` as the topic's whole set of overrides (empty: none)."""
        with self._lock:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / (topic.encode().hex() + ".json")
            if entries:
                document = {
                    "format_version": self.FORMAT_VERSION,
                    "topic": topic,
                    "configs": dict(sorted(entries.items())),
                }
                write_atomically(path, json.dumps(document, indent=1).encode(), crash_prefix="topic_config")
                self._entries[topic] = dict(entries)
            else:
                path.unlink(missing_ok=True)
                self._entries.pop(topic, None)


class TopicConfigError(KafkalogError):
    """A topic's stored configuration cannot be read; the broker refuses to start rather than guess."""
