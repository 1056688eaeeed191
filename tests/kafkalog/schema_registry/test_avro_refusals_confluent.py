"""``kafkalog registry``'s Avro compatibility answers compared live with Confluent's own checker
(AvroCompatibilityChecker 7.5.3 from Maven Central, in one JVM: tests/support/java/AvroCompatibility.java):
for chosen and generated (new, previous) schema pairs, ``POST /compatibility/subjects/{s}/versions/latest``
with ``verbose=true`` answers at BACKWARD, FORWARD and FULL exactly as Confluent's registry would:
the same verdict and the same messages, word for word (types, paths, the old schema's text and version).

One difference is by design (kafkalog/schemas/avro_compat.py): a branch of a writer union read by a
reader of another type is reported at its index (``/fields/0/type/1``, Avro 1.12's path, as
Confluent's 8.x registries say), where this 7.5.3 checker (Avro 1.11) re-roots it (``/``, or the path
inside the branch). :func:`same_messages` accepts exactly that: our path is Confluent's with a branch
index (and what leads to it) in front; everything else is compared as it is.

The pairs come from the generator of the offline checks (tests/kafkalog/schemas/test_avro_compat.py),
drawn with a fixed seed: every run compares the same pairs, and a failure lists every pair that differs."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.kafkalog.schemas.test_avro_compat import _types, _valid
from tests.support.kafkalog import BrokerProcess
from tests.support.registry_java import LEVELS, ConfluentAvroChecker
from tests.support.schema_registry import RegistryProcess, call

pytestmark = pytest.mark.integration

GENERATED = 200


def _record(*fields: dict[str, Any], name: str = "Ev", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "demo", "fields": list(fields), **extra}


_ID = {"name": "id", "type": "string"}
_ENUM = {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}
CHOSEN: list[tuple[Any, Any]] = [
    # a type changed and a field added without a default (Confluent's own example's shape)
    (_record(_ID, {"name": "n", "type": "string"}, {"name": "req", "type": "string"}),
     _record(_ID, {"name": "n", "type": "int"})),
    # a field added with a default, then removed
    (_record(_ID, {"name": "note", "type": ["null", "string"], "default": None}), _record(_ID)),
    (_record(_ID), _record(_ID, {"name": "note", "type": ["null", "string"], "default": None})),
    # promotions, one way only
    (_record({"name": "n", "type": "long"}), _record({"name": "n", "type": "int"})),
    (_record({"name": "n", "type": "double"}), _record({"name": "n", "type": "float"})),
    (_record({"name": "s", "type": "bytes"}), _record({"name": "s", "type": "string"})),
    # enums: a symbol added, a symbol removed, a default that covers it
    (_record({"name": "k", "type": {**_ENUM, "symbols": ["A", "B", "C"]}}), _record({"name": "k", "type": _ENUM})),
    (_record({"name": "k", "type": {**_ENUM, "symbols": ["A"]}}), _record({"name": "k", "type": _ENUM})),
    (_record({"name": "k", "type": {**_ENUM, "symbols": ["A"], "default": "A"}}),
     _record({"name": "k", "type": _ENUM})),
    # fixed: size and name
    (_record({"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}}),
     _record({"name": "f", "type": {"type": "fixed", "name": "F", "size": 8}})),
    (_record({"name": "f", "type": {"type": "fixed", "name": "G", "size": 4}}),
     _record({"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}})),
    # a record renamed, and renamed with the old name as an alias
    (_record(_ID, name="Other"), _record(_ID)),
    (_record(_ID, name="Other", aliases=["demo.Ev"]), _record(_ID)),
    # a field renamed with an alias
    (_record({"name": "key", "type": "string", "aliases": ["id"]}), _record(_ID)),
    # unions: a branch dropped, a branch added, a union to its branch
    (_record({"name": "u", "type": ["null", "int"]}), _record({"name": "u", "type": ["null", "int", "string"]})),
    (_record({"name": "u", "type": ["null", "int", "string"]}), _record({"name": "u", "type": ["null", "int"]})),
    (_record({"name": "u", "type": "int"}), _record({"name": "u", "type": ["null", "int"]})),
    # nested: a field without a default added inside an array's records and a map's values
    (_record({"name": "xs", "type": {"type": "array", "items": _record({"name": "a", "type": "int"},
                                                                         {"name": "b", "type": "int"}, name="X")}}),
     _record({"name": "xs", "type": {"type": "array", "items": _record({"name": "a", "type": "int"}, name="X")}})),
    (_record({"name": "m", "type": {"type": "map", "values": "long"}}),
     _record({"name": "m", "type": {"type": "map", "values": "string"}})),
    # not records at all
    ("long", "int"),
    ({"type": "array", "items": "string"}, {"type": "map", "values": "string"}),
]  # fmt: skip


@pytest.fixture(scope="module")
def registry(kafkalog_shared: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    name = uuid.uuid4().hex[:8]
    settings = {"bootstrap": kafkalog_shared.bootstrap, "topic": f"_schemas_{name}", "group": f"registry-{name}"}
    with RegistryProcess(tmp_path_factory.mktemp("registry"), "registry", **settings) as running:
        yield running


@pytest.fixture(scope="module")
def confluent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConfluentAvroChecker]:
    with ConfluentAvroChecker(tmp_path_factory.mktemp("checker")) as checker:
        yield checker


def _text(schema: Any) -> str:
    return json.dumps(schema, separators=(",", ":"))


_PATH = re.compile(r"path '([^']*)'")


def same_messages(confluent: list[str], ours: list[str]) -> bool:
    """Equal, or equal but for writer-union branch paths (see the module doc)."""
    if len(confluent) != len(ours):
        return False
    for theirs, mine in zip(confluent, ours, strict=True):
        if theirs == mine:
            continue
        their_paths, my_paths = _PATH.findall(theirs), _PATH.findall(mine)
        if _PATH.sub("", theirs) != _PATH.sub("", mine) or len(their_paths) != len(my_paths):
            return False
        for their_path, my_path in zip(their_paths, my_paths, strict=True):
            inside = "" if their_path == "/" else their_path
            if not re.fullmatch(rf"(/[^/]+)*/\d+{re.escape(inside)}", my_path):
                return False
    return True


def differences(
    registry: RegistryProcess, confluent: ConfluentAvroChecker, pairs: list[tuple[Any, Any]], prefix: str
) -> tuple[list[str], Counter[str]]:
    """Each pair's subject gets the previous schema as version 1; then, per level (set globally),
    every pair's new schema is tested against it. What differs from Confluent's checker, one line
    each; and how many answers of each kind (``LEVEL compatible``, ``LEVEL refused``) were compared."""
    found: list[str] = []
    compared: Counter[str] = Counter()
    subjects: list[str | None] = []
    wanted: list[dict[str, list[str]]] = []
    for number, (new, old) in enumerate(pairs):
        new_text, old_text = _text(new), _text(old)
        verdicts = confluent.verdicts(new_text, old_text)
        subject = f"{prefix}-{number}"
        status, answer = call(registry.url, "POST", f"/subjects/{subject}/versions", {"schema": old_text})
        if "error" in verdicts or status != 200:
            if ("error" in verdicts) != (status != 200):
                found.append(
                    f"pair {number}: new {_text(new)} old {_text(old)}\n"
                    f"  Confluent: {verdicts}\n  ours registering the old: {status} {answer}"
                )
            subjects.append(None)
        else:
            subjects.append(subject)
        wanted.append(verdicts)
    for level in LEVELS:
        assert call(registry.url, "PUT", "/config", {"compatibility": level})[0] == 200
        for number, ((new, old), checked, verdicts) in enumerate(zip(pairs, subjects, wanted, strict=True)):
            if checked is None:
                continue
            path = f"/compatibility/subjects/{checked}/versions/latest?verbose=true"
            status, answer = call(registry.url, "POST", path, {"schema": _text(new)})
            expected = {"is_compatible": not verdicts[level], "messages": verdicts[level]}
            compared[f"{level} {'refused' if verdicts[level] else 'compatible'}"] += 1
            agree = status == 200 and answer.get("is_compatible") == expected["is_compatible"]
            if not (agree and same_messages(verdicts[level], answer.get("messages", []))):
                found.append(
                    f"pair {number} at {level}: new {_text(new)} old {_text(old)}\n"
                    f"  Confluent: {expected}\n  ours:      {status} {answer}"
                )
    return found, compared


def test_chosen_pairs_are_answered_as_confluents_checker_answers(
    registry: RegistryProcess, confluent: ConfluentAvroChecker
) -> None:
    found, compared = differences(registry, confluent, CHOSEN, "chosen")
    assert not found, "\n".join(found)
    assert sum(compared.values()) == len(LEVELS) * len(CHOSEN)


def generated_pairs(count: int) -> list[tuple[Any, Any]]:
    """``count`` distinct (new, previous) pairs from the offline checks' generator, the same ones every
    run (hypothesis, derandomized, drawing only: the comparison runs once over all of them)."""
    pairs: dict[str, tuple[Any, Any]] = {}

    @settings(
        max_examples=count, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(_types(), _types())
    def draw(new: Any, old: Any) -> None:
        pair = (_valid(new), _valid(old))
        pairs.setdefault(json.dumps(pair), pair)

    draw()
    return list(pairs.values())


def test_generated_pairs_are_answered_as_confluents_checker_answers(
    registry: RegistryProcess, confluent: ConfluentAvroChecker
) -> None:
    pairs = generated_pairs(GENERATED)
    assert len(pairs) >= GENERATED * 3 // 4
    found, compared = differences(registry, confluent, pairs, f"generated-{uuid.uuid4().hex[:6]}")
    assert not found, f"{len(found)} answers differ from Confluent's:\n" + "\n".join(found)
    for level in LEVELS:  # the pairs exercise both answers at every level
        assert compared[f"{level} refused"] >= 40 and compared[f"{level} compatible"] >= 20, compared
