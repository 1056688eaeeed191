"""Who is primary: elected through the cluster's group protocol, as Confluent's registry elects its leader.

Every registry sharing a topic joins one group (``schema-registry`` by default) with the classic
group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), protocol type ``sr`` and one protocol
``v0``, whose member metadata is the registry's identity as Confluent's registry writes it:
``{"version":1,"host":...,"port":...,"master_eligibility":...,"scheme":...,"leader":...}``. The
member the coordinator makes the group's leader (any of them) decides for everyone, as Confluent's
assignor does: among the eligible members, one that says it is primary already stays primary
(sticky); otherwise the one with the smallest URL. Members with one URL twice make an error
assignment (no primary). Every member gets the same assignment,
``{"version":1,"error":0,"master":<member id>,"master_identity":{...}}``, so Confluent's registries
and these may share a group.

This is a small member of its own rather than kafkalog.client's consumer membership: that one's
duties (partitions, offsets, streams, release callbacks) are a consumer's; this one needs the
requests only, made over kafkalog.client's connections.

Invariants:
- ``is_primary()`` is true only while this member holds the latest assignment naming it and a
  heartbeat (or the SyncGroup) was acknowledged less than 0.8 session timeouts ago: by then the
  coordinator cannot have expired it and let another member be elected, so two registries never
  both believe they are primary for long (a write still goes through the topic, which orders them);
- a primary that dies (or is cut off) is replaced once the coordinator expires it, after the
  session timeout; the others learn the new primary at the rebalance that follows.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Protocol

from kafkalog.client.client import Client, error_name
from kafkalog.client.connection import BrokerConnection
from kafkalog.client.offsets import OffsetsClient
from kafkalog.client.security import PLAINTEXT, ClientSecurity
from kafkalog.errors import BrokerResponseError, KafkalogError
from kafkalog.protocol import ApiKey, ErrorCode

log = logging.getLogger(__name__)

PROTOCOL_TYPE: Final = "sr"
PROTOCOL: Final = "v0"
DUPLICATE_URLS: Final = 1
_SAFE_SHARE_OF_SESSION: Final = 0.8
_FENCED = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID})
_MAX_METADATA: Final = 4096


class Primary(Protocol):
    """What the server asks of an election."""

    def is_primary(self) -> bool: ...

    def primary_url(self) -> str | None: ...

    def term(self) -> object | None:
        """While this registry is primary, a value that changes whenever the election moves (the
        group's generation and this member); None while it is not primary."""
        ...


@dataclass(frozen=True, slots=True)
class StaticPrimary:
    """No election: ``url`` is the primary's, this registry is it when ``own`` (one registry alone,
    or tests)."""

    url: str | None
    own: bool = True

    def is_primary(self) -> bool:
        return self.own

    def primary_url(self) -> str | None:
        return self.url

    def term(self) -> object | None:
        return 0 if self.own else None


@dataclass(frozen=True, slots=True)
class Identity:
    """A registry as its group knows it (Confluent's SchemaRegistryIdentity)."""

    host: str
    port: int
    master_eligibility: bool = True
    scheme: str = "http"
    leader: bool = False
    version: int = 1

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def encode(self) -> bytes:
        value = asdict(self)
        return json.dumps({k: value[k] for k in ("version", "host", "port", "master_eligibility", "scheme", "leader")},
                          separators=(",", ":")).encode()  # fmt: skip

    @classmethod
    def decode(cls, data: bytes | Any) -> Identity | None:
        """The identity a member's metadata holds, or None when it holds none we can read."""
        try:
            value = json.loads(bytes(data)[:_MAX_METADATA])
            identity = cls(
                str(value["host"]), int(value["port"]), value.get("master_eligibility") is True,
                str(value.get("scheme", "http")), value.get("leader") is True,
            )  # fmt: skip
        except Exception:  # any member's metadata is untrusted: Infinity (OverflowError), deep nesting ...
            return None
        return identity if identity.scheme in ("http", "https") and 0 < identity.port < 65536 else None


def choose(members: Sequence[tuple[str, Identity | None]]) -> dict[str, Any]:
    """The assignment every member gets, decided from the members (id, identity) as Confluent's
    registry decides it."""
    identities = [(member, identity) for member, identity in members if identity is not None]
    urls = [identity.url for _, identity in identities]
    if len(set(urls)) != len(urls):
        return {"version": 1, "error": DUPLICATE_URLS, "master": None, "master_identity": None}
    eligible = [(identity.url, member, identity) for member, identity in identities if identity.master_eligibility]
    sticky = [entry for entry in eligible if entry[2].leader]
    chosen = min(sticky or eligible, default=None)
    if chosen is None:
        return {"version": 1, "error": 0, "master": None, "master_identity": None}
    _, member, identity = chosen
    master = json.loads(identity.encode())
    return {"version": 1, "error": 0, "master": member, "master_identity": master}


class GroupElection:
    """See the module docstring. ``start()`` runs the member in a thread; ``close()`` leaves the group."""

    def __init__(
        self,
        bootstrap: str,
        identity: Identity,
        *,
        group: str = "schema-registry",
        session_timeout_s: float = 10.0,
        security: ClientSecurity = PLAINTEXT,
        client_id: str = "kafkalog-registry",
    ) -> None:
        self.identity = identity
        self.group = group
        self.session_timeout_s = session_timeout_s
        # a registry has nothing to finish before it joins again, and a live one learns of a
        # rebalance within a heartbeat: a session is long enough to wait for every member (a dead
        # one holds a rebalance up this long)
        self.rebalance_timeout_s = session_timeout_s
        self.heartbeat_interval_s = session_timeout_s / 3
        self.client_id = client_id
        self.security = security
        self.client = Client(bootstrap, client_id=client_id, security=security)
        self.offsets = OffsetsClient(client=self.client)
        self.member_id = ""
        self.generation_id = -1
        self._primary: tuple[str, str] | None = None
        """(member id, URL) of the primary the last assignment named."""
        self._generation = -1
        """The generation the last assignment came in (``generation_id`` moves at JoinGroup already)."""
        self._assignments = 0
        """How many assignments this member received."""
        self._acknowledged_at = -1e9
        self._connection: BrokerConnection | None = None
        self._closed = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"{client_id}-election", daemon=True)

    # ------------------------------------------------------------------ what the server asks

    def is_primary(self) -> bool:
        primary = self._primary
        fresh = time.monotonic() - self._acknowledged_at < self.session_timeout_s * _SAFE_SHARE_OF_SESSION
        return primary is not None and primary[0] == self.member_id and fresh

    def primary_url(self) -> str | None:
        primary = self._primary
        return primary[1] if primary is not None else None

    def term(self) -> object | None:
        with self._changed:  # the generation and the assignment change together (in _assigned)
            generation, member = self._generation, self.member_id
        return (generation, member) if self.is_primary() and member else None

    def wait_for_assignment(self, timeout_s: float) -> bool:
        """Whether the group gave this member an assignment (a primary, or none) within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self._assignments and not self._closed.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return self._assignments > 0

    # ------------------------------------------------------------------ the member

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        with self._changed:
            self._changed.notify_all()
        self._thread.join(self.rebalance_timeout_s + 5)
        if self.member_id:
            try:
                connection = self._group_connection()
                body = {
                    "group_id": self.group, "member_id": self.member_id,
                    "members": [{"member_id": self.member_id, "group_instance_id": None}],
                }  # fmt: skip
                connection.request(connection.api(ApiKey.LEAVE_GROUP), body)
            except KafkalogError as e:
                log.info("leaving group %s: %s", self.group, e)
        self._drop_connection()
        self.offsets.close()
        self.client.close()

    def _group_connection(self) -> BrokerConnection:
        if self._connection is None:
            host, port = self.offsets.coordinator_address(self.group)
            self._connection = BrokerConnection(
                host, port, client_id=self.client_id, timeout_ms=int((self.rebalance_timeout_s + 10) * 1000),
                security=self.security,
            )  # fmt: skip
        return self._connection

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _run(self) -> None:
        joined = False
        while not self._closed.is_set():
            try:
                if not joined:
                    joined = self._join_and_sync()
                    continue
                if self._closed.wait(self.heartbeat_interval_s):
                    return
                joined = self._heartbeat()
            except KafkalogError as e:
                log.warning("registry election in group %s: %s", self.group, e)
                self._drop_connection()
                joined = False
                self._closed.wait(min(1.0, self.heartbeat_interval_s))
            except Exception:
                # a member that stopped would stop heartbeating and keep naming a stale primary until a
                # restart: forget the primary (writes answer 50004 meanwhile), wait, join again
                log.exception("registry election in group %s: an unexpected failure, joining again", self.group)
                with self._changed:
                    self._primary = None
                    self._changed.notify_all()
                self._drop_connection()
                joined = False
                self._closed.wait(min(1.0, self.heartbeat_interval_s))

    def _join_and_sync(self) -> bool:
        """One JoinGroup + SyncGroup round; False when the group must be joined again."""
        connection = self._group_connection()
        identity = Identity(
            self.identity.host, self.identity.port, self.identity.master_eligibility, self.identity.scheme,
            leader=self.is_primary(),
        )  # fmt: skip
        join = connection.request(
            connection.api(ApiKey.JOIN_GROUP),
            {
                "group_id": self.group,
                "session_timeout_ms": int(self.session_timeout_s * 1000),
                "rebalance_timeout_ms": int(self.rebalance_timeout_s * 1000),
                "member_id": self.member_id,
                "group_instance_id": None,
                "protocol_type": PROTOCOL_TYPE,
                "protocols": [{"name": PROTOCOL, "metadata": identity.encode()}],
            },
        )
        code = join["error_code"]
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = join["member_id"]
            return False
        if code in _FENCED:
            self.member_id = ""
            return False
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            return False
        if code:
            raise BrokerResponseError(code, error_name(code), f"joining group {self.group}")
        self.member_id, self.generation_id = join["member_id"], join["generation_id"]
        assignments = []
        if join["leader"] == self.member_id and not join.get("skip_assignment"):
            members = [(m["member_id"], Identity.decode(m["metadata"])) for m in join["members"]]
            decided = json.dumps(choose(members), separators=(",", ":")).encode()
            assignments = [{"member_id": member, "assignment": decided} for member, _ in members]
        sent = time.monotonic()
        sync = connection.request(
            connection.api(ApiKey.SYNC_GROUP),
            {
                "group_id": self.group,
                "generation_id": self.generation_id,
                "member_id": self.member_id,
                "group_instance_id": None,
                "protocol_type": PROTOCOL_TYPE,
                "protocol_name": join["protocol_name"],
                "assignments": assignments,
            },
        )
        code = sync["error_code"]
        if code in _FENCED or code == ErrorCode.REBALANCE_IN_PROGRESS:
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            return False
        if code:
            raise BrokerResponseError(code, error_name(code), f"syncing group {self.group}")
        self._acknowledged_at = sent
        self._assigned(bytes(sync["assignment"] or b""))
        return True

    def _assigned(self, data: bytes) -> None:
        primary: tuple[str, str] | None = None
        try:
            value = json.loads(data[:_MAX_METADATA]) if data else {}
            master, master_identity = value.get("master"), value.get("master_identity")
            if value.get("error") == DUPLICATE_URLS:
                log.error("group %s: two registries advertise one URL: no primary until that is fixed", self.group)
            elif isinstance(master, str) and master_identity is not None:
                chosen = Identity.decode(json.dumps(master_identity).encode())
                if chosen is not None:
                    primary = (master, chosen.url)
        except Exception:  # the group's leader is any member: its assignment is untrusted
            log.warning("group %s: an assignment that is not a registry's: %r", self.group, data[:200])
        if primary != self._primary:
            mine = " (this registry)" if primary and primary[0] == self.member_id else ""
            shown = primary[1] if primary else "none"
            log.info("group %s generation %d: primary %s%s", self.group, self.generation_id, shown, mine)
        with self._changed:
            self._primary = primary
            self._generation = self.generation_id
            self._assignments += 1
            self._changed.notify_all()

    def _heartbeat(self) -> bool:
        """One heartbeat; False when the group must be joined again."""
        connection = self._group_connection()
        sent = time.monotonic()
        code = connection.request(
            connection.api(ApiKey.HEARTBEAT),
            {
                "group_id": self.group,
                "generation_id": self.generation_id,
                "member_id": self.member_id,
                "group_instance_id": None,
            },
        )["error_code"]
        if code == ErrorCode.NONE:
            self._acknowledged_at = sent
            return True
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self._acknowledged_at = sent
            return False
        if code in _FENCED:
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            return False
        raise BrokerResponseError(code, error_name(code), f"heartbeat in group {self.group}")
