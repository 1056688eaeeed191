"""Consumer group offsets in ZooKeeper: ``/consumers/<group>/offsets/<topic>/<partition>``.

Role: one recipe over a caller's kazoo client, shared by the broker (OffsetCommit/OffsetFetch when
ZooKeeper is configured) and the high-level consumer, so offsets committed by real Kafka clients and
by ours agree. The value is the decimal offset as text (what Kafka 0.8/0.9 write); the node is
persistent. An offset is the *next* message to consume.
"""

from __future__ import annotations

from typing import Any

from kafkalog.errors import RegistryError


def offset_path(group: str, topic: str, partition: int) -> str:
    for what, value in (("group", group), ("topic", topic)):
        if not value or "/" in value or "\0" in value or value in (".", ".."):
            raise RegistryError(f"{what} {value!r} cannot be part of a ZooKeeper path")
    return f"/consumers/{group}/offsets/{topic}/{partition}"


def commit_offset(client: Any, group: str, topic: str, partition: int, offset: int) -> None:
    """Store ``offset`` for the group's partition (create or overwrite)."""
    from kazoo.exceptions import NodeExistsError, NoNodeError  # noqa: PLC0415

    if offset < 0:
        raise RegistryError(f"offset {offset} of {topic}-{partition} for group {group} is negative")
    path = offset_path(group, topic, partition)
    value = str(offset).encode()
    try:
        client.set(path, value)
    except NoNodeError:
        try:
            client.create(path, value, makepath=True)
        except NodeExistsError:  # a concurrent first commit: ours is the later one
            client.set(path, value)


def fetch_offset(client: Any, group: str, topic: str, partition: int) -> int | None:
    """The stored offset, or None if the group never committed one for the partition."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    path = offset_path(group, topic, partition)
    try:
        raw, _ = client.get(path)
    except NoNodeError:
        return None
    try:
        return int(raw.decode().strip())
    except (UnicodeDecodeError, ValueError) as exc:
        raise RegistryError(f"{path}: not an offset: {raw[:100]!r}") from exc


def committed_partitions(client: Any, group: str) -> list[tuple[str, int]]:
    """Every (topic, partition) the group has an offset stored for (OffsetFetch of all partitions)."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    root = offset_path(group, "t", 0).rsplit("/", 2)[0]  # /consumers/<group>/offsets, the group checked
    found: list[tuple[str, int]] = []
    try:
        topics = client.get_children(root)
    except NoNodeError:
        return []
    for topic in sorted(topics):
        try:
            partitions = client.get_children(f"{root}/{topic}")
        except NoNodeError:
            continue  # removed meanwhile
        found.extend((topic, int(p)) for p in sorted(partitions, key=_as_int) if p.isdigit())
    return found


def delete_offsets(client: Any, group: str, partitions: list[tuple[str, int]] | None = None) -> None:
    """Remove the group's offsets of ``partitions`` (None: the group's whole offsets node)."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    root = offset_path(group, "t", 0).rsplit("/", 2)[0]
    targets = [root] if partitions is None else [offset_path(group, t, p) for t, p in partitions]
    for path in targets:
        try:
            client.delete(path, recursive=True)
        except NoNodeError:
            continue


def groups_with_offsets(client: Any) -> list[str]:
    """Every group that has an offsets node under /consumers (ListGroups lists them)."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    try:
        groups = client.get_children("/consumers")
    except NoNodeError:
        return []
    found = []
    for group in sorted(groups):
        try:
            if client.exists(f"/consumers/{group}/offsets"):
                found.append(group)
        except NoNodeError:
            continue
    return found


def _as_int(text: str) -> int:
    return int(text) if text.isdigit() else -1
