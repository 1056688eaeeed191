"""The schema'd payload decoders (avro, json_schema, connect_json): values as the serializers
write them, decoded into the reader schema's columns; every bad value alone, with its reason.

Avro values are written by fastavro (``schemaless_writer``, logical types on) and framed by
kafkalog.schemas.wire, as Confluent's AvroSerializer frames them; fastavro's own reader, with its
Python objects for logical types, is the reference the columns are compared with."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.schemas.wire import frame
from pipelines.config.pipeline import Decoder, EventTime, KeyDecoder, Registry
from pipelines.executor.decode import ChunkDecoder
from pipelines.executor.payloads import payload_decoder
from pipelines.executor.payloads.avro_values import AvroValues
from pipelines.executor.payloads.connect_json_values import ConnectJsonValues
from pipelines.executor.payloads.json_schema_values import JsonSchemaValues
from pipelines.executor.rows import Message
from pipelines.schemas.columns import declared_connect_schema
from pipelines.schemas.resolved import RunSchemas, SubjectSchemas

pytestmark = pytest.mark.unit

AVSC = Path("order.avsc")
"""A schema file's name: the decoders get its text, never read it."""

UTC = dt.UTC
RICH = {
    "type": "record",
    "name": "Ev",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "n", "type": "int"},
        {"name": "big", "type": "long"},
        {"name": "ok", "type": "boolean"},
        {"name": "x", "type": "double"},
        {"name": "blob", "type": "bytes"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "wide", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 3}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}},
        {"name": "tags", "type": {"type": "map", "values": "long"}},
        {"name": "xs", "type": {"type": "array", "items": ["null", "double"]}},
        {"name": "opt", "type": ["null", "string"], "default": None},
        {"name": "either", "type": ["null", "int", "string"], "default": None},
        {
            "name": "inner",
            "type": {
                "type": "record",
                "name": "Inner",
                "fields": [{"name": "a", "type": "long"}, {"name": "when", "type": ["null", "shop.Kind"]}],
            },
        },
    ],
}
PARSED = fastavro.parse_schema(RICH)

texts = st.text(max_size=8)
stamps = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1)).map(lambda d: d.replace(tzinfo=UTC))
records = st.fixed_dictionaries({
    "id": texts,
    "n": st.integers(-(2**31), 2**31 - 1),
    "big": st.integers(-(2**63), 2**63 - 1),
    "ok": st.booleans(),
    "x": st.floats(allow_nan=False),
    "blob": st.binary(max_size=8),
    "amount": st.decimals(min_value=-(10**9), max_value=10**9, places=2),
    "wide": st.decimals(min_value=-(10**36), max_value=10**36, places=3),
    "ts": stamps.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)),
    "tsu": stamps,
    "local": st.datetimes(dt.datetime(1970, 1, 1), dt.datetime(2200, 1, 1)).map(
        lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)
    ),
    "day": st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)),
    "tm": st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
    "u": st.uuids().map(str),
    "kind": st.sampled_from(["A", "B", "C"]),
    "tags": st.dictionaries(texts, st.integers(-(2**63), 2**63 - 1), max_size=3),
    "xs": st.lists(st.one_of(st.none(), st.floats(allow_nan=False)), max_size=3),
    "opt": st.one_of(st.none(), texts),
    "either": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1), texts),
    "inner": st.fixed_dictionaries({"a": st.integers(0, 9), "when": st.one_of(st.none(), st.just("B"))}),
})  # fmt: skip


def avro(schema: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def subject(reader: Any, writers: dict[int, Any], reader_id: int) -> SubjectSchemas:
    return SubjectSchemas(
        "AVRO", json.dumps(reader), "t-value", 1, reader_id, {i: json.dumps(w) for i, w in writers.items()}
    )


def rows(decoder: Any, values: list[bytes | None]) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    pieces, bad = decoder.parse(values)
    out = [(i, row) for piece in pieces for i, row in zip(piece.indexes, piece.table.to_pylist(), strict=True)]
    for piece in pieces:
        assert piece.table.schema == decoder.schema
    return out, bad


def expected_row(record: dict[str, Any]) -> dict[str, Any]:
    """fastavro's reading of ``record`` as the columns hold it (see the type mapping)."""
    read = fastavro.schemaless_reader(io.BytesIO(avro(RICH, record)), PARSED, None)
    tm: dt.time = read["tm"]
    wide: decimal.Decimal = read["wide"]
    either = read["either"]
    return {
        **read,
        "wide": format(wide, "f"),
        "local": read["local"].replace(tzinfo=UTC),  # its wall-clock time, in UTC
        "tm": ((tm.hour * 60 + tm.minute) * 60 + tm.second) * 1_000_000 + tm.microsecond,
        "u": str(read["u"]),
        "tags": list(read["tags"].items()),
        "either": None
        if either is None
        else {"member0": either, "member1": None}
        if isinstance(either, int)
        else {"member0": None, "member1": either},
    }


@settings(max_examples=60, deadline=None)
@given(st.lists(records, min_size=1, max_size=5))
def test_avro_values_read_as_fastavro_reads_them(batch: list[dict[str, Any]]) -> None:
    decoder = AvroValues(Decoder(format="avro", schema_file=AVSC), subject(RICH, {3: RICH}, 3))
    got, bad = rows(decoder, [frame(3, avro(RICH, r)) for r in batch])
    assert bad == []
    assert [row for _, row in got] == [expected_row(r) for r in batch]


V1 = {
    "type": "record",
    "name": "Ev",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "n", "type": "int"},
        {"name": "gone", "type": "string"},
        {"name": "k", "type": {"type": "enum", "name": "K", "symbols": ["A", "B", "C"]}},
    ],
}
V2 = {
    "type": "record",
    "name": "Ev",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "n", "type": "long"},
        {"name": "added", "type": ["null", "string"], "default": None},
        {"name": "k", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"], "default": "A"}},
    ],
}


def test_values_written_with_older_schemas_are_read_into_the_reader_schema() -> None:
    decoder = AvroValues(Decoder(format="avro", schema_file=AVSC), subject(V2, {1: V1, 2: V2}, 2))
    old = frame(1, avro(V1, {"id": "x", "n": 5, "gone": "g", "k": "C"}))
    new = frame(2, avro(V2, {"id": "y", "n": 2**40, "added": "a", "k": "B"}))
    got, bad = rows(decoder, [old, new])
    assert bad == []
    assert got == [
        (0, {"id": "x", "n": 5, "added": None, "k": "A"}),  # promoted, removed, defaulted, enum default
        (1, {"id": "y", "n": 2**40, "added": "a", "k": "B"}),
    ]
    assert decoder.schema.names == ["id", "n", "added", "k"]


def test_bad_avro_values_each_with_its_reason() -> None:
    decoder = AvroValues(Decoder(format="avro", schema_file=AVSC), subject(V2, {1: V1, 2: V2}, 2))
    good = avro(V2, {"id": "y", "n": 1, "added": None, "k": "B"})
    values: list[bytes | None] = [
        frame(2, good),
        frame(7, good),
        b'{"id": "y"}',
        b"\x00\x00\x00",
        frame(2, good[:-2]),
        frame(2, good + b"\x00\x01"),
        frame(2, good + b"\x00"),
        frame(2, b"\x02y\x02\x00\x09"),  # enum index 9 (zigzag 0x09 = -5): no such symbol
        None,
        frame(2, good),
    ]
    got, bad = rows(decoder, values)
    assert [i for i, _ in got] == [0, 9]
    reasons = dict(bad)
    assert reasons[1] == "unknown schema id 7"
    assert reasons[2] == "wrong magic byte 0x7b"
    assert reasons[3] == "value shorter than 5 bytes (3)"
    assert reasons[4] == "truncated Avro payload"
    assert reasons[5] == "2 bytes left after the record"
    assert reasons[6] == "1 byte left after the record"
    assert reasons[7].startswith("corrupt Avro payload: ")
    assert reasons[8] == "the message has no value (null)"
    assert sorted(reasons) == [1, 2, 3, 4, 5, 6, 7, 8]


def test_a_schema_file_reads_plain_or_framed_values(tmp_path: Any) -> None:
    schemas = SubjectSchemas("AVRO", json.dumps(V2), any_id=True)
    value = avro(V2, {"id": "y", "n": 1, "added": None, "k": "B"})
    plain = AvroValues(Decoder(format="avro", schema_file=tmp_path / "v.avsc"), schemas)
    assert rows(plain, [value])[0] == [(0, {"id": "y", "n": 1, "added": None, "k": "B"})]
    framed = AvroValues(Decoder(format="avro", schema_file=tmp_path / "v.avsc", framed=True), schemas)
    assert rows(framed, [frame(99, value)])[0] == [(0, {"id": "y", "n": 1, "added": None, "k": "B"})]
    assert rows(framed, [value])[1] == [(0, "wrong magic byte 0x02")]


def test_required_avro_fields() -> None:
    decoder = AvroValues(
        Decoder(format="avro", schema_file=AVSC, required=("added",)),
        subject(V2, {2: V2}, 2),
    )
    values = [frame(2, avro(V2, {"id": "a", "n": 1, "added": a, "k": "A"})) for a in ("x", None, "y")]
    got, bad = rows(decoder, values)
    assert [i for i, _ in got] == [0, 2]
    assert bad == [(1, "required field 'added' is missing or null")]


def test_a_record_a_column_cannot_hold_is_bad_alone() -> None:
    schema = {
        "type": "record",
        "name": "M",
        "fields": [{"name": "m", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 0}}],
    }
    decoder = AvroValues(Decoder(format="avro", schema_file=AVSC), subject(schema, {1: schema}, 1))
    fits = frame(1, avro(schema, {"m": decimal.Decimal(1234)}))
    wide = frame(1, avro({**schema, "fields": [{"name": "m", "type": "bytes"}]}, {"m": (10**6).to_bytes(4, "big")}))
    got, bad = rows(decoder, [fits, wide])
    assert got == [(0, {"m": decimal.Decimal(1234)})]
    assert bad[0][0] == 1 and bad[0][1].startswith("the record cannot be a row: ")


def test_rows_of_avro_values_tombstones_and_an_event_time_from_the_payload() -> None:
    schema = {
        "type": "record",
        "name": "E",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        ],
    }
    schemas = RunSchemas({"t": subject(schema, {4: schema}, 4)})
    decoder = Decoder(format="avro", schema_file=AVSC)
    chunk = ChunkDecoder(decoder, EventTime(field="at"), "t", 0, schemas)
    at = dt.datetime(2026, 11, 28, 13, 5, tzinfo=UTC)
    messages = [
        Message(0, 1000, 0, b"k", frame(4, avro(schema, {"id": "a", "at": at}))),
        Message(1, 2000, 0, b"k", None),
        Message(2, 3000, 0, None, b"junk"),
    ]
    table, bad = chunk.decode(messages, broker=1)
    assert table.column("id").to_pylist() == ["a", None]
    assert table.column("event_time").to_pylist()[0] == at
    assert (table.column("dt")[0].as_py(), table.column("hour")[0].as_py()) == ("2026-11-28", "13")
    assert table.column("tombstone").to_pylist() == [False, True]
    assert [(b.offset, b.reason) for b in bad] == [(2, "wrong magic byte 0x6a")]


def test_payload_decoder_needs_the_runs_schemas_for_a_schemad_format() -> None:
    from pipelines.errors import PayloadSchemaError

    with pytest.raises(PayloadSchemaError, match="needs the run's schemas"):
        payload_decoder(Decoder(format="avro", schema_file=AVSC))


JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "n": {"type": "integer"},
        "at": {"type": "string", "format": "date-time"},
        "inner": {"type": "object", "properties": {"a": {"type": "number"}}},
    },
    "additionalProperties": False,
}


def test_json_schema_values() -> None:
    schemas = SubjectSchemas("JSON", json.dumps(JSON_SCHEMA), "t-value", 1, 5, {5: json.dumps(JSON_SCHEMA)})
    decoder = JsonSchemaValues(Decoder(format="json_schema", registry=Registry(urls=("http://sr:8081",))), schemas)
    good = frame(5, b'{"id": "a", "n": 3, "at": "2026-11-28T10:00:00Z", "inner": {"a": 1.5}}')
    values: list[bytes | None] = [good, frame(6, b'{"id": "b"}'), b'{"id": "c"}', frame(5, b"{nope"), good]
    got, bad = rows(decoder, values)
    at = dt.datetime(2026, 11, 28, 10, tzinfo=UTC)
    assert got == [
        (0, {"id": "a", "n": 3, "at": at, "inner": {"a": 1.5}}),
        (4, {"id": "a", "n": 3, "at": at, "inner": {"a": 1.5}}),
    ]
    assert [i for i, _ in bad] == [1, 2, 3]
    assert bad[0][1] == "unknown schema id 6" and bad[1][1] == "wrong magic byte 0x7b"


CONNECT_SCHEMA = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": True, "field": "n"},
        {
            "type": "bytes",
            "optional": False,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "2"},
            "field": "amount",
        },
        {"type": "int32", "optional": False, "name": "org.apache.kafka.connect.data.Date", "version": 1, "field": "d"},
        {
            "type": "int64",
            "optional": False,
            "name": "org.apache.kafka.connect.data.Timestamp",
            "version": 1,
            "field": "ts",
        },
        {"type": "int32", "optional": False, "name": "org.apache.kafka.connect.data.Time", "version": 1, "field": "t"},
        {"type": "array", "items": {"type": "double", "optional": False}, "optional": True, "field": "arr"},
    ],
    "optional": False,
    "name": "demo.Ev",
}
# JsonConverter (schemas.enable=true) output for this schema, as Connect 4.1 wrote it
ENVELOPE = (
    '{"schema":' + json.dumps(CONNECT_SCHEMA, separators=(",", ":")) + ',"payload":{"id":"a","n":5,"amount":"BNI=",'
    '"d":19000,"ts":1700000000123,"t":3723000,"arr":[1.5]}}'
).encode()


def test_connect_json_envelopes() -> None:
    schemas = SubjectSchemas("CONNECT", json.dumps(CONNECT_SCHEMA))
    decoder = ConnectJsonValues(Decoder(format="connect_json", schema_file=Path("s.json")), schemas)
    bad_base64 = ENVELOPE.replace(b'"BNI="', b'"B!I="')
    no_payload = b'{"schema": null, "payload": null}'
    got, bad = rows(decoder, [ENVELOPE, bad_base64, no_payload, b"[1]", ENVELOPE])
    expected = {
        "id": "a",
        "n": 5,
        "amount": decimal.Decimal("12.34"),  # 0x04d2 = 1234, scale 2
        "d": dt.date(2022, 1, 8),
        "ts": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC),
        "t": 3_723_000_000,
        "arr": [1.5],
    }
    assert got == [(0, expected), (4, expected)]
    assert [i for i, _ in bad] == [1, 2, 3]
    assert "not base64" in bad[0][1]
    assert bad[1][1] == "the envelope has no payload (null or missing)"


def test_connect_json_with_declared_columns() -> None:
    declared = {"id": "string", "at": "timestamp", "blob": "binary"}
    schemas = SubjectSchemas("CONNECT", json.dumps(declared_connect_schema(declared)))
    decoder = ConnectJsonValues(Decoder(format="connect_json", schema=declared), schemas)
    value = {"schema": None, "payload": {"id": "x", "at": 1_000, "blob": base64.b64encode(b"\x00\x01").decode()}}
    got, bad = rows(decoder, [json.dumps(value).encode()])
    assert bad == []
    assert got == [(0, {"id": "x", "at": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), "blob": b"\x00\x01"})]


def test_columns_types_match_the_row_schema() -> None:
    schemas = RunSchemas({"t": subject(RICH, {1: RICH}, 1)})
    decoder = Decoder(format="avro", schema_file=AVSC)
    chunk = ChunkDecoder(decoder, EventTime(), "t", 0, schemas)
    assert isinstance(chunk.values, AvroValues)
    assert chunk.schema.field("amount").type == pa.decimal128(12, 2)


def test_string_keys_decoded_beside_their_bytes_a_bad_one_makes_its_message_bad() -> None:
    decoder = Decoder(format="raw", key_decoder=KeyDecoder(format="string"))
    chunk = ChunkDecoder(decoder, EventTime(), "t", 0)
    messages = [
        Message(0, 1000, 0, b"user-1", b"v"),
        Message(1, 1000, 0, None, b"v"),
        Message(2, 1000, 0, b"\xff\xfe", b"v"),
        Message(3, 1000, 0, b"user-3", None),  # a tombstone keeps its key: it deletes that key
    ]
    table, bad = chunk.decode(messages, broker=1)
    assert table.column("offset").to_pylist() == [0, 1, 3]
    assert table.column("key_decoded").to_pylist() == ["user-1", None, "user-3"]
    assert table.column("key").to_pylist() == [b"user-1", None, b"user-3"]
    assert [(b.offset, b.reason) for b in bad] == [(2, "key: not UTF-8 text (invalid start byte at byte 0)")]
    assert table.schema.names.index("key_decoded") == table.schema.names.index("tombstone") + 1


def test_json_and_avro_keys() -> None:
    decoder = Decoder(format="raw", key_decoder=KeyDecoder(format="json", schema={"id": "long", "region": "string"}))
    table, bad = ChunkDecoder(decoder, EventTime(), "t", 0).decode(
        [Message(0, 1, 0, b'{"id": 7, "region": "eu"}', b"v"), Message(1, 1, 0, b"[]", b"v")], broker=1
    )
    assert table.column("key_decoded").to_pylist() == [{"id": 7, "region": "eu"}]
    assert [(b.offset, b.reason) for b in bad] == [(1, "key: the value is not a JSON object")]

    key_schema = {"type": "record", "name": "K", "fields": [{"name": "id", "type": "long"}]}
    registry = Registry(urls=("http://sr:8081",))
    avro_keys = Decoder(format="avro", registry=registry, key_decoder=KeyDecoder(format="avro"))
    schemas = RunSchemas({"t": subject(V2, {2: V2}, 2)}, {"t": subject(key_schema, {9: key_schema}, 9)})
    value = frame(2, avro(V2, {"id": "y", "n": 1, "added": None, "k": "B"}))
    table, bad = ChunkDecoder(avro_keys, EventTime(), "t", 0, schemas).decode(
        [Message(0, 1, 0, frame(9, avro(key_schema, {"id": 5})), value), Message(1, 1, 0, frame(8, b"\x02"), value)],
        broker=1,
    )
    assert table.column("key_decoded").to_pylist() == [{"id": 5}]
    assert table.column("id").to_pylist() == ["y"]
    assert [(b.offset, b.reason) for b in bad] == [(1, "key: unknown schema id 8")]


NESTED = {
    "type": "record",
    "name": "R",
    "fields": [
        {"name": "m", "type": ["null", {"type": "map", "values": {"type": "long", "logicalType": "timestamp-millis"}}]},
        {"name": "days", "type": ["null", {"type": "array", "items": {"type": "int", "logicalType": "date"}}]},
        {
            "name": "r",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "In",
                    "fields": [
                        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1}}
                    ],
                },
            ],
        },
        {
            "name": "u",
            "type": [
                "null",
                "int",
                {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]},
                {"type": "record", "name": "B", "fields": [{"name": "x", "type": "int"}]},
                {"type": "enum", "name": "E", "symbols": ["P"]},
            ],
        },
    ],
}


def test_logical_types_inside_nested_types_and_unions_of_several_records() -> None:
    decoder = AvroValues(Decoder(format="avro", schema_file=AVSC), subject(NESTED, {1: NESTED}, 1))
    day = dt.datetime(2020, 1, 1, tzinfo=UTC)
    written = [
        {"m": None, "days": None, "r": None, "u": None},
        {"m": {"a": day}, "days": [dt.date(2020, 1, 2)], "r": {"d": decimal.Decimal("12.5")}, "u": ("B", {"x": 3})},
        {"m": {}, "days": [], "r": None, "u": 5},
        {"m": None, "days": None, "r": None, "u": ("A", {"x": 1})},
        {"m": None, "days": None, "r": None, "u": "P"},
    ]
    got, bad = rows(decoder, [frame(1, avro(NESTED, r)) for r in written])
    assert bad == []
    members = [None if r["u"] is None else {k: v for k, v in r["u"].items() if v is not None} for _, r in got]
    assert members == [None, {"member2": {"x": 3}}, {"member0": 5}, {"member1": {"x": 1}}, {"member3": "P"}]
    assert got[1][1]["m"] == [("a", day)] and got[1][1]["days"] == [dt.date(2020, 1, 2)]
    assert got[1][1]["r"] == {"d": decimal.Decimal("12.5")} and got[0][1]["m"] is None and got[2][1]["m"] == []


def test_a_schema_id_carried_in_a_header_is_refused_for_what_it_is() -> None:
    schemas = RunSchemas({"t": subject(V2, {2: V2}, 2)})
    chunk = ChunkDecoder(Decoder(format="avro", schema_file=AVSC), EventTime(), "t", 0, schemas)
    value = avro(V2, {"id": "y", "n": 1, "added": None, "k": "B"})
    headers = (("__value_schema_id", b"\x01" + bytes(16)),)
    _, bad = chunk.decode([Message(0, 1, 0, None, value, headers), Message(1, 1, 0, None, value)], broker=1)
    assert [(b.offset, b.reason) for b in bad] == [
        (
            0,
            "the schema id is in the __value_schema_id header, not before the value: not supported "
            "(wrong magic byte 0x02)",
        ),
        (1, "wrong magic byte 0x02"),
    ]


def test_the_spark_source_declares_the_columns_of_the_schemas_the_driver_sent() -> None:
    from pipelines.executor.source import KafkalogSource, schemas_of

    schemas = RunSchemas({"t": subject(V2, {1: V1, 2: V2}, 2)})
    decoder = Decoder(format="avro", registry=Registry(urls=("http://sr:8081",), username="u", password="p"))
    options = {"spec": json.dumps({"decoder": decoder.settings()}), "schemas": schemas.to_json()}
    assert schemas_of(options) == schemas
    ddl = KafkalogSource(options).schema()
    assert "`tombstone` BOOLEAN, `id` STRING, `n` BIGINT, `added` STRING, `k` STRING, `dt` STRING" in ddl
    assert '"p"' not in options["spec"] and '"u"' not in options["spec"]  # no task needs the credentials


def test_connect_logical_types_inside_structs_and_arrays() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {
                "type": "struct",
                "optional": True,
                "field": "inner",
                "fields": [
                    {"type": "bytes", "optional": True, "field": "b"},
                    {
                        "type": "int64",
                        "name": "org.apache.kafka.connect.data.Timestamp",
                        "optional": True,
                        "field": "at",
                    },
                ],
            },
            {
                "type": "array",
                "optional": True,
                "field": "prices",
                "items": {
                    "type": "bytes",
                    "name": "org.apache.kafka.connect.data.Decimal",
                    "parameters": {"scale": "1", "connect.decimal.precision": "6"},
                },
            },
        ],
    }
    decoder = ConnectJsonValues(
        Decoder(format="connect_json", schema_file=Path("s.json")), SubjectSchemas("CONNECT", json.dumps(schema))
    )
    assert str(decoder.schema.field("prices").type) == "list<item: decimal128(6, 1)>"
    envelope = {"payload": {"inner": {"b": "AAE=", "at": 86_400_000}, "prices": ["AHs=", None]}}  # 0x007b = 123
    nulls = {"payload": {"inner": None, "prices": None}}
    got, bad = rows(decoder, [json.dumps(envelope).encode(), json.dumps(nulls).encode()])
    assert bad == []
    assert got == [
        (
            0,
            {
                "inner": {"b": b"\x00\x01", "at": dt.datetime(1970, 1, 2, tzinfo=UTC)},
                "prices": [decimal.Decimal("12.3"), None],
            },
        ),
        (1, {"inner": None, "prices": None}),
    ]


def test_decimals_of_38_digits_load_exactly() -> None:
    """Not rounded to Python's default 28 significant digits on the way to decimal128."""
    schema = {
        "type": "record",
        "name": "W",
        "fields": [{"name": "m", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 2}}],
    }
    decoder = AvroValues(Decoder(format="avro", schema_file=AVSC), subject(schema, {1: schema}, 1))
    values = [decimal.Decimal("123456789012345678901234567890123456.78"), decimal.Decimal("-0.01")]
    with decimal.localcontext(decimal.Context(prec=60)):
        got, bad = rows(decoder, [frame(1, avro(schema, {"m": v})) for v in values])
    assert bad == []
    assert [row["m"] for _, row in got] == values


def test_connect_maps_with_string_keys_and_with_other_keys() -> None:
    decimal_values = {
        "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "1"},
        "optional": True,
    }  # fmt: skip
    schema = {
        "type": "struct",
        "fields": [
            {"type": "map", "optional": True, "field": "tags",
             "keys": {"type": "string"}, "values": {"type": "int32", "optional": True}},
            {"type": "map", "optional": True, "field": "by_id", "keys": {"type": "int64"}, "values": decimal_values},
            {"type": "array", "optional": True, "field": "nested",
             "items": {"type": "map", "keys": {"type": "string"}, "values": {"type": "string"}}},
        ],
    }  # fmt: skip
    decoder = ConnectJsonValues(
        Decoder(format="connect_json", schema_file=Path("s.json")), SubjectSchemas("CONNECT", json.dumps(schema))
    )
    assert str(decoder.schema.field("by_id").type) == "map<int64, decimal128(38, 1)>"
    good = {"payload": {"tags": {"a": 1, "b": None}, "by_id": [[7, "AHs="]], "nested": [{"x": "y"}, {}]}}
    empty = {"payload": {"tags": {}, "by_id": None, "nested": None}}
    not_int = {"payload": {"tags": {"a": 1.5}}}
    null_key = {"payload": {"by_id": [[None, "AHs="]]}}
    values = [json.dumps(v).encode() for v in (good, not_int, empty, null_key)]
    got, bad = rows(decoder, [*values, b'{"payload": {"tags": {"a": "x"}}}'])
    assert got == [
        (0, {"tags": [("a", 1), ("b", None)], "by_id": [(7, decimal.Decimal("12.3"))], "nested": [[("x", "y")], []]}),
        (2, {"tags": [], "by_id": None, "nested": None}),
    ]
    assert [i for i, _ in bad] == [1, 3, 4]
    assert "a map key is null" in bad[1][1]
