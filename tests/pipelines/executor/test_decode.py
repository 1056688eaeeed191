"""Messages into Arrow rows: decoders, bad records, event time, dt/hour, and chunk independence.

The invariant under test (see pipelines/executor/decode.py and payloads/): a message's fate -- good
row or bad record, and its decoded values -- does not depend on which other messages share its
chunk. A message is good iff Arrow parses it alone into exactly one row with its required fields
present and a valid event time.
The property tests check it by decoding a random mix whole, alone per message, and in random chunks.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.record import Codec, MessageSetBuilder, RecordInput, TimestampType, decode_all, encode_batch
from pipelines.config.pipeline import FIELD_TYPES, METADATA_COLUMNS, CsvOptions, Decoder, EventTime
from pipelines.errors import SpecError
from pipelines.executor.arrow_types import ARROW_TYPES, SPARK_TYPES, TIMESTAMP
from pipelines.executor.decode import ChunkDecoder
from pipelines.executor.event_time import EventTimeResolver
from pipelines.executor.payloads.json_values import JsonValues
from pipelines.executor.payloads.lines import all_plain, suspicious
from pipelines.executor.rows import HEADERS, BadRecord, Message, row_schema, spark_ddl
from pipelines.executor.source import QUARANTINE_DDL, QUARANTINE_SCHEMA, quarantine_batch
from pipelines.executor.splits import Split

REPO = Path(__file__).resolve().parents[3]
BASE = datetime(2026, 1, 1, tzinfo=UTC)
BASE_MS = int(BASE.timestamp() * 1000)  # 2026-01-01T00:00:00Z
TOPIC = "events"
PARTITION = 3
BROKER = 7

ALL_TYPES = {
    "s": "string",
    "l": "long",
    "i": "int",
    "d": "double",
    "f": "float",
    "b": "boolean",
    "t": "timestamp",
    "y": "binary",
}

PROPERTY = settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def msg(offset: int, value: bytes | None, *, ts: int = BASE_MS, key: bytes | None = None) -> Message:
    return Message(offset, ts, 0, key, value)


def json_decoder(schema: dict[str, str], required: Sequence[str] = ()) -> Decoder:
    return Decoder(format="json", schema=schema, required=tuple(required))


def decode(
    decoder: Decoder,
    messages: Sequence[Message | bytes | None],
    event_time: EventTime | None = None,
) -> tuple[pa.Table, list[BadRecord]]:
    """Decode ``messages`` (plain values become messages at offsets 0, 1, ... stamped BASE_MS)."""
    chunk = [m if isinstance(m, Message) else msg(i, m) for i, m in enumerate(messages)]
    table, bad = ChunkDecoder(decoder, event_time or EventTime(), TOPIC, PARTITION).decode(chunk, BROKER)
    assert table.schema == row_schema(decoder)
    # every message ends up in exactly one of the two, good rows in offset order
    good = table.column("offset").to_pylist()
    assert good == sorted(good)
    assert sorted(good + [b.offset for b in bad]) == sorted(m.offset for m in chunk)
    return table, bad


def good_offsets(table: pa.Table) -> list[int]:
    return table.column("offset").to_pylist()


def reasons(bad: list[BadRecord]) -> dict[int, str]:
    return {b.offset: b.reason for b in bad}


def column(table: pa.Table, name: str) -> list[Any]:
    return table.column(name).to_pylist()


# ---------------------------------------------------------------------------------------------
# json: good rows


def test_json_every_field_type_and_metadata_columns() -> None:
    value = json.dumps(
        {
            "s": 'café 😀 "quoted"',
            "l": -9223372036854775808,
            "i": 2147483647,
            "d": 1.5e300,
            "f": 0.25,
            "b": True,
            "t": "2026-03-04T05:06:07.123456+02:00",
            "y": "bytes\u00ff",
            "ignored": {"nested": [1, 2, 3]},
        },
        ensure_ascii=False,
    ).encode()
    stamp = BASE_MS + 3_723_456  # 01:02:03.456
    table, bad = decode(json_decoder(ALL_TYPES), [msg(42, value, ts=stamp, key=b"user-1")])
    assert bad == []
    assert table.num_rows == 1
    row = table.to_pylist()[0]
    assert row == {
        "topic": TOPIC,
        "partition": PARTITION,
        "offset": 42,
        "broker": BROKER,
        "timestamp": utc(2026, 1, 1, 1, 2, 3, 456000),
        "timestamp_type": 0,
        "event_time": utc(2026, 1, 1, 1, 2, 3, 456000),
        "key": b"user-1",
        "headers": [],
        "tombstone": False,
        "s": 'café 😀 "quoted"',
        "l": -9223372036854775808,
        "i": 2147483647,
        "d": 1.5e300,
        "f": 0.25,
        "b": True,
        "t": utc(2026, 3, 4, 3, 6, 7, 123456),
        "y": "bytes\u00ff".encode(),
        "dt": "2026-01-01",
        "hour": "01",
    }
    assert table.schema.names == [*METADATA_COLUMNS, *ALL_TYPES, "dt", "hour"]
    for name, kind in ALL_TYPES.items():
        assert table.schema.field(name).type == ARROW_TYPES[kind]


def test_json_absent_and_null_optional_fields_are_null() -> None:
    table, bad = decode(json_decoder(ALL_TYPES), [b"{}", b'{"s": null, "l": null, "t": null}', b'{"zzz": 1}'])
    assert bad == []
    assert good_offsets(table) == [0, 1, 2]
    for name in ALL_TYPES:
        assert column(table, name) == [None, None, None]


def test_json_several_good_rows_keep_their_order_and_keys() -> None:
    values = [json.dumps({"s": f"v{i}", "l": i}).encode() for i in range(50)]
    messages = [
        msg(1000 + i, v, ts=BASE_MS + i * 60_000, key=None if i % 2 else str(i).encode()) for i, v in enumerate(values)
    ]
    table, bad = decode(json_decoder({"s": "string", "l": "long"}), messages)
    assert bad == []
    assert good_offsets(table) == list(range(1000, 1050))
    assert column(table, "l") == list(range(50))
    assert column(table, "key") == [None if i % 2 else str(i).encode() for i in range(50)]
    assert column(table, "timestamp") == [BASE + timedelta(minutes=i) for i in range(50)]


def test_pretty_printed_json_is_one_good_row() -> None:
    pretty = json.dumps({"s": "a\nb", "l": 7, "nested": {"x": [1, 2]}}, indent=2).encode()
    crlf = pretty.replace(b"\n", b"\r\n")
    trailing = b'{"l": 8}\n'
    decoder = json_decoder({"s": "string", "l": "long"}, required=["l"])
    table, bad = decode(decoder, [b'{"l": 1}', pretty, b'{"l": 2}', crlf, trailing, b'{"l": 3}'])
    assert bad == []
    assert column(table, "l") == [1, 7, 2, 7, 8, 3]
    assert column(table, "s") == [None, "a\nb", None, "a\nb", None, None]


def test_json_value_with_utf8_bom_prefix_is_good() -> None:
    table, bad = decode(json_decoder({"l": "long"}), [b'\xef\xbb\xbf{"l": 1}'])
    assert bad == []
    assert column(table, "l") == [1]


# ---------------------------------------------------------------------------------------------
# json: bad records


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"not json", "not a JSON object"),
        (b"{'l': 1}", "JSON parse error"),
        (b'{"l": 1', "JSON parse error"),
        (b'[{"l": 1}]', "not a JSON object"),
        (b"[]", "not a JSON object"),
        (b"42", "not a JSON object"),
        (b'"text"', "not a JSON object"),
        (b"true", "not a JSON object"),
        (b'{"l": 1.5}', "couldn't parse:1.5"),
        (b'{"l": 1e2}', "couldn't parse:1e2"),
        (b'{"l": "1"}', "Column(/l) changed from number to string"),
        (b'{"l": true}', "Column(/l) changed from number to boolean"),
        (b'{"l": 9223372036854775808}', "couldn't parse"),
        (b'{"i": 2147483648}', "couldn't parse:2147483648"),
        (b'{"b": 1}', "Column(/b) changed from boolean to number"),
        (b'{"s": 5}', "Column(/s) changed from string to number"),
        (b'{"s": {"x": 1}}', "Column(/s) changed from string to object"),
        (b'{"t": "yesterday"}', "couldn't parse:yesterday"),
        (b'{"l": 1, "l": 2}', "specified twice"),
        (b"{}{}", "the value holds 2 records, not one"),
        (b'{"l":1} {"l":2}', "the value holds 2 records, not one"),
        (b'{"l":1}{"l":2}{"l":3}', "the value holds 3 records, not one"),
        (b"", "not a JSON object"),
        (b"   ", "not a JSON object"),
        (b" \t ", "not a JSON object"),
        (b"\n", "not a JSON object"),
        (b"\r\n\r\n", "not a JSON object"),
        (b'{"s": "\xff\xfe"}', "Invalid UTF8"),
        (b'{"s": "ok\xc3"}', "Invalid UTF8"),
        (b'{"l": 1}\n{"l": 2}', "the value holds 2 records, not one"),
    ],
)
def test_json_bad_record_and_reason(value: bytes | None, reason: str) -> None:
    decoder = json_decoder({"s": "string", "l": "long", "i": "int", "b": "boolean", "t": "timestamp"})
    good_before = b'{"l": 100}'
    good_after = b'{"l": 200}'
    messages = [msg(10, good_before, key=b"k0"), msg(11, value, ts=BASE_MS + 5, key=b"k1"), msg(12, good_after)]
    table, bad = decode(decoder, messages)
    assert good_offsets(table) == [10, 12]
    assert column(table, "l") == [100, 200]
    assert len(bad) == 1
    record = bad[0]
    assert (record.offset, record.timestamp, record.key, record.value) == (11, BASE_MS + 5, b"k1", value)
    assert reason in record.reason, record.reason
    # and alone
    table, bad = decode(decoder, [msg(11, value)])
    assert table.num_rows == 0
    assert [b.offset for b in bad] == [11]
    assert reason in bad[0].reason


@pytest.mark.parametrize(
    ("value", "field"),
    [(b"{}", "id"), (b'{"id": null}', "id"), (b'{"id": 1}', "name"), (b'{"id": 1, "name": null}', "name")],
)
def test_json_required_field_null_or_absent(value: bytes, field: str) -> None:
    decoder = json_decoder({"id": "long", "name": "string", "note": "string"}, required=["id", "name"])
    table, bad = decode(decoder, [b'{"id": 1, "name": "a"}', value, b'{"id": 2, "name": "b", "note": null}'])
    assert good_offsets(table) == [0, 2]
    assert reasons(bad) == {1: f"required field {field!r} is missing or null"}


def test_invalid_utf8_is_caught_in_a_chunk_of_good_rows() -> None:
    values = [json.dumps({"s": f"row {i}"}).encode() for i in range(20)]
    values[13] = b'{"s": "bad \xc0\xaf"}'
    table, bad = decode(json_decoder({"s": "string"}), values)
    assert good_offsets(table) == [i for i in range(20) if i != 13]
    assert [b.offset for b in bad] == [13]
    assert "UTF8" in bad[0].reason


def test_invalid_utf8_in_an_ignored_field_is_not_a_bad_record() -> None:
    table, bad = decode(json_decoder({"l": "long"}), [b'{"junk": "\xff", "l": 1}'])
    assert bad == []
    assert column(table, "l") == [1]


def test_two_object_message_next_to_blank_messages_is_not_misattributed() -> None:
    decoder = json_decoder({"a": "long"})
    values = [b'{"a": 1}', b'{"a": 2} {"a": 3}', b"", b'{"a": 4}', b"   ", b"{}{}", None, b"\t", b'{"a": 5}']
    table, bad = decode(decoder, values)
    assert good_offsets(table) == [0, 3, 6, 8]  # 6: a tombstone, a row
    assert column(table, "a") == [1, 4, None, 5]
    assert column(table, "tombstone") == [False, False, True, False]
    assert reasons(bad) == {
        1: "the value holds 2 records, not one",
        2: "the value is not a JSON object",
        4: "the value is not a JSON object",
        5: "the value holds 2 records, not one",
        7: "the value is not a JSON object",
    }
    # the smallest case: the pair alone, in both orders
    for pair in ([b"{}{}", b" "], [b" ", b"{}{}"], [b'{"a":1} {"a":2}', b""], [b"", b'{"a":1} {"a":2}']):
        table, bad = decode(decoder, pair)
        assert table.num_rows == 0
        assert [b.offset for b in bad] == [0, 1]


def test_two_object_message_next_to_a_bom_only_message() -> None:
    table, bad = decode(json_decoder({"a": "long"}), [b"\xef\xbb\xbf", b'{"a": 1} {"a": 2}'])
    assert table.num_rows == 0
    assert [b.offset for b in bad] == [0, 1]


def test_json_fragments_split_across_messages_are_not_glued_together() -> None:
    table, bad = decode(json_decoder({"a": "long"}), [b'{"a":', b"1}", b"{}{}"])
    assert table.num_rows == 0
    assert [b.offset for b in bad] == [0, 1, 2]


def _decode_in_subprocess(values: list[bytes]) -> subprocess.CompletedProcess[str]:
    """Decode ``values`` (schema a: long) in a child process: some inputs crash Arrow outright."""
    script = textwrap.dedent(
        f"""
        from pipelines.executor.decode import ChunkDecoder
        from pipelines.executor.rows import Message
        from pipelines.config.pipeline import Decoder, EventTime
        decoder = ChunkDecoder(Decoder(format="json", schema={{"a": "long"}}), EventTime(), "t", 0)
        values = {values!r}
        table, bad = decoder.decode([Message(i, 1000, 0, None, v) for i, v in enumerate(values)], 1)
        print(table.column("offset").to_pylist(), [b.offset for b in bad])
        """
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO, check=False
    )


@pytest.mark.integration
def test_json_null_literal_alone_is_a_bad_record() -> None:
    result = _decode_in_subprocess([b"null"])
    assert result.returncode == 0, f"the decoder process died (returncode {result.returncode})"
    assert result.stdout.strip() == "[] [0]"


@pytest.mark.integration
def test_json_null_literal_after_an_object_is_a_bad_record() -> None:
    result = _decode_in_subprocess([b'{"a": 1}', b"null"])
    assert result.returncode == 0, f"the decoder process died (returncode {result.returncode})"
    assert result.stdout.strip() == "[0] [1]"


# ---------------------------------------------------------------------------------------------
# chunk independence (hypothesis)

PROPERTY_SCHEMA = {"user": "string", "n": "long", "score": "double", "ok": "boolean", "ts": "string"}
ZONED = ["2026-01-01T00:00:00Z", "2026-06-30T23:59:59.5+02:00", "2025-12-31T23:30:00-05:00", "2026-01-01 12:00:00Z"]
NAIVE = [
    "2026-01-01T00:00:00",
    "2026-01-01T08:59:59.999999",
    "2026-07-01",
    "2026-03-08T02:30:00",
    "2026-11-01T01:30:00",
]
UNPARSEABLE = ["", "tomorrow", "2026-13-01T00:00:00", "2026-01-01T00:00:00.123456789Z", "01/02/2026"]

json_objects = st.fixed_dictionaries(
    {},
    optional={
        "user": st.one_of(st.text(max_size=8), st.none()),
        "n": st.integers(min_value=-(2**63), max_value=2**63 - 1),
        "score": st.floats(allow_nan=False, allow_infinity=False),
        "ok": st.booleans(),
        "ts": st.sampled_from(ZONED + NAIVE + UNPARSEABLE),
        "extra": st.one_of(st.integers(), st.text(max_size=4), st.lists(st.integers(), max_size=3)),
    },
)


@st.composite
def json_values(draw: st.DrawFn) -> bytes | None:
    kind = draw(st.sampled_from(["object", "object", "object", "pretty", "bad"]))
    if kind == "bad":
        return draw(
            st.sampled_from(
                [
                    b"not json",
                    b"[1, 2]",
                    b"[]",
                    b"42",
                    b'"text"',
                    b'{"n": 1.5}',
                    b'{"n": "1"}',
                    b'{"n": true}',
                    b'{"ok": 1}',
                    b"{}{}",
                    b'{"user": "a"} {"user": "b"}',
                    b"",
                    b"   ",
                    b" \t ",
                    None,
                    b'{"user": "\xff"}',
                    b'{"user": "x", "n": 1',
                    b'{"n": 1, "n": 2}',
                    b'{"user": "a"}\n{"user": "b"}',
                ]
            )
        )
    obj = draw(json_objects)
    if kind == "pretty":
        return json.dumps(obj, indent=2).encode()
    return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode()


@st.composite
def chunks_of_messages(draw: st.DrawFn, values: st.SearchStrategy[bytes | None]) -> list[Message]:
    items = draw(st.lists(values, max_size=14))
    stamps = draw(
        st.lists(st.sampled_from([-1, 0, BASE_MS, BASE_MS + 54_000_123, 1]), min_size=len(items), max_size=len(items))
    )
    keys = draw(st.lists(st.one_of(st.none(), st.binary(max_size=3)), min_size=len(items), max_size=len(items)))
    types = draw(st.lists(st.sampled_from([0, 1]), min_size=len(items), max_size=len(items)))
    headers = draw(st.lists(header_tuples, min_size=len(items), max_size=len(items)))
    return [Message(500 + i, stamps[i], types[i], keys[i], v, headers[i]) for i, v in enumerate(items)]


header_tuples = st.lists(
    st.tuples(st.sampled_from(["trace", "dup", "é", ""]), st.one_of(st.none(), st.binary(max_size=2))), max_size=3
).map(tuple)
"""A message's headers: none, or a few, keys repeated, values null or empty."""


def decode_alone(
    chunk_decoder: ChunkDecoder, messages: list[Message]
) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    rows: list[dict[str, Any]] = []
    bad: list[tuple[int, str]] = []
    for message in messages:
        table, records = chunk_decoder.decode([message], BROKER)
        rows += table.to_pylist()
        bad += [(b.offset, b.reason) for b in records]
    return rows, bad


def assert_chunk_independent(chunk_decoder: ChunkDecoder, messages: list[Message], splits: list[int]) -> None:
    whole, whole_bad = chunk_decoder.decode(messages, BROKER)
    rows, bad = decode_alone(chunk_decoder, messages)
    assert whole.to_pylist() == rows
    assert [(b.offset, b.reason) for b in whole_bad] == bad
    assert sorted([r["offset"] for r in rows] + [o for o, _ in bad]) == [m.offset for m in messages]
    # each row carries its own message's metadata (columns taken for the good rows stay aligned)
    by_offset = {m.offset: m for m in messages}
    for row in whole.to_pylist():
        message = by_offset[row["offset"]]
        assert row["headers"] == [{"key": k, "value": v} for k, v in message.headers]
        assert row["timestamp_type"] == (None if message.timestamp < 0 else message.timestamp_type)
    # and in arbitrary consecutive chunks
    bounds = sorted({0, len(messages), *(s % (len(messages) + 1) for s in splits)})
    pieces = [chunk_decoder.decode(messages[a:b], BROKER) for a, b in itertools.pairwise(bounds)]
    assert [r for t, _ in pieces for r in t.to_pylist()] == rows
    assert [(b.offset, b.reason) for _, records in pieces for b in records] == bad


JSON_DECODERS = [
    ChunkDecoder(json_decoder(PROPERTY_SCHEMA), EventTime(), TOPIC, PARTITION),
    ChunkDecoder(
        json_decoder(PROPERTY_SCHEMA, required=["user"]), EventTime(timezone="Asia/Kolkata"), TOPIC, PARTITION
    ),
    ChunkDecoder(
        json_decoder(PROPERTY_SCHEMA, required=["n"]), EventTime(field="ts", timezone="Asia/Tokyo"), TOPIC, PARTITION
    ),
    ChunkDecoder(json_decoder(PROPERTY_SCHEMA), EventTime(field="ts", timezone="America/New_York"), TOPIC, PARTITION),
]


@PROPERTY
@given(
    which=st.integers(0, len(JSON_DECODERS) - 1),
    messages=chunks_of_messages(json_values()),
    splits=st.lists(st.integers(0, 20), max_size=4),
)
def test_json_fate_does_not_depend_on_the_chunk(which: int, messages: list[Message], splits: list[int]) -> None:
    assert_chunk_independent(JSON_DECODERS[which], messages, splits)


CSV_SCHEMA = {"name": "string", "n": "long", "x": "double"}


@st.composite
def csv_values(draw: st.DrawFn) -> bytes | None:
    if draw(st.integers(0, 3)) == 0:
        return draw(
            st.sampled_from(
                [
                    b"a,1",
                    b"a,1,2,3",
                    b"a,x,1",
                    b"a,1,y",
                    b'"open,1,1',
                    b'b",1,1',
                    b"",
                    b"  ",
                    None,
                    b"a,1,1\nb,2,2",
                    b"\xff,1,1",
                    b",,",
                    b"NULL,NA,",
                ]
            )
        )
    name = draw(st.text(alphabet=st.sampled_from("ab ,;\"'\n\r\t\u00e9"), max_size=6))
    n = draw(st.one_of(st.integers(-(2**63), 2**63 - 1).map(str), st.just("")))
    x = draw(st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr), st.just("")))
    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow([name, n, x])
    return line.getvalue().encode()


CSV_DECODERS = [
    ChunkDecoder(Decoder(format="csv", schema=CSV_SCHEMA), EventTime(), TOPIC, PARTITION),
    ChunkDecoder(Decoder(format="csv", schema=CSV_SCHEMA, required=("n",)), EventTime(), TOPIC, PARTITION),
]


@PROPERTY
@given(
    which=st.integers(0, len(CSV_DECODERS) - 1),
    messages=chunks_of_messages(csv_values()),
    splits=st.lists(st.integers(0, 20), max_size=4),
)
def test_csv_fate_does_not_depend_on_the_chunk(which: int, messages: list[Message], splits: list[int]) -> None:
    assert_chunk_independent(CSV_DECODERS[which], messages, splits)


def test_chunk_independence_on_a_fixed_mix() -> None:
    """A deterministic companion of the property: many good rows with every kind of bad one in between."""
    bad_values: list[bytes | None] = [b"x", b"{}{}", b"", b"  ", None, b'{"n": 1.5}', b"[]", b'{"user": "\xff"}', b"{}"]
    values: list[bytes | None] = []
    for i in range(60):
        values.append(json.dumps({"user": f"u{i}", "n": i, "ts": ZONED[i % len(ZONED)]}).encode())
        if i % 7 == 3:
            values.append(bad_values[(i // 7) % len(bad_values)])
    messages = [Message(i, BASE_MS + i, 0, None, v) for i, v in enumerate(values)]
    decoder = ChunkDecoder(json_decoder(PROPERTY_SCHEMA, required=["user"]), EventTime(field="ts"), TOPIC, PARTITION)
    assert_chunk_independent(decoder, messages, [5, 17, 33])
    table, bad = decoder.decode(messages, BROKER)
    tombstones = values.count(None)
    assert tombstones and column(table, "tombstone").count(True) == tombstones
    assert table.num_rows == 60 + tombstones
    assert len(bad) == len(values) - 60 - tombstones


# ---------------------------------------------------------------------------------------------
# csv


def csv_decoder(required: Sequence[str] = (), **options: str) -> Decoder:
    return Decoder(
        format="csv",
        schema={"name": "string", "n": "long", "x": "double", "ok": "boolean", "t": "timestamp"},
        required=tuple(required),
        csv=CsvOptions(**options),
    )


def test_csv_good_rows_with_quotes() -> None:
    values = [
        b"alice,1,1.5,true,2026-01-01T00:00:00Z",
        b'"bob, jr",2,2.5,false,2026-01-01 01:00:00Z',
        b'"say ""hi""",3,0,1,',
        b'"two\nlines",4,-1e3,0,2026-01-01T02:00:00+01:00',
        b",,,,",
        b"NULL,5,NA,TRUE,",
    ]
    table, bad = decode(csv_decoder(), values)
    assert bad == []
    assert column(table, "name") == ["alice", "bob, jr", 'say "hi"', "two\nlines", "", "NULL"]
    assert column(table, "n") == [1, 2, 3, 4, None, 5]
    assert column(table, "x") == [1.5, 2.5, 0.0, -1000.0, None, None]
    assert column(table, "ok") == [True, False, True, False, None, True]
    assert column(table, "t") == [utc(2026, 1, 1), utc(2026, 1, 1, 1), None, utc(2026, 1, 1, 1), None, None]


def test_csv_delimiter_and_quote_options() -> None:
    decoder = csv_decoder(delimiter=";", quote="'")
    values = [b"a;1;1.5;true;", b"'b;c';2;2;false;", b"'it''s';3;3;true;", b"a,1,1,true,", b'"q;x";4;4;true;']
    table, bad = decode(decoder, values)
    assert column(table, "name") == ["a", "b;c", "it's"]
    assert reasons(bad).keys() == {3, 4}
    assert "Expected 5 columns, got 1" in reasons(bad)[3]
    assert "Expected 5 columns, got 6" in reasons(bad)[4]
    tabs = csv_decoder(delimiter="\t")
    table, bad = decode(tabs, [b"a b\t1\t2\tfalse\t"])
    assert bad == []
    assert column(table, "name") == ["a b"]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"a,1,1.5,true", "Expected 5 columns, got 4"),
        (b"a,1,1.5,true,,extra", "Expected 5 columns, got 6"),
        (b"a", "Expected 5 columns, got 1"),
        (b"a,x,1.5,true,", "CSV conversion error to int64: invalid value 'x'"),
        (b"a,1.5,1.5,true,", "CSV conversion error to int64: invalid value '1.5'"),
        (b"a,1,abc,true,", "CSV conversion error to double: invalid value 'abc'"),
        (b"a,1,1,maybe,", "CSV conversion error to bool: invalid value 'maybe'"),
        (b"a,1,1,true,soon", "CSV conversion error to timestamp"),
        (b'"open,1,1,true,', "Expected 5 columns, got 1"),
        (b"a,1,1,true,\nb,2,2,false,", "the value holds 2 records, not one"),
        (b"", "Empty CSV file"),
        (b"   ", "Expected 5 columns, got 1"),
        (b"\xff\xfe,1,1,true,", "UTF8"),
    ],
)
def test_csv_bad_record_and_reason(value: bytes | None, reason: str) -> None:
    table, bad = decode(csv_decoder(), [b"ok,1,1,true,", value, b"ok,2,2,false,"])
    assert good_offsets(table) == [0, 2]
    assert len(bad) == 1
    assert bad[0].offset == 1
    assert bad[0].value == value
    assert reason in bad[0].reason, bad[0].reason


def test_csv_required_field() -> None:
    table, bad = decode(csv_decoder(required=["n"]), [b"a,1,1,true,", b"b,,1,true,", b"c,NULL,1,true,"])
    assert good_offsets(table) == [0]
    assert reasons(bad) == {1: "required field 'n' is missing or null", 2: "required field 'n' is missing or null"}


def test_csv_unbalanced_quotes_do_not_swallow_the_next_message() -> None:
    table, bad = decode(csv_decoder(), [b'"open,1,1,true,', b'x",2,2,false,', b"c,3,3,true,"])
    assert good_offsets(table) == [1, 2]
    assert column(table, "name") == ['x"', "c"]
    assert [b.offset for b in bad] == [0]


# ---------------------------------------------------------------------------------------------
# raw


def test_raw_decoder_keeps_value_bytes() -> None:
    decoder = Decoder(format="raw")
    values = [b"\x00\xff binary", b"not json {}{}", b"", b"line1\nline2\r\n", b"\xef\xbb\xbf", bytes(range(256))]
    messages = [msg(i, v, ts=BASE_MS + i * 3_600_000, key=bytes([i])) for i, v in enumerate(values)]
    table, bad = decode(decoder, messages)
    assert bad == []
    assert table.schema.names == [
        "topic",
        "partition",
        "offset",
        "broker",
        "timestamp",
        "timestamp_type",
        "event_time",
        "key",
        "headers",
        "tombstone",
        "value",
        "dt",
        "hour",
    ]
    assert column(table, "value") == values
    assert column(table, "key") == [bytes([i]) for i in range(len(values))]
    assert column(table, "hour") == [f"{i:02d}" for i in range(len(values))]


def test_raw_decoder_needs_a_message_timestamp() -> None:
    table, bad = decode(Decoder(format="raw"), [msg(0, b"a"), msg(1, b"b", ts=-1), msg(2, b"c")])
    assert column(table, "value") == [b"a", b"c"]
    assert reasons(bad) == {1: "the message has no timestamp and event_time.field is not set"}
    assert bad[0].value == b"b"


# ---------------------------------------------------------------------------------------------
# tombstones: messages without a value


@pytest.mark.parametrize(
    "decoder",
    [
        json_decoder({"user": "string", "n": "long", "ts": "string"}, required=["user", "n"]),
        Decoder(format="csv", schema={"user": "string", "n": "long", "ts": "string"}, required=("user",)),
        Decoder(format="raw"),
    ],
    ids=["json", "csv", "raw"],
)
def test_a_tombstone_is_a_row_flagged_with_null_fields_never_a_bad_record(decoder: Decoder) -> None:
    """On a compacted topic a null value deletes its key: the row keeps the key, headers and
    timestamp, its decoded fields are null (``required`` does not apply: there is no payload), and
    its event time is the message's timestamp, also when event_time names a field."""
    good = (
        b'{"user": "a", "n": 1, "ts": "2026-01-01T05:00:00Z"}'
        if decoder.format == "json"
        else b"a,1,2026-01-01T05:00:00Z"
    )
    event_time = EventTime() if decoder.format == "raw" else EventTime(field="ts")
    messages = [
        msg(7, good, key=b"user-a"),
        Message(8, BASE_MS + 7_200_000, 1, b"user-a", None, (("op", b"delete"),)),
        msg(9, None, key=b"user-b"),
    ]
    table, bad = decode(decoder, messages, event_time)
    assert bad == []
    assert good_offsets(table) == [7, 8, 9]
    assert column(table, "tombstone") == [False, True, True]
    assert column(table, "key") == [b"user-a", b"user-a", b"user-b"]
    assert headers_of(table) == [[], [("op", b"delete")], []]
    assert column(table, "timestamp_type") == [0, 1, 0]
    assert column(table, "event_time")[1:] == [BASE + timedelta(hours=2), BASE]
    assert column(table, "hour")[1:] == ["02", "00"]
    for name in ("value",) if decoder.format == "raw" else tuple(decoder.schema):
        assert column(table, name)[1:] == [None, None], name
    # decoded alone, in a chunk of tombstones only, the same rows
    alone = [decode(decoder, [m], event_time)[0].to_pylist()[0] for m in messages]
    assert table.to_pylist() == alone
    assert decode(decoder, messages[1:], event_time)[0].to_pylist() == alone[1:]


def test_a_tombstone_without_a_timestamp_cannot_be_placed_in_time() -> None:
    decoder = json_decoder({"ts": "string"})
    for event_time in (EventTime(), EventTime(field="ts")):
        table, bad = decode(decoder, [msg(0, None, ts=-1), msg(1, None), msg(2, None, ts=-1)], event_time)
        assert good_offsets(table) == [1]
        assert reasons(bad) == dict.fromkeys(
            (0, 2), "a tombstone (the message has no value) has no timestamp to place it in time"
        )
        assert [b.value for b in bad] == [None, None]


def test_the_tombstone_column_is_declared_for_spark() -> None:
    assert ("tombstone", "BOOLEAN") in _ddl_columns(spark_ddl(json_decoder({"a": "long"})))
    with pytest.raises(SpecError, match=r"schema\.tombstone: clashes with a column every raw row has"):
        json_decoder({"tombstone": "boolean"})


# ---------------------------------------------------------------------------------------------
# headers and timestamp type


def headers_of(table: pa.Table) -> list[list[tuple[str, bytes | None]]]:
    return [[(h["key"], h["value"]) for h in row] for row in column(table, "headers")]


def test_headers_keep_their_order_duplicate_keys_and_null_values() -> None:
    headers: list[tuple[tuple[str, bytes | None], ...]] = [
        (("dup", b"1"), ("other", b""), ("dup", None), ("dup", b"3")),
        (),
        (("ünï 😀", b"\x00\xff"),),
        (("", None),),
    ]
    messages = [Message(i, BASE_MS, 0, None, b"v", h) for i, h in enumerate(headers)]
    table, bad = decode(Decoder(format="raw"), messages)
    assert bad == []
    assert headers_of(table) == [list(h) for h in headers]
    assert table.column("headers").null_count == 0
    assert table.schema.field("headers").type == HEADERS


def test_messages_without_headers_have_an_empty_list_never_null() -> None:
    # v0/v1 messages cannot carry headers (kafkalog gives them none): the list is empty, not null;
    # null is left to mean "not recorded" (raw files written before the column existed)
    table, _ = decode(json_decoder({"n": "long"}), [b'{"n": 1}', b'{"n": 2}'])
    assert column(table, "headers") == [[], []]
    assert table.column("headers").null_count == 0
    empty, _ = decode(json_decoder({"n": "long"}), [])
    assert empty.num_rows == 0 and empty.schema == row_schema(json_decoder({"n": "long"}))


def test_timestamp_type_is_kafkas_and_null_where_the_message_has_no_timestamp() -> None:
    decoder = json_decoder({"n": "long", "ts": "string"})
    value = b'{"n": 1, "ts": "2026-01-01T05:00:00Z"}'
    messages = [
        Message(0, BASE_MS, 0, None, value),  # CreateTime
        Message(1, BASE_MS, 1, None, value),  # LogAppendTime
        Message(2, -1, 0, None, value),  # magic 0: no timestamp, so no type either
    ]
    table, bad = decode(decoder, messages, EventTime(field="ts"))
    assert bad == []
    assert column(table, "timestamp_type") == [0, 1, None]
    assert column(table, "timestamp") == [BASE, BASE, None]
    assert table.schema.field("timestamp_type").type == pa.int32()


def test_rows_around_bad_records_keep_their_own_headers_and_bad_records_keep_theirs() -> None:
    values = [b'{"n": 0}', b"not json", b'{"n": 2}', b'{"n": "three"}', b'{"n": 4}']
    messages = [
        Message(i, BASE_MS + i, i % 2, b"k%d" % i, v, (("i", b"%d" % i), ("i", None))) for i, v in enumerate(values)
    ]
    table, bad = decode(json_decoder({"n": "long"}), messages)
    assert good_offsets(table) == [0, 2, 4]
    assert headers_of(table) == [[("i", b"%d" % i), ("i", None)] for i in (0, 2, 4)]
    assert [(b.offset, b.timestamp_type, b.headers, b.key) for b in bad] == [
        (1, 1, (("i", b"1"), ("i", None)), b"k1"),
        (3, 1, (("i", b"3"), ("i", None)), b"k3"),
    ]


def test_the_quarantine_keeps_what_a_bad_message_carried() -> None:
    split = Split("events", 0, leader=1, start=3, end=10)
    bad = [
        BadRecord(4, BASE_MS, b"k", b"x", "not JSON", timestamp_type=1, headers=(("a", None), ("a", b"2"))),
        BadRecord(5, -1, None, None, "no value"),
    ]
    rows = pa.Table.from_batches([quarantine_batch(split, bad)]).to_pylist()
    assert rows == [
        {
            "topic": "events",
            "partition": 0,
            "offset": 4,
            "timestamp": BASE_MS,
            "timestamp_type": 1,
            "key": b"k",
            "value": b"x",
            "headers": [{"key": "a", "value": None}, {"key": "a", "value": b"2"}],
            "reason": "not JSON",
        },
        {
            "topic": "events",
            "partition": 0,
            "offset": 5,
            "timestamp": -1,
            "timestamp_type": None,
            "key": None,
            "value": None,
            "headers": [],
            "reason": "no value",
        },
    ]
    assert _ddl_columns(QUARANTINE_DDL) == [(f.name, SPARK_OF_ARROW[f.type]) for f in QUARANTINE_SCHEMA]


def test_messages_as_kafkalog_reads_them_from_every_message_format() -> None:
    """What a fetch yields, decoded by kafkalog itself: magic 0 (no timestamp), magic 1 with
    log-append time (gzip), and a v2 record batch with headers (zstd), in one chunk."""
    magic0 = MessageSetBuilder(magic=0, base_offset=0)
    magic0.append(b'{"n": 0}', key=b"a")
    magic1 = MessageSetBuilder(magic=1, codec=Codec.GZIP, base_offset=1, timestamp_type=TimestampType.LOG_APPEND_TIME)
    magic1.extend([(b"b", b'{"n": 1}', BASE_MS), (None, b'{"n": 2}', BASE_MS)])
    batch = encode_batch(
        [
            RecordInput(b"c", b'{"n": 3}', BASE_MS + 1, [("dup", b"x"), ("dup", None)]),
            RecordInput(None, b'{"n": 4}', BASE_MS + 2, []),
        ],
        base_offset=3,
        codec=Codec.ZSTD,
    )
    messages = decode_all(magic0.build() + magic1.build() + batch)
    decoder = ChunkDecoder(json_decoder({"n": "long"}), EventTime(), TOPIC, PARTITION)
    table, bad = decoder.decode(messages, BROKER)  # type: ignore[arg-type]  # kafkalog's Message: an IntEnum type
    assert [(b.offset, b.reason) for b in bad] == [(0, "the message has no timestamp and event_time.field is not set")]
    assert bad[0].headers == () and bad[0].key == b"a"
    assert good_offsets(table) == [1, 2, 3, 4]
    assert column(table, "timestamp_type") == [1, 1, 0, 0]
    assert headers_of(table) == [[], [], [("dup", b"x"), ("dup", None)], []]
    assert column(table, "key") == [b"b", None, b"c", None]


# ---------------------------------------------------------------------------------------------
# event time and dt/hour


def event_rows(schema: dict[str, str], event_time: EventTime, values: list[bytes]) -> tuple[pa.Table, dict[int, str]]:
    table, bad = decode(json_decoder(schema), values, event_time)
    return table, reasons(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-01T10:20:30Z", utc(2026, 1, 1, 10, 20, 30)),
        ("2026-01-01T10:20:30.5Z", utc(2026, 1, 1, 10, 20, 30, 500000)),
        ("2026-01-01T10:20:30.123456Z", utc(2026, 1, 1, 10, 20, 30, 123456)),
        ("2026-01-01T10:20:30+09:00", utc(2026, 1, 1, 1, 20, 30)),
        ("2026-01-01T10:20:30-0330", utc(2026, 1, 1, 13, 50, 30)),
        ("2026-01-01 10:20:30Z", utc(2026, 1, 1, 10, 20, 30)),
        ("2026-01-01T10:20:30", utc(2026, 1, 1, 10, 20, 30)),
        ("2026-01-01", utc(2026, 1, 1)),
    ],
)
def test_iso8601_event_time_in_utc(text: str, expected: datetime) -> None:
    table, bad = event_rows({"ts": "string"}, EventTime(field="ts"), [json.dumps({"ts": text}).encode()])
    assert bad == {}
    assert column(table, "event_time") == [expected]
    assert column(table, "dt") == [expected.strftime("%Y-%m-%d")]
    assert column(table, "hour") == [expected.strftime("%H")]
    assert column(table, "timestamp") == [BASE]  # the message timestamp is kept as it is


def test_naive_iso8601_is_read_in_the_pipeline_zone() -> None:
    values = [
        b'{"ts": "2026-01-01T08:30:00"}',  # naive: Tokyo time
        b'{"ts": "2026-01-01T08:30:00Z"}',  # explicit UTC
        b'{"ts": "2026-01-01T08:30:00+01:00"}',  # explicit offset
        b'{"ts": "2025-12-31T23:59:59"}',
    ]
    table, bad = event_rows({"ts": "string"}, EventTime(field="ts", timezone="Asia/Tokyo"), values)
    assert bad == {}
    assert column(table, "event_time") == [
        utc(2025, 12, 31, 23, 30),
        utc(2026, 1, 1, 8, 30),
        utc(2026, 1, 1, 7, 30),
        utc(2025, 12, 31, 14, 59, 59),
    ]
    assert column(table, "dt") == ["2026-01-01", "2026-01-01", "2026-01-01", "2025-12-31"]
    assert column(table, "hour") == ["08", "17", "16", "23"]


def test_naive_time_in_a_dst_gap_is_a_bad_record() -> None:
    values = [b'{"ts": "2026-03-08T02:30:00"}', b'{"ts": "2026-03-08T03:30:00"}']
    table, bad = event_rows({"ts": "string"}, EventTime(field="ts", timezone="America/New_York"), values)
    assert column(table, "event_time") == [utc(2026, 3, 8, 7, 30)]
    assert list(bad) == [0]
    assert bad[0].startswith("event time 'ts':")


def test_timestamp_field_as_event_time() -> None:
    values = [b'{"t": "2026-01-01T08:30:00+09:00"}', b'{"t": "2026-01-01T23:30:00Z"}']
    table, bad = event_rows({"t": "timestamp"}, EventTime(field="t", timezone="Asia/Tokyo"), values)
    assert bad == {}
    assert column(table, "event_time") == [utc(2025, 12, 31, 23, 30), utc(2026, 1, 1, 23, 30)]
    assert column(table, "t") == column(table, "event_time")
    assert column(table, "dt") == ["2026-01-01", "2026-01-02"]
    assert column(table, "hour") == ["08", "08"]


def test_naive_time_in_a_timestamp_field_is_utc_as_documented() -> None:
    # a field declared `timestamp` is parsed by the decoder, where a naive time means UTC; a string
    # field with format iso8601 is the way to have naive times read in event_time.timezone
    table, bad = event_rows(
        {"t": "timestamp"}, EventTime(field="t", timezone="Asia/Tokyo"), [b'{"t": "2026-01-01T08:30:00"}']
    )
    assert bad == {}
    assert column(table, "event_time") == [utc(2026, 1, 1, 8, 30)]
    assert column(table, "hour") == ["17"]


@pytest.mark.parametrize(
    ("kind", "fmt", "number", "expected"),
    [
        ("long", "epoch_millis", 1767225600123, utc(2026, 1, 1, 0, 0, 0, 123000)),
        ("long", "epoch_millis", -1000, utc(1969, 12, 31, 23, 59, 59)),
        ("long", "epoch_seconds", 1767225600, utc(2026, 1, 1)),
        ("int", "epoch_seconds", 1767225600, utc(2026, 1, 1)),
        ("int", "epoch_millis", 86_400_000, utc(1970, 1, 2)),
        ("double", "epoch_seconds", 1767225600.5, utc(2026, 1, 1, 0, 0, 0, 500000)),
        ("double", "epoch_seconds", 1767225600.123456, utc(2026, 1, 1, 0, 0, 0, 123456)),
        ("double", "epoch_millis", 1767225600123.5, utc(2026, 1, 1, 0, 0, 0, 123500)),
    ],
)
def test_epoch_event_time(kind: str, fmt: str, number: float, expected: datetime) -> None:
    table, bad = event_rows({"e": kind}, EventTime(field="e", format=fmt), [json.dumps({"e": number}).encode()])
    assert bad == {}
    assert column(table, "event_time") == [expected]
    assert column(table, "e") == [number]


def test_epoch_event_time_in_a_zone() -> None:
    # 2026-01-01T15:30Z is 00:30 the next day in Tokyo
    table, bad = event_rows(
        {"e": "long"}, EventTime(field="e", format="epoch_seconds", timezone="Asia/Tokyo"), [b'{"e": 1767281400}']
    )
    assert bad == {}
    assert column(table, "event_time") == [utc(2026, 1, 1, 15, 30)]
    assert (column(table, "dt"), column(table, "hour")) == (["2026-01-02"], ["00"])


def test_double_epoch_seconds_with_sub_microsecond_digits() -> None:
    table, bad = event_rows(
        {"e": "double"}, EventTime(field="e", format="epoch_seconds"), [b'{"e": 1767225600.1234567}']
    )
    assert bad == {}
    assert column(table, "event_time") == [utc(2026, 1, 1, 0, 0, 0, 123456)]


def test_epoch_event_time_out_of_range_is_a_bad_record() -> None:
    table, bad = event_rows(
        {"e": "long"}, EventTime(field="e", format="epoch_millis"), [b'{"e": 99999999999999999}', b'{"e": 1}']
    )
    assert column(table, "event_time") == [utc(1970, 1, 1, 0, 0, 0, 1000)]
    assert list(bad) == [0]
    assert bad[0].startswith("event time 'e':")


def test_strptime_event_time() -> None:
    fmt = EventTime(field="ts", format="%d/%m/%Y %H:%M", timezone="Asia/Tokyo")
    values = [b'{"ts": "01/01/2026 08:30"}', b'{"ts": "2026-01-01 08:30"}', b'{"ts": "31/12/2025 23:59"}']
    table, bad = event_rows({"ts": "string"}, fmt, values)
    assert column(table, "event_time") == [utc(2025, 12, 31, 23, 30), utc(2025, 12, 31, 14, 59)]
    assert column(table, "dt") == ["2026-01-01", "2025-12-31"]
    assert column(table, "hour") == ["08", "23"]
    assert list(bad) == [1]
    assert bad[1].startswith("event time 'ts':")
    assert "2026-01-01 08:30" in bad[1]


def test_strptime_event_time_with_offset() -> None:
    fmt = EventTime(field="ts", format="%Y-%m-%d %H:%M:%S%z", timezone="Asia/Tokyo")
    table, bad = event_rows({"ts": "string"}, fmt, [b'{"ts": "2026-01-01 08:30:00+0000"}'])
    assert bad == {}
    assert column(table, "event_time") == [utc(2026, 1, 1, 8, 30)]
    assert (column(table, "dt"), column(table, "hour")) == (["2026-01-01"], ["17"])


@pytest.mark.parametrize("text", ["tomorrow", "", "2026-13-01T00:00:00", "2026-01-01T25:00:00Z", "1767225600"])
def test_unparseable_event_time_is_a_bad_record(text: str) -> None:
    values = [b'{"ts": "2026-01-01T00:00:00Z"}', json.dumps({"ts": text}).encode(), b'{"ts": "2026-01-01T01:00:00Z"}']
    table, bad = event_rows({"ts": "string"}, EventTime(field="ts"), values)
    assert good_offsets(table) == [0, 2]
    assert column(table, "hour") == ["00", "01"]
    assert list(bad) == [1]
    assert bad[1].startswith("event time 'ts': ")


def test_iso8601_with_nanosecond_fraction() -> None:
    table, bad = event_rows({"ts": "string"}, EventTime(field="ts"), [b'{"ts": "2026-01-01T00:00:00.123456789Z"}'])
    assert bad == {}
    assert column(table, "event_time") == [utc(2026, 1, 1, 0, 0, 0, 123456)]


@pytest.mark.parametrize("value", [b"{}", b'{"ts": null}'])
def test_missing_event_time_is_a_bad_record(value: bytes) -> None:
    table, bad = event_rows({"ts": "string"}, EventTime(field="ts"), [value, b'{"ts": "2026-01-01T00:00:00Z"}'])
    assert good_offsets(table) == [1]
    assert bad == {0: "event time 'ts' is missing or null"}


def test_numeric_field_with_iso8601_format_is_a_bad_record() -> None:
    table, bad = event_rows({"e": "long"}, EventTime(field="e"), [b'{"e": 1}'])
    assert table.num_rows == 0
    assert bad == {0: "event time 'e': a numeric event time needs format epoch_millis or epoch_seconds, not iso8601"}


@pytest.mark.parametrize("values", [[], [b"not json"], [b"", b"{}"]])
def test_chunk_without_rows_and_a_misconfigured_event_time(values: list[bytes | None]) -> None:
    table, bad = event_rows({"e": "long"}, EventTime(field="e"), values)  # type: ignore[arg-type]
    assert table.num_rows == 0
    assert len(bad) == len(values)


def test_message_timestamp_is_the_event_time_without_a_field() -> None:
    stamps = [BASE_MS, BASE_MS + 3_599_999, BASE_MS + 3_600_000, 0, -1, BASE_MS - 1, -2]
    messages = [msg(i, b"{}", ts=s) for i, s in enumerate(stamps)]
    table, bad = decode(json_decoder({"a": "long"}), messages)
    assert good_offsets(table) == [0, 1, 2, 3, 5]
    assert column(table, "timestamp") == [
        BASE,
        BASE + timedelta(milliseconds=3_599_999),
        BASE + timedelta(hours=1),
        utc(1970, 1, 1),
        BASE - timedelta(milliseconds=1),
    ]
    assert column(table, "event_time") == column(table, "timestamp")
    assert column(table, "dt") == ["2026-01-01", "2026-01-01", "2026-01-01", "1970-01-01", "2025-12-31"]
    assert column(table, "hour") == ["00", "00", "01", "00", "23"]
    assert reasons(bad) == {
        4: "the message has no timestamp and event_time.field is not set",
        6: "the message has no timestamp and event_time.field is not set",
    }
    assert [(b.timestamp, b.value) for b in bad] == [(-1, b"{}"), (-2, b"{}")]


def test_missing_message_timestamp_is_fine_with_an_event_time_field() -> None:
    messages = [msg(0, b'{"ts": "2026-01-01T05:00:00Z"}', ts=-1)]
    table, bad = decode(json_decoder({"ts": "string"}), messages, EventTime(field="ts"))
    assert bad == []
    assert column(table, "timestamp") == [None]
    assert column(table, "event_time") == [utc(2026, 1, 1, 5)]


@pytest.mark.parametrize(
    ("zone", "stamp", "dt", "hour"),
    [
        ("Asia/Tokyo", utc(2025, 12, 31, 14, 59, 59), "2025-12-31", "23"),
        ("Asia/Tokyo", utc(2025, 12, 31, 15, 0), "2026-01-01", "00"),
        ("Asia/Tokyo", utc(2025, 12, 31, 15, 30), "2026-01-01", "00"),
        ("America/Los_Angeles", utc(2026, 1, 1, 7, 59), "2025-12-31", "23"),
        ("America/Los_Angeles", utc(2026, 1, 1, 8, 0), "2026-01-01", "00"),
        ("America/Los_Angeles", utc(2026, 7, 1, 6, 59), "2026-06-30", "23"),  # PDT: UTC-7
        ("Asia/Kolkata", utc(2025, 12, 31, 18, 29), "2025-12-31", "23"),
        ("Asia/Kolkata", utc(2025, 12, 31, 18, 30), "2026-01-01", "00"),
        ("Australia/Adelaide", utc(2025, 12, 31, 13, 30), "2026-01-01", "00"),  # ACDT: UTC+10:30
        ("UTC", utc(2025, 12, 31, 23, 59, 59), "2025-12-31", "23"),
    ],
)
def test_dt_and_hour_across_midnight_in_a_zone(zone: str, stamp: datetime, dt: str, hour: str) -> None:
    ms = int(stamp.timestamp() * 1000)
    table, bad = decode(json_decoder({"a": "long"}), [msg(0, b"{}", ts=ms)], EventTime(timezone=zone))
    assert bad == []
    assert column(table, "event_time") == [stamp]
    assert (column(table, "dt"), column(table, "hour")) == ([dt], [hour])


def test_dst_fall_back_hour_is_not_duplicated_in_dt_hour_but_times_stay_distinct() -> None:
    # 2026-11-01 01:30 happens twice in New York (EDT then EST)
    first, second = utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6, 30)
    messages = [msg(i, b"{}", ts=int(s.timestamp() * 1000)) for i, s in enumerate([first, second])]
    table, bad = decode(json_decoder({"a": "long"}), messages, EventTime(timezone="America/New_York"))
    assert bad == []
    assert column(table, "event_time") == [first, second]
    assert column(table, "dt") == ["2026-11-01", "2026-11-01"]
    assert column(table, "hour") == ["01", "01"]


@pytest.mark.parametrize(
    "zone",
    # DST both ways, a 30-minute DST shift, quarter-hour offsets, historical odd offsets
    [
        "America/New_York",
        "Europe/London",
        "Australia/Lord_Howe",
        "Asia/Kathmandu",
        "Pacific/Chatham",
        "Africa/Monrovia",
    ],
)
def test_dt_and_hour_agree_with_zoneinfo_through_transitions(zone: str) -> None:
    # every 7 minutes through autumn and spring transitions, plus times from 1900 to 2037 (Arrow's
    # time zone rules stop at 2037: later summer times are an hour off, see docs/pipelines.md)
    seconds = [*range(1_698_000_000, 1_700_000_000, 420), *range(1_711_000_000, 1_713_000_000, 420)]
    seconds += range(-2_200_000_000, 2_140_000_000, 86_413 * 37)
    resolver = EventTimeResolver(EventTime(timezone=zone), None)
    times = pa.array([s * 1_000_000 for s in seconds], TIMESTAMP)
    dt, hour = resolver.partitions(times)
    local = [datetime.fromtimestamp(s, tz=UTC).astimezone(ZoneInfo(zone)) for s in seconds]
    assert dt.to_pylist() == [t.strftime("%Y-%m-%d") for t in local]
    assert hour.to_pylist() == [t.strftime("%H") for t in local]


@given(
    st.lists(
        st.sampled_from([b'{"a": 1}', b' {"a": 2}', b'{"a": 3} ', b"", b" ", b"\xef\xbb\xbf{}", b"{}\n{}", b"{\r}"]),
        max_size=12,
    )
)
def test_the_fast_whole_chunk_check_agrees_with_the_per_value_rule(values: list[bytes]) -> None:
    one_line = all(b"\n" not in v and b"\r" not in v for v in values)
    json_plain = one_line and all(v.startswith(b"{") and v.endswith(b"}") for v in values)
    csv_plain = one_line and all(v and v[:1] not in b" \t\x0b\x0c\xef" for v in values)
    assert all_plain(values, True) == json_plain
    assert all_plain(values, False) == csv_plain
    for json_object in (True, False):
        if all_plain(values, json_object):  # the fast answer never hides a value to parse alone
            assert not any(suspicious(v, json_object) for v in values)
    assert not all_plain([b"{}", None], True)


# ---------------------------------------------------------------------------------------------
# the pieces: the JSON payload decoder, EventTimeResolver, schemas


def test_value_parser_reports_indexes() -> None:
    parser = JsonValues(json_decoder({"a": "long"}, required=["a"]))
    pieces, bad = parser.parse([b'{"a": 1}', b'{"a": 2}', None, b"x", b'{"a": 3}', b"{}"])
    indexes = [i for piece in pieces for i in piece.indexes]
    assert indexes == [0, 1, 4]
    assert [v for piece in pieces for v in piece.table.column("a").to_pylist()] == [1, 2, 3]
    assert sorted(i for i, _ in bad) == [2, 3, 5]
    assert dict(bad)[5] == "required field 'a' is missing or null"
    assert parser.parse([]) == ([], [])


def test_event_time_resolver_directly() -> None:
    resolver = EventTimeResolver(EventTime(field="ts", timezone="Europe/Paris"), "string")
    column_ = pa.array(["2026-01-01T00:30:00", None, "nope", "2026-06-01T00:30:00Z"])
    pieces, bad = resolver.resolve(column_)
    assert [i for indexes, _ in pieces for i in indexes] == [0, 3]
    times = pa.concat_arrays([t for _, t in pieces])
    assert times.type == TIMESTAMP
    assert times.to_pylist() == [utc(2025, 12, 31, 23, 30), utc(2026, 6, 1, 0, 30)]
    assert sorted(i for i, _ in bad) == [1, 2]
    dt, hour = resolver.partitions(times)
    assert dt.to_pylist() == ["2026-01-01", "2026-06-01"]
    assert hour.to_pylist() == ["00", "02"]


def test_empty_chunk() -> None:
    for decoder in (json_decoder({"a": "long"}), Decoder(format="raw"), csv_decoder()):
        table, bad = decode(decoder, [])
        assert table.num_rows == 0
        assert bad == []
    table, bad = decode(json_decoder({"ts": "string"}), [], EventTime(field="ts"))
    assert (table.num_rows, bad) == (0, [])


def test_chunk_of_only_bad_messages() -> None:
    table, bad = decode(json_decoder({"ts": "string"}), [b"x", msg(1, None, ts=-1), b""], EventTime(field="ts"))
    assert table.num_rows == 0
    assert [b.offset for b in bad] == [0, 1, 2]


def _ddl_columns(ddl: str) -> list[tuple[str, str]]:
    """(name, type) of each column of a DDL string (commas inside ``<...>`` belong to the type)."""
    columns, depth, start = [], 0, 0
    for i, char in enumerate(ddl + ","):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            name, kind = ddl[start:i].strip().split(" ", 1)
            columns.append((name.strip("`"), kind))
            start = i + 1
    return columns


SPARK_OF_ARROW = {
    pa.string(): "STRING",
    pa.int64(): "BIGINT",
    pa.int32(): "INT",
    pa.float64(): "DOUBLE",
    pa.float32(): "FLOAT",
    pa.bool_(): "BOOLEAN",
    TIMESTAMP: "TIMESTAMP",
    pa.binary(): "BINARY",
    HEADERS: "ARRAY<STRUCT<`key`: STRING, `value`: BINARY>>",
}


@pytest.mark.parametrize(
    "decoder",
    [
        json_decoder(ALL_TYPES),
        json_decoder({"zeta": "long", "alpha": "string", "mid": "timestamp"}),
        Decoder(format="csv", schema={"b": "boolean", "a": "binary"}),
        Decoder(format="raw"),
    ],
    ids=["all-types", "unsorted", "csv", "raw"],
)
def test_spark_ddl_matches_row_schema(decoder: Decoder) -> None:
    schema = row_schema(decoder)
    columns = _ddl_columns(spark_ddl(decoder))
    assert [name for name, _ in columns] == schema.names
    assert [kind for _, kind in columns] == [SPARK_OF_ARROW[f.type] for f in schema]
    assert schema.names[: len(METADATA_COLUMNS)] == list(METADATA_COLUMNS)
    assert schema.names[-2:] == ["dt", "hour"]


def test_every_field_type_has_an_arrow_and_spark_type() -> None:
    assert set(ARROW_TYPES) == set(FIELD_TYPES)
    for kind, arrow in ARROW_TYPES.items():
        assert SPARK_OF_ARROW[arrow] == SPARK_TYPES[kind]
        assert kind in FIELD_TYPES
