"""Kafka's ACLs on transactional ids, on a broker with an authorizer: WRITE on the TransactionalId for
InitProducerId, AddPartitionsToTxn, EndTxn and a transactional Produce (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, nothing written); DESCRIBE for FindCoordinator (key type 1)
and DescribeTransactions; ListTransactions lists only what the caller may describe; WriteTxnMarkers
needs CLUSTER_ACTION. Real clients (librdkafka over SASL) and raw requests (as ANONYMOUS, on the
broker's plaintext listener)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin as confluent_admin
import pytest

from kafkalog.protocol import ApiKey, ErrorCode
from kafkalog.server.security.credentials import UsersFile
from tests.support.kafkalog import BrokerProcess, roundtrip

from .raw_transactions import RawTransaction, describe_transaction, log_ends, stable_and_end

pytestmark = pytest.mark.integration

TOPIC = "guarded-txn"
ANONYMOUS = "User:ANONYMOUS"
DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@dataclass(frozen=True)
class Guarded:
    broker: BrokerProcess

    @property
    def plain(self) -> int:
        """The plaintext listener: its callers are ANONYMOUS."""
        return self.broker.ports["PLAINTEXT"]

    def sasl(self, user: str, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.broker.ports['SASL_PLAINTEXT']}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": f"{user}-password", **extra,
        }  # fmt: skip


def _allow(principal: str, kind: confluent_admin.ResourceType, name: str, *operations: str) -> list[Any]:
    return [
        confluent_admin.AclBinding(
            kind,
            name,
            confluent_admin.ResourcePatternType.LITERAL,
            principal,
            "*",
            confluent_admin.AclOperation[operation],
            confluent_admin.AclPermissionType.ALLOW,
        )
        for operation in operations
    ]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    root = Path(tmp_path_factory.mktemp("guarded-txn"))
    users = UsersFile(root / "users.json")
    for user in ("admin", "alice", "bob"):
        users.set_password(user, f"{user}-password", ["SCRAM-SHA-512"])
    config = {
        "listeners": ["PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"],
        "sasl": {"users_file": str(users.path), "mechanisms": ["SCRAM-SHA-512"]},
        "authorization": {"super_users": ["User:admin"]},
    }
    with BrokerProcess(root / "data", **config) as broker:
        made = Guarded(broker)
        admin = confluent_admin.AdminClient(made.sasl("admin"))
        (created,) = admin.create_topics([confluent_admin.NewTopic(TOPIC, 1)]).values()
        created.result(15)
        topic, txn = confluent_admin.ResourceType.TOPIC, confluent_admin.ResourceType.TRANSACTIONAL_ID
        bindings = [
            *_allow("User:alice", topic, TOPIC, "WRITE", "DESCRIBE"),
            *_allow("User:alice", txn, "alice-tx", "WRITE"),
            *_allow("User:bob", topic, TOPIC, "WRITE", "DESCRIBE"),
            *_allow(ANONYMOUS, topic, TOPIC, "WRITE", "DESCRIBE", "READ"),
            *_allow(ANONYMOUS, txn, "anon-tx", "WRITE"),
            *_allow(ANONYMOUS, txn, "peek-tx", "DESCRIBE"),
        ]
        for future in admin.create_acls(bindings).values():
            future.result(15)
        yield made


def _transaction(config: dict[str, Any], transactional_id: str, value: bytes) -> None:
    """One committed transaction of librdkafka's producer."""
    producer = confluent_kafka.Producer({**config, "transactional.id": transactional_id, "message.timeout.ms": 8000})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(TOPIC, value, partition=0)
    producer.commit_transaction(15)


def test_write_on_the_transactional_id_is_needed_to_use_it(guarded: Guarded) -> None:
    _transaction(guarded.sasl("alice"), "alice-tx", b"alice")  # allowed
    bob = confluent_kafka.Producer({**guarded.sasl("bob"), "transactional.id": "bob-tx"})
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        bob.init_transactions(15)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    # ANONYMOUS may use its own id (the control), not alice's: refused before anything else is looked at
    mine = RawTransaction(guarded.plain, "anon-tx")
    assert mine.init() == ErrorCode.NONE
    assert mine.add(TOPIC, [0]) == {ErrorCode.NONE}
    before = log_ends(f"127.0.0.1:{guarded.plain}", TOPIC, [0])
    theirs = RawTransaction(guarded.plain, "alice-tx", producer_id=mine.producer_id, epoch=mine.epoch)
    assert theirs.init() == DENIED
    assert theirs.add(TOPIC, [0]) == {DENIED}
    assert theirs.produce(TOPIC, 0, [b"as alice"])["error_code"] == DENIED
    assert theirs.end(commit=True) == DENIED
    assert mine.produce(TOPIC, 0, [b"as alice"], transactional_id="alice-tx")["error_code"] == DENIED
    assert log_ends(f"127.0.0.1:{guarded.plain}", TOPIC, [0]) == before
    assert mine.produce(TOPIC, 0, [b"anon"])["error_code"] == ErrorCode.NONE
    assert mine.end(commit=True) == ErrorCode.NONE


def test_describe_on_the_transactional_id_is_needed_to_find_and_describe_it(guarded: Guarded) -> None:
    _transaction(guarded.sasl("admin"), "peek-tx", b"admin")  # the super user may use any id
    _transaction(guarded.sasl("alice"), "alice-tx", b"alice")
    anonymous = RawTransaction(guarded.plain, "anon-tx")
    assert anonymous.init() == ErrorCode.NONE

    def find(key: str) -> int:
        return int(roundtrip(guarded.plain, ApiKey.FIND_COORDINATOR, 3, {"key": key, "key_type": 1})["error_code"])

    assert find("peek-tx") == ErrorCode.NONE
    assert find("anon-tx") == ErrorCode.NONE  # WRITE implies DESCRIBE
    assert find("alice-tx") == DENIED
    assert describe_transaction(guarded.plain, "peek-tx")["transaction_state"] == "CompleteCommit"
    assert describe_transaction(guarded.plain, "alice-tx")["error_code"] == DENIED
    listed = roundtrip(guarded.plain, ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
    assert listed["error_code"] == ErrorCode.NONE
    assert {t["transactional_id"] for t in listed["transaction_states"]} == {"anon-tx", "peek-tx"}
    assert RawTransaction(guarded.plain, "peek-tx").init() == DENIED  # DESCRIBE is not WRITE


def test_write_txn_markers_needs_cluster_action(guarded: Guarded) -> None:
    bootstrap = f"127.0.0.1:{guarded.plain}"
    open_ = RawTransaction(guarded.plain, "anon-tx")
    assert open_.init() == ErrorCode.NONE
    assert open_.add(TOPIC, [0]) == {ErrorCode.NONE}
    assert open_.produce(TOPIC, 0, [b"pending"])["error_code"] == ErrorCode.NONE
    before = stable_and_end(bootstrap, TOPIC, [0])
    marker = {"producer_id": open_.producer_id, "producer_epoch": open_.epoch, "transaction_result": True,
              "topics": [{"name": TOPIC, "partition_indexes": [0]}], "coordinator_epoch": 0}  # fmt: skip
    answer = roundtrip(guarded.plain, ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [marker]})
    (partition,) = answer["markers"][0]["topics"][0]["partitions"]
    assert partition["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert stable_and_end(bootstrap, TOPIC, [0]) == before, "no marker written: the transaction still holds the LSO"
    assert before[0][0] < before[1][0]
    assert open_.end(commit=False) == ErrorCode.NONE
