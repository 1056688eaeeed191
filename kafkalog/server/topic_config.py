"""Topic-level configuration by Kafka's names (``retention.ms``...), as CreateTopics carries it and
as ZooKeeper keeps it at ``/config/topics/<topic>``: parsed into the LogConfig of the topic's logs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafkalog.log import LogConfig


def _message_format(version: str) -> int:
    """Kafka's ``message.format.version`` ("0.10.2", "2.8", "3.0-IV1"...) as the format it means:
    1 (message sets) before 0.11, 2 (record batches) from 0.11 on."""
    major, minor = (int(part) for part in version.split("-", maxsplit=1)[0].split(".")[:2])
    if major < 0 or minor < 0:
        raise ValueError(version)
    return 1 if (major, minor) < (0, 11) else 2


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
        except (KeyError, ValueError, TypeError):
            expected = {
                "message.timestamp.type": "CreateTime or LogAppendTime",
                "message.format.version": "a Kafka version such as 0.10.2 (message sets) or 3.0 (record batches)",
            }.get(name, "an integer")
            raise ValueError(f"{name}={value!r} is not a valid value (expected {expected})") from None
    return LogConfig(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, **values})
