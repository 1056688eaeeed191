"""The broker's committed-offsets files: commits, deletions of some partitions or of a whole group,
and what a restart (a new store over the same directory) finds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.server.cluster.offsets import OffsetStore

pytestmark = pytest.mark.unit


def test_deleting_some_offsets_then_all_of_a_group_is_durable(tmp_path: Path) -> None:
    store = OffsetStore(tmp_path)
    store.commit("g", {("a", 0): (5, None), ("a", 1): (7, "m"), ("b", 0): (1, "")})
    store.commit("other", {("a", 0): (9, None)})
    store.delete("g", [("a", 1), ("b", 0), ("never", 3)])
    assert store.committed_partitions("g") == [("a", 0)]
    reopened = OffsetStore(tmp_path)
    assert reopened.committed_partitions("g") == [("a", 0)] and reopened.fetch("g", "a", 0) == (5, None)
    reopened.delete("g")
    assert reopened.groups() == ["other"]
    assert OffsetStore(tmp_path).groups() == ["other"]  # the group's file is gone
    assert len(list((tmp_path / ".consumer_offsets").glob("*.json"))) == 1
