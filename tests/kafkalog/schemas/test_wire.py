"""The Confluent wire format (kafkalog.schemas.wire): frames as serializers write them, every
malformed value refused with its reason, and the chunk helper agreeing with ``unframe``."""

from __future__ import annotations

import io

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.schemas.errors import SchemaError, WireFormatError
from kafkalog.schemas.wire import MAX_SCHEMA_ID, Framed, encode_message_indexes, frame, schema_ids, unframe

ids = st.integers(0, MAX_SCHEMA_ID)
index_paths = st.lists(st.integers(0, (1 << 31) - 1), min_size=1, max_size=6)


def test_an_avro_value_as_serializers_frame_it() -> None:
    # {"id": "a", "n": 1} written with schema id 1: 00 00000001 then Avro binary 02 61 02
    schema = fastavro.parse_schema(
        {"type": "record", "name": "Ev", "fields": [{"name": "id", "type": "string"}, {"name": "n", "type": "int"}]}
    )
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, {"id": "a", "n": 1})
    assert frame(1, out.getvalue()) == bytes.fromhex("00 00000001 026102")
    assert unframe(bytes.fromhex("00 00000001 026102")) == Framed(1, None, 5)


def test_protobuf_message_indexes_as_serializers_write_them() -> None:
    # the first message of a file: the one-byte shortcut; the second: count 1, index 1 (zigzag 02 02)
    assert frame(3, b"P", [0]) == bytes.fromhex("00 00000003 00") + b"P"
    assert frame(3, b"P", [1]) == bytes.fromhex("00 00000003 0202") + b"P"
    assert unframe(bytes.fromhex("00 00000003 00") + b"P", message_indexes=True) == Framed(3, (0,), 6)
    assert unframe(bytes.fromhex("00 00000003 0202") + b"P", message_indexes=True) == Framed(3, (1,), 7)


def test_the_long_form_of_the_first_message_reads_as_the_shortcut() -> None:
    assert unframe(bytes.fromhex("00 00000003 0200") + b"P", message_indexes=True) == Framed(3, (0,), 7)


def test_nested_and_large_indexes() -> None:
    # [1, 0, 300]: count 3 -> 06, 1 -> 02, 0 -> 00, 300 -> zigzag 600 = d8 04
    assert encode_message_indexes([1, 0, 300]) == bytes.fromhex("06 02 00 d804")
    assert unframe(frame(9, b"", [1, 0, 300]), message_indexes=True) == Framed(9, (1, 0, 300), 10)


@given(ids, st.binary(max_size=64))
def test_round_trip(schema_id: int, payload: bytes) -> None:
    value = frame(schema_id, payload)
    framed = unframe(value)
    assert framed == Framed(schema_id, None, 5)
    assert value[framed.payload_offset :] == payload


@given(ids, index_paths, st.binary(max_size=64))
def test_round_trip_with_message_indexes(schema_id: int, indexes: list[int], payload: bytes) -> None:
    value = frame(schema_id, payload, indexes)
    framed = unframe(value, message_indexes=True)
    assert (framed.schema_id, framed.message_indexes) == (schema_id, tuple(indexes))
    assert value[framed.payload_offset :] == payload


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"", "value shorter than 5 bytes (0)"),
        (b"\x00\x00\x00\x01", "value shorter than 5 bytes (4)"),
        (b'{"id": 1}', "wrong magic byte 0x7b"),
        (b"\x02\x00\x00\x00\x01x", "wrong magic byte 0x02"),
        (b"\x01" + bytes(16) + b"x", "unsupported magic byte 0x01 (a schema GUID instead of an id)"),
    ],
)
def test_malformed_frames(value: bytes, reason: str) -> None:
    with pytest.raises(WireFormatError) as caught:
        unframe(value)
    assert str(caught.value).startswith(reason)
    assert isinstance(caught.value, SchemaError)


@pytest.mark.parametrize(
    ("indexes", "reason"),
    [
        ("", "invalid message index: the value ends inside a varint"),
        ("80", "invalid message index: the value ends inside a varint"),
        ("04 02", "invalid message index: the value ends inside a varint"),  # count 2, one index
        ("ffffffffff01", "invalid message index: a varint longer than 5 bytes"),
        ("01", "invalid message index count -1"),
        ("c29a0c", "invalid message index count 100001"),  # zigzag of 100_001 is 200_002 = c2 9a 0c
        ("0201", "invalid message index -1 (negative)"),
    ],
)
def test_malformed_message_indexes(indexes: str, reason: str) -> None:
    with pytest.raises(WireFormatError) as caught:
        unframe(bytes.fromhex("00 00000003" + indexes), message_indexes=True)
    assert str(caught.value).startswith(reason)


def test_a_count_at_the_limit_is_read() -> None:
    # 100_000 indexes of 0 are allowed (and rare); one more is refused above
    value = frame(1, b"", [0, *([1] * 99_999)])
    assert len(unframe(value, message_indexes=True).message_indexes or ()) == 100_000


@pytest.mark.parametrize(("schema_id", "indexes"), [(-1, None), (MAX_SCHEMA_ID + 1, None), (1, []), (1, [-1])])
def test_frame_refuses_what_cannot_be_written(schema_id: int, indexes: list[int] | None) -> None:
    with pytest.raises(WireFormatError):
        frame(schema_id, b"", indexes)


@given(
    st.lists(
        st.one_of(
            st.builds(frame, ids, st.binary(max_size=8)),
            st.binary(max_size=8),
            st.none(),
        ),
        max_size=20,
    )
)
def test_schema_ids_of_a_chunk_agree_with_unframe(values: list[bytes | None]) -> None:
    found, bad = schema_ids(values)
    expected_bad = []
    for i, value in enumerate(values):
        if value is None:
            expected_bad.append((i, "the message has no value (null)"))
            assert found[i] == -1
            continue
        try:
            assert found[i] == unframe(value).schema_id
        except WireFormatError as exc:
            expected_bad.append((i, str(exc)))
            assert found[i] == -1
    assert bad == expected_bad


def test_schema_ids_fast_path() -> None:
    values = [frame(7, b"a"), frame(MAX_SCHEMA_ID, b""), b"\x05" + bytes(4), frame(1, b"xyz")]
    found, bad = schema_ids(values)
    assert found == [7, MAX_SCHEMA_ID, -1, 1]
    assert bad == [(2, "wrong magic byte 0x05")]
    assert schema_ids([]) == ([], [])
