"""Topics in ZooKeeper: ``/brokers/topics/<topic>``, each partition and the broker that serves it.

Role: one recipe over a caller's kazoo client. The node's value is Kafka 0.9's JSON,
``{"version": 1, "partitions": {"0": [broker, ...], ...}}`` (the first broker of a list leads the
partition), persistent: a topic outlives the brokers that serve it. Creating a topic that exists is
an error naming it; reading tolerates Kafka's own nodes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from kafkalog.errors import RegistryError

BROKER_TOPICS = "/brokers/topics"
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def spread(partitions: int, brokers: Sequence[int], *, start: int = 0) -> dict[int, int]:
    """Partition → broker, round-robin over the sorted broker ids from ``start`` (Kafka's way of
    spreading a new topic's leaders)."""
    if partitions < 1:
        raise RegistryError(f"a topic needs at least one partition, not {partitions}")
    ids = sorted(brokers)
    if not ids:
        raise RegistryError("no broker is registered: a topic needs at least one live broker")
    return {p: ids[(start + p) % len(ids)] for p in range(partitions)}


def create_topic(client: Any, topic: str, assignment: dict[int, int]) -> None:
    """Register ``topic`` with partition → broker ``assignment``; RegistryError if it exists."""
    from kazoo.exceptions import NodeExistsError  # noqa: PLC0415 - kazoo only where ZooKeeper is used

    if not _TOPIC.match(topic) or topic in (".", ".."):
        raise RegistryError(f"{topic!r} is not a valid topic name (letters, digits, '.', '_', '-'; at most 249)")
    if sorted(assignment) != list(range(len(assignment))):
        raise RegistryError(f"topic {topic}: partitions must be numbered 0..{len(assignment) - 1}")
    value = json.dumps({"version": 1, "partitions": {str(p): [b] for p, b in sorted(assignment.items())}})
    try:
        client.create(topic_path(topic), value.encode(), makepath=True)
    except NodeExistsError as exc:
        raise RegistryError(f"topic {topic} already exists ({topic_path(topic)})") from exc


def update_topic(client: Any, topic: str, assignment: dict[int, int]) -> None:
    """Rewrite ``topic``'s partition → broker ``assignment`` (partitions added: Kafka's tools write
    the same node); RegistryError if the topic is not registered or the numbering has gaps."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    if sorted(assignment) != list(range(len(assignment))):
        raise RegistryError(f"topic {topic}: partitions must be numbered 0..{len(assignment) - 1}")
    value = json.dumps({"version": 1, "partitions": {str(p): [b] for p, b in sorted(assignment.items())}})
    try:
        client.set(topic_path(topic), value.encode())
    except NoNodeError as exc:
        raise RegistryError(f"topic {topic} is not registered ({topic_path(topic)})") from exc


def delete_topic(client: Any, topic: str) -> None:
    """Remove ``topic``'s registration and configuration (each broker then drops its logs)."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    for path in (topic_path(topic), f"{TOPIC_CONFIGS}/{topic}"):
        try:
            client.delete(path, recursive=True)
        except NoNodeError:
            continue


def state_path(topic: str, partition: int) -> str:
    return f"{topic_path(topic)}/partitions/{partition}/state"


def write_partition_state(client: Any, topic: str, partition: int, leader: int) -> None:
    """Say, as Kafka's controller does for its tools (kafka-topics --describe), who leads a
    partition: ``{"controller_epoch": 1, "leader": id, "version": 1, "leader_epoch": 0, "isr": [id]}``
    in an ephemeral node of the leader's session, so that a dead leader's claim vanishes with it
    (the tools then show no leader, which is the truth: nothing replicates here)."""
    from kazoo.exceptions import NodeExistsError, NoNodeError  # noqa: PLC0415

    path = state_path(topic, partition)
    value = json.dumps({"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": 0, "isr": [leader]})
    client.ensure_path(path.rsplit("/", 1)[0])
    try:
        client.create(path, value.encode(), ephemeral=True)
    except NodeExistsError:
        try:
            _, stat = client.get(path)
            if stat.ephemeralOwner != client.client_id[0]:  # a previous session's, or a persistent one
                client.delete(path)
                client.create(path, value.encode(), ephemeral=True)
        except (NoNodeError, NodeExistsError):
            return  # changing hands meanwhile: the next refresh writes it again


CONTROLLER = "/controller"


def claim_controller(client: Any, broker_id: int, now_ms: int) -> None:
    """Hold /controller (Kafka's ephemeral ``{"version": 1, "brokerid": id, "timestamp": "ms"}``),
    and /controller_epoch, for Kafka's ZooKeeper tools; nothing here is elected by it."""
    from kazoo.exceptions import NodeExistsError  # noqa: PLC0415

    value = json.dumps({"version": 1, "brokerid": broker_id, "timestamp": str(now_ms)}).encode()
    try:
        client.create(CONTROLLER, value, ephemeral=True)
    except NodeExistsError:
        return
    try:
        client.create("/controller_epoch", b"1")
    except NodeExistsError:
        return


CONFIG_CHANGES = "/config/changes"


def notify_config_change(client: Any, topic: str) -> None:
    """Tell every broker that ``topic``'s configuration changed (Kafka's notification node, which
    Kafka's own tools also write): a sequential node under /config/changes."""
    value = json.dumps({"version": 1, "entity_type": "topics", "entity_name": topic}).encode()
    client.create(f"{CONFIG_CHANGES}/config_change_", value, sequence=True, makepath=True)


def read_topic(client: Any, topic: str) -> dict[int, int] | None:
    """Partition → serving broker of ``topic``, or None if it is not registered."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    try:
        raw, _ = client.get(topic_path(topic))
    except NoNodeError:
        return None
    return parse_topic(raw, topic_path(topic))


def parse_topic(raw: bytes, where: str) -> dict[int, int]:
    try:
        partitions = json.loads(raw)["partitions"]
        return {int(p): int(replicas[0]) for p, replicas in sorted(partitions.items(), key=lambda kv: int(kv[0]))}
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise RegistryError(f"{where}: not a topic registration ({exc}): {raw[:200]!r}") from exc


def all_topics(client: Any) -> dict[str, dict[int, int]]:
    """Every registered topic with its partitions (topics deleted while being read are skipped)."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    try:
        names = client.get_children(BROKER_TOPICS)
    except NoNodeError:
        return {}
    out = {}
    for name in sorted(names):
        found = read_topic(client, name)
        if found is not None:
            out[name] = found
    return out


TOPIC_CONFIGS = "/config/topics"


def write_topic_config(client: Any, topic: str, entries: dict[str, str]) -> None:
    """Store a topic's configuration overrides at ``/config/topics/<topic>`` (Kafka's JSON,
    ``{"version": 1, "config": {"retention.ms": "…"}}``), before the topic itself is registered, so
    a broker that sees the topic finds its configuration."""
    value = json.dumps({"version": 1, "config": {str(k): str(v) for k, v in sorted(entries.items())}}).encode()
    path = f"{TOPIC_CONFIGS}/{topic}"
    if client.exists(path):
        client.set(path, value)
    else:
        client.create(path, value, makepath=True)


def read_topic_config(client: Any, topic: str) -> dict[str, str]:
    """A topic's configuration overrides by Kafka name (empty when it has none)."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    path = f"{TOPIC_CONFIGS}/{topic}"
    try:
        raw, _ = client.get(path)
    except NoNodeError:
        return {}
    try:
        config = json.loads(raw)["config"]
        return {str(k): str(v) for k, v in config.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RegistryError(f"{path}: not a topic configuration ({exc}): {raw[:200]!r}") from exc
