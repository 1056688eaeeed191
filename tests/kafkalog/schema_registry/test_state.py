"""The state the topic's records add up to: a registry that reads the records again (restarted, or
another process on the same topic) holds the same state, before and after the topic is compacted;
records that contradict the state are skipped, never fatal."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.schema_registry import records
from kafkalog.schema_registry.api import Api, Request
from kafkalog.schema_registry.registry import Registry, Rules
from kafkalog.schema_registry.state import RegistryState
from kafkalog.schema_registry.store import MemoryStore, Write
from kafkalog.schemas.compatibility import CompatibilityLevel

SCHEMAS = [
    json.dumps({"type": "record", "name": "Ev", "fields": [{"name": f"f{i}", "type": "int", "default": 0}]})
    for i in range(4)
]
SUBJECTS = ["a", "b", "c"]

operation = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(SUBJECTS), st.sampled_from(SCHEMAS)),
    st.tuples(
        st.just("delete_version"), st.sampled_from(SUBJECTS), st.sampled_from(["1", "2", "3", "latest"]), st.booleans()
    ),
    st.tuples(st.just("delete_subject"), st.sampled_from(SUBJECTS), st.booleans()),
    st.tuples(st.just("config"), st.sampled_from([*SUBJECTS, None]), st.sampled_from(["NONE", "FULL"])),
    st.tuples(st.just("mode"), st.sampled_from(SUBJECTS), st.sampled_from(["READONLY", "READWRITE"])),
)


def run(api: Api, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "register":
        request = Request.of("POST", f"/subjects/{op[1]}/versions", json.dumps({"schema": op[2]}).encode())
    elif kind == "delete_version":
        request = Request.of("DELETE", f"/subjects/{op[1]}/versions/{op[2]}?permanent={op[3]}")
    elif kind == "delete_subject":
        request = Request.of("DELETE", f"/subjects/{op[1]}?permanent={op[2]}")
    elif kind == "config":
        path = "/config" if op[1] is None else f"/config/{op[1]}"
        request = Request.of("PUT", path, json.dumps({"compatibility": op[2]}).encode())
    else:
        request = Request.of("PUT", f"/mode/{op[1]}", json.dumps({"mode": op[2]}).encode())
    api.handle(request)


def replayed(log: list[Write]) -> RegistryState:
    state = RegistryState()
    for offset, (key, value) in enumerate(log):
        state.apply(key, value, offset)
    return state


def compacted(log: list[Write]) -> list[Write]:
    """What a compacted topic keeps of ``log`` once its tombstones went: each key's last record."""
    last = {key: offset for offset, (key, _) in enumerate(log)}
    return [(key, value) for offset, (key, value) in enumerate(log) if last[key] == offset and value is not None]


def visible(state: RegistryState) -> tuple[Any, ...]:
    return (state.versions, state.schemas, state.configs, state.modes)


@settings(max_examples=150, deadline=None)
@given(st.lists(operation, max_size=25))
def test_the_records_read_again_give_the_same_state_before_and_after_compaction(ops: list[tuple[Any, ...]]) -> None:
    store = MemoryStore()
    api = Api(Registry(store, Rules(default_compatibility=CompatibilityLevel.NONE)))
    for op in ops:
        run(api, op)
    again = replayed(store.log)
    assert visible(again) == visible(store.state)
    assert (again.ids, again.max_id) == (store.state.ids, store.state.max_id)
    assert visible(replayed(compacted(store.log))) == visible(store.state)


def test_contradicting_and_unreadable_records_are_skipped() -> None:
    state = RegistryState()
    first = records.SchemaValue("s", 1, 1, '"int"')
    state.apply(records.schema_key("s", 1), first.encode(), 0)
    other_under_id_1 = records.SchemaValue("t", 1, 1, '"string"')
    state.apply(records.schema_key("t", 1), other_under_id_1.encode(), 1)
    misplaced = records.SchemaValue("s", 2, 2, '"long"')
    state.apply(records.schema_key("s", 3), misplaced.encode(), 2)
    state.apply(b"garbage", b"more garbage", 3)
    state.apply(records.noop_key(), None, 4)
    assert state.skipped == 3
    assert state.versions == {"s": {1: first}}
    assert state.schemas[1].text == '"int"'
    assert state.applied == 5
    state.apply(records.schema_key("s", 1), None, 2)  # an offset applied already: ignored
    assert state.versions == {"s": {1: first}}


def test_a_soft_subject_delete_covers_the_versions_it_names_only() -> None:
    state = RegistryState()
    for version in (1, 2):
        state.apply(
            records.schema_key("s", version),
            records.SchemaValue("s", version, version, f'"v{version}"').encode(),
            version,
        )
    state.apply(records.delete_subject_key("s"), records.delete_subject_value("s", 1), 3)
    assert [v.deleted for v in state.every("s")] == [True, False]
    assert [v.version for v in state.live("s")] == [2]


def test_an_id_past_a_java_int_in_the_topic_stops_no_registration() -> None:
    """Anyone allowed to produce to the topic could write one: read as a record, it would leave no id
    for every later schema."""
    store = MemoryStore()
    garbage = json.dumps({"subject": "x", "version": 1, "id": 2**31, "schema": '"int"'}).encode()
    store.write([(records.schema_key("x", 1), garbage)])
    store.write([(records.schema_key("x", 2**40), garbage)])
    assert store.state.skipped == 2
    assert store.state.max_id == 0
    answer = Api(Registry(store, Rules())).handle(
        Request.of("POST", "/subjects/s/versions", json.dumps({"schema": SCHEMAS[0]}).encode())
    )
    assert (answer.status, json.loads(answer.body)) == (200, {"id": 1})


def test_a_version_keeps_its_schema_id_until_its_tombstone() -> None:
    """Two primaries for a moment both write version 2 with the next id: the first record stays, at
    every reader; a soft delete's rewrite (same id, same schema) still applies."""
    state = RegistryState()
    first = records.SchemaValue("s", 2, 7, '"int"')
    state.apply(records.schema_key("s", 2), first.encode(), 0)
    state.apply(records.schema_key("s", 2), records.SchemaValue("s", 2, 7, '"string"').encode(), 1)
    state.apply(records.schema_key("s", 2), records.SchemaValue("s", 2, 8, '"int"').encode(), 2)
    assert state.skipped == 2
    assert state.versions == {"s": {2: first}} and state.schemas[7].text == '"int"'
    soft = records.SchemaValue("s", 2, 7, '"int"', deleted=True)
    state.apply(records.schema_key("s", 2), soft.encode(), 3)
    assert state.versions == {"s": {2: soft}}
    state.apply(records.schema_key("s", 2), None, 4)
    again = records.SchemaValue("s", 2, 9, '"long"')
    state.apply(records.schema_key("s", 2), again.encode(), 5)
    assert state.versions == {"s": {2: again}} and state.skipped == 2


def test_an_id_freed_by_hard_deletes_never_names_another_schema() -> None:
    state = RegistryState()
    state.apply(records.schema_key("s", 1), records.SchemaValue("s", 1, 1, '"int"').encode(), 0)
    state.apply(records.schema_key("s", 1), None, 1)
    state.apply(records.schema_key("t", 1), records.SchemaValue("t", 1, 1, '"string"').encode(), 2)
    assert state.skipped == 1 and 1 not in state.schemas
    state.apply(records.schema_key("u", 1), records.SchemaValue("u", 1, 1, '"int"').encode(), 3)
    assert state.schemas[1].text == '"int"', "the same schema may take its id again"
