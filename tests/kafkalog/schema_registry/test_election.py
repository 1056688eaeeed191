"""The primary's choice, as Confluent's registry makes it: among the eligible members the one that
is primary already (sticky), else the smallest URL; one URL twice: no primary. The identities are
Confluent's JSON, so its registries and these may share a group."""

from __future__ import annotations

import json
import time

from kafkalog.schema_registry.election import DUPLICATE_URLS, GroupElection, Identity, choose


def test_identity_is_confluents_json() -> None:
    identity = Identity("10.0.0.1", 8081, True, "http", leader=False)
    assert identity.encode() == (
        b'{"version":1,"host":"10.0.0.1","port":8081,"master_eligibility":true,"scheme":"http","leader":false}'
    )
    assert Identity.decode(identity.encode()) == identity
    assert identity.url == "http://10.0.0.1:8081"
    confluent = b'{"version":1,"host":"sr-2","port":8081,"master_eligibility":true,"scheme":"https"}'
    assert Identity.decode(confluent) == Identity("sr-2", 8081, True, "https")
    for bad in (
        b"",
        b"{}",
        b"[]",
        b'{"host":"h","port":"x"}',
        b'{"host":"h","port":0}',
        b'{"host":"h","port":1,"scheme":"ftp"}',
    ):
        assert Identity.decode(bad) is None, bad


def test_the_smallest_eligible_url_is_chosen_unless_a_primary_stays() -> None:
    a = Identity("a", 8081)
    b = Identity("b", 8081)
    c = Identity("c", 8081, master_eligibility=False)
    chosen = choose([("m-b", b), ("m-a", a), ("m-c", c), ("m-x", None)])
    assert chosen["master"] == "m-a" and chosen["error"] == 0
    assert chosen["master_identity"] == json.loads(a.encode())
    sticky = choose([("m-a", a), ("m-b", Identity("b", 8081, leader=True))])
    assert sticky["master"] == "m-b", "the primary stays primary when a smaller URL joins"
    assert choose([("m-c", c)]) == {"version": 1, "error": 0, "master": None, "master_identity": None}
    twice = choose([("m-a", a), ("m-a2", Identity("a", 8081))])
    assert (twice["error"], twice["master"]) == (DUPLICATE_URLS, None)


def test_hostile_metadata_is_no_identity() -> None:
    """Any client can join the group with any metadata: none of it may raise out of the decoder (the
    group leader's thread decodes every member's)."""
    for hostile in (
        b'{"host":"a","port":Infinity}',  # OverflowError in int()
        b'{"host":"a","port":1e400}',
        b'{"host":"a","port":-Infinity}',
        b'{"host":"a","port":NaN}',
        b"[" * 4096,  # RecursionError, under the metadata cap
        b'{"host":"a","port":1,"scheme":' + b"[" * 4000,
    ):
        assert Identity.decode(hostile) is None, hostile[:40]


def _election() -> GroupElection:
    # nothing connects before start(): the bootstrap is never dialled here
    return GroupElection("127.0.0.1:1", Identity("127.0.0.1", 8081, True, "http"), session_timeout_s=0.3)


def test_a_hostile_assignment_names_no_primary() -> None:
    """The group's leader is whichever member the coordinator picked: its assignment is untrusted."""
    election = _election()
    good = choose([("m-1", Identity("10.0.0.1", 8081, True, "http"))])
    election._assigned(json.dumps(good).encode())
    assert election.primary_url() == "http://10.0.0.1:8081"
    for hostile in (
        b'{"master":"m-2","master_identity":{"host":"evil","port":Infinity}}',
        b'{"master":"m-2","master_identity":{"host":"evil","port":1e400}}',
        b"[" * 4096,
        b'{"master":"m-2","master_identity":' + b"[" * 4000,
        b"[1]",
        b'"text"',
    ):
        election._assigned(hostile)
        assert election.primary_url() is None, hostile[:40]
        election._assigned(json.dumps(good).encode())


def test_the_member_survives_an_unexpected_failure_and_forgets_the_primary() -> None:
    election = _election()
    election._assigned(json.dumps(choose([("m-1", Identity("10.0.0.1", 8081, True, "http"))])).encode())
    attempts: list[int] = []

    def failing_join() -> bool:
        attempts.append(1)
        if len(attempts) >= 3:
            election._closed.set()
        raise RecursionError("maximum recursion depth exceeded")

    election._join_and_sync = failing_join  # type: ignore[method-assign]
    election._run()  # returns once closed: the failures were logged and retried, not raised
    assert len(attempts) == 3
    assert election.primary_url() is None
    assert not election.is_primary()


def test_the_term_names_the_generation_of_the_assignment_that_made_this_member_primary() -> None:
    election = GroupElection("127.0.0.1:1", Identity("127.0.0.1", 8081, True, "http"), session_timeout_s=30)
    assert election.term() is None
    election.member_id, election.generation_id = "m-1", 4
    election._acknowledged_at = time.monotonic()
    election._assigned(json.dumps(choose([("m-1", Identity("10.0.0.1", 8081, True, "http"))])).encode())
    assert election.term() == (4, "m-1")
    election.generation_id = 5  # joined again: the term moves only with the assignment of the new generation
    assert election.term() == (4, "m-1")
    election._assigned(json.dumps(choose([("m-1", Identity("10.0.0.1", 8081, True, "http"))])).encode())
    assert election.term() == (5, "m-1")
    election._assigned(json.dumps(choose([("m-2", Identity("10.0.0.2", 8081, True, "http"))])).encode())
    assert election.term() is None, "another member is primary"
    election._assigned(json.dumps(choose([("m-1", Identity("10.0.0.1", 8081, True, "http"))])).encode())
    election._acknowledged_at = time.monotonic() - 60
    assert election.term() is None, "heartbeats unanswered for a session: no longer primary"
