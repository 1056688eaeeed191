"""Admin: create, list and describe topics, and read their configs."""

from __future__ import annotations

from collections.abc import Sequence

from kafkalog.client.client import Client, TopicMetadata, UsesClient, check
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.errors import BrokerResponseError, UnsupportedByBrokerError
from kafkalog.protocol import ApiKey


class Admin(UsesClient):
    """Topic administration over a Client. Thread-safe."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] | None = None,
        *,
        client: Client | None = None,
        zookeeper: str | None = None,
        broker_version: str | None = None,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        super().__init__(bootstrap, client, zookeeper=zookeeper, broker_version=broker_version, security=security)

    def create_topic(
        self, name: str, partitions: int = 1, configs: dict[str, str] | None = None, *, validate_only: bool = False
    ) -> None:
        """Create a topic (CreateTopics, Kafka 0.10.1+ and kafkalog); raises BrokerResponseError with
        the broker's reason (e.g. TOPIC_ALREADY_EXISTS) or UnsupportedByBrokerError."""
        connection = self.client.any_broker()
        api = connection.api(ApiKey.CREATE_TOPICS)
        request = {
            "topic": name,
            "num_partitions": partitions,
            "replication_factor": 1,
            "replica_assignment": [],
            "config_entries": [{"config_name": k, "config_value": v} for k, v in (configs or {}).items()],
        }
        body = {"create_topic_requests": [request], "timeout_ms": 10_000, "validate_only": validate_only}
        (answer,) = connection.request(api, body)["topic_errors"]
        if answer["error_code"] and answer.get("error_message"):
            raise BrokerResponseError(answer["error_code"], answer["error_message"], f"creating topic {name!r}")
        check(answer["error_code"], f"creating topic {name!r}")
        if not validate_only:
            self.client.topic(name, refresh=True, wait_ms=10_000)

    def list_topics(self) -> dict[str, int]:
        """Every topic and its number of partitions."""
        return {name: len(meta.leaders) for name, meta in sorted(self.client.refresh_metadata().items())}

    def describe_topic(self, name: str) -> TopicMetadata:
        """A topic's partitions and their leaders (without creating it)."""
        found = {t: m for t, m in self.client.refresh_metadata().items() if t == name}
        if name not in found:
            raise BrokerResponseError(3, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r}")
        return found[name]

    def topic_configs(self, name: str, keys: Sequence[str] | None = None) -> dict[str, str | None] | None:
        """The topic's configs by Kafka name (``keys`` only, if given), from DescribeConfigs (Kafka
        0.11+ and kafkalog); None when the broker does not serve it (Kafka 0.9, 0.10)."""
        connection = self.client.any_broker()
        try:
            api = connection.api(ApiKey.DESCRIBE_CONFIGS)
        except UnsupportedByBrokerError:
            return None
        resource = {
            "resource_type": 2,
            "resource_name": name,
            "configuration_keys": None if keys is None else list(keys),
        }
        (answer,) = connection.request(api, {"resources": [resource]})["results"]
        if answer["error_code"]:
            raise BrokerResponseError(
                answer["error_code"], answer.get("error_message") or "", f"topic {name!r}'s configs"
            )
        return {entry["name"]: entry["value"] for entry in answer["configs"]}
