"""Committed offsets through the brokers: OffsetCommit/OffsetFetch at the group's coordinator.

Role: commit and read a group's offsets, without group membership ("simple" commits: generation -1)
as a consumer that assigns itself its partitions does (the mirror-maker without ZooKeeper), or as a
member of the group's current generation (kafkalog.client.broker_membership). Works
with kafkalog brokers (which keep them in files, or in ZooKeeper when registered there) and with
Kafka 0.9 (which keeps v1+ commits in ``__consumer_offsets``). An offset is the *next* message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from kafkalog.client.client import Client, UsesClient, error_name
from kafkalog.client.connection import BrokerConnection
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.errors import BrokerResponseError, KafkaConnectionError
from kafkalog.protocol import ApiKey
from kafkalog.retry import Backoff
from kafkalog.topics import TopicPartition

_BATCHED_FIND_COORDINATOR = 4  # KIP-699: several keys in one request
_BATCHED_OFFSET_FETCH = 8  # KIP-709: several groups in one request
_COORDINATOR_MOVED = frozenset({14, 15, 16})
"""COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: ask again."""


class OffsetsClient(UsesClient):
    """Commits and fetches one group's offsets at a time. Thread-safe."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] | None = None,
        *,
        client: Client | None = None,
        zookeeper: str | None = None,
        broker_version: str | None = None,
        request_timeout_ms: int = 30_000,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        super().__init__(
            bootstrap, client, zookeeper=zookeeper, request_timeout_ms=request_timeout_ms,
            broker_version=broker_version, security=security,
        )  # fmt: skip
        self.request_timeout = request_timeout_ms / 1000

    def coordinator_address(self, group: str) -> tuple[str, int]:
        """(host, port) of the group's coordinator (FindCoordinator); BrokerResponseError if none."""
        connection = self.client.any_broker()
        api = connection.api(ApiKey.FIND_COORDINATOR)
        if api.version >= _BATCHED_FIND_COORDINATOR:
            answer = connection.request(api, {"coordinator_keys": [group]})["coordinators"][0]
        else:
            answer = connection.request(api, {"key": group})
        if answer["error_code"]:
            raise BrokerResponseError(answer["error_code"], error_name(answer["error_code"]), f"coordinator of {group}")
        return answer["host"], answer["port"]

    def _coordinator(self, group: str) -> BrokerConnection:
        return self.client.connection_to(*self.coordinator_address(group))

    def commit(
        self,
        group: str,
        offsets: Mapping[TopicPartition, int],
        metadata: str = "",
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> None:
        """Store ``offsets`` for ``group``, as a member of ``generation_id`` (-1: without membership);
        raises BrokerResponseError (naming the partition) if the coordinator refused any (e.g.
        ILLEGAL_GENERATION for a member fenced by a rebalance), after retrying a coordinator that
        moved or is loading."""
        if not offsets:
            return
        by_topic: dict[str, list[dict[str, object]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({"partition": partition, "offset": offset, "metadata": metadata})
        topics = [{"topic": t, "partitions": p} for t, p in by_topic.items()]

        membership = {"generation_id": generation_id, "member_id": member_id, "group_instance_id": group_instance_id}

        def once(connection: BrokerConnection) -> list[tuple[str, int, int]]:
            # timestamps and retention of later versions take their defaults (-1: the broker's retention)
            answer = connection.request(
                connection.api(ApiKey.OFFSET_COMMIT), {"group_id": group, "topics": topics, **membership}
            )
            return [
                (t["topic"], p["partition"], p["error_code"])
                for t in answer["responses"]
                for p in t["partition_responses"]
                if p["error_code"]
            ]

        self._with_retries(group, once, "committing offsets")

    def fetch(self, group: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The committed offset of each partition (None where the group never committed one)."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        by_topic: dict[str, list[int]] = {}
        for topic, partition in wanted:
            by_topic.setdefault(topic, []).append(partition)
        found: dict[TopicPartition, int | None] = {}

        def once(connection: BrokerConnection) -> list[tuple[str, int, int]]:
            api = connection.api(ApiKey.OFFSET_FETCH)
            topics = [{"topic": t, "partitions": p} for t, p in by_topic.items()]
            if api.version >= _BATCHED_OFFSET_FETCH:
                answer = connection.request(api, {"groups": [{"group_id": group, "topics": topics}]})["groups"][0]
            else:
                answer = connection.request(api, {"group_id": group, "topics": topics})
            if answer.get("error_code"):  # v2+: the group's own error (not coordinator, loading ...)
                code = answer["error_code"]
                raise BrokerResponseError(code, error_name(code), f"fetching offsets of group {group}")
            errors = []
            for t in answer["responses"]:
                for p in t["partition_responses"]:
                    if p["error_code"] and p["error_code"] != 3:  # UNKNOWN_TOPIC_OR_PARTITION: nothing committed
                        errors.append((t["topic"], p["partition"], p["error_code"]))
                    else:
                        found[(t["topic"], p["partition"])] = p["offset"] if p["offset"] >= 0 else None
            return errors

        self._with_retries(group, once, "fetching offsets")
        return {tp: found.get(tp) for tp in wanted}

    def _with_retries(
        self, group: str, once: Callable[[BrokerConnection], list[tuple[str, int, int]]], what: str
    ) -> None:
        backoff = Backoff(first=0.2, cap=0.2, budget_s=self.request_timeout)
        while True:
            try:
                errors = once(self._coordinator(group))
            except KafkaConnectionError:
                if not backoff.wait():
                    raise
                continue
            except BrokerResponseError as exc:
                if exc.error_code not in _COORDINATOR_MOVED or not backoff.wait():
                    raise
                continue
            if not errors:
                return
            topic, partition, code = errors[0]
            if code in _COORDINATOR_MOVED and backoff.wait():
                continue
            raise BrokerResponseError(code, error_name(code), f"{what} of group {group} for {topic}-{partition}")
