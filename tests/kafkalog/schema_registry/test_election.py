"""The primary's choice, as Confluent's registry makes it: among the eligible members the one that
is primary already (sticky), else the smallest URL; one URL twice: no primary. The identities are
Confluent's JSON, so its registries and these may share a group."""

from __future__ import annotations

import json

from kafkalog.schema_registry.election import DUPLICATE_URLS, Identity, choose


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
