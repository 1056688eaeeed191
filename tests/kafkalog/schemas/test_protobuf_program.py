"""A Protobuf reader message compiled into a program (kafkalog.schemas.protobuf_program) and run by
the C kernel (or its pure-Python twin where it is not built): the program as plain data, what it
refuses, the frames the kernel leaves to its caller, and the kernel run on any buffer and in threads
at once. What the kernel decodes is held to
protobuf's own parser in tests/pipelines/executor/test_protobuf_payloads.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from kafkalog.schemas.errors import SchemaResolutionError
from kafkalog.schemas.protobuf_program import MAX_DEPTH, Kind, compile_program, decode

pytestmark = pytest.mark.unit

INT32, INT64, STRING, GROUP, MESSAGE = 5, 3, 9, 10, 11  # FieldDescriptor.TYPE_*


@dataclass(frozen=True)
class Shape:
    name: str
    number: int
    type: int
    kind: str = "scalar"
    label: str = "one"
    presence: bool = False
    children: Sequence[Shape] = ()
    oneof: int = -1
    closed: bool = False
    enum_names: Mapping[int, str] = field(default_factory=dict)


LINE = (Shape("sku", 1, STRING), Shape("qty", 2, INT32))
ORDER = (
    Shape("id", 1, INT64),
    Shape("line", 2, MESSAGE, "message", presence=True, children=LINE),
    Shape("tags", 3, MESSAGE, "message", "map", children=(Shape("key", 1, STRING), Shape("value", 2, INT64))),
    Shape("nums", 4, INT32, label="repeated"),
    Shape("ratings", 5, MESSAGE, "wrapper", "repeated", children=(Shape("value", 1, INT32),)),
)
HEADER = b"\x00\x00\x00\x00\x07\x00"  # magic byte, schema id 7, message indexes [0]
PAYLOAD = (
    b"\x08\x2a"  # id 42
    b"\x12\x05\x0a\x01s\x10\x02"  # line {sku "s", qty 2}
    b"\x1a\x05\x0a\x01k\x10\x01"  # tags {"k": 1}
    b"\x22\x02\x01\x02"  # nums [1, 2], packed
    b"\x2a\x02\x08\x09\x2a\x00"  # ratings [9, 0]
)


def test_a_program_is_plain_data_and_its_columns_are_in_tree_order() -> None:
    program = compile_program(ORDER)
    assert all(type(i) is int for i in program.code)
    assert program.columns == (
        (Kind.STRUCT, -1),
        (Kind.INT64, 0),  # id
        (Kind.STRUCT, 0), (Kind.BINARY, 2), (Kind.INT32, 2),  # line
        (Kind.MAP, 0), (Kind.BINARY, 5), (Kind.INT64, 5),  # tags
        (Kind.LIST, 0), (Kind.INT32, 8),  # nums
        (Kind.LIST, 0), (Kind.INT32, 10),  # ratings: each element its wrapper's value
    )  # fmt: skip


def test_what_the_kernel_does_not_read_is_refused_when_compiled() -> None:
    with pytest.raises(SchemaResolutionError, match="field g is a proto2 group"):
        compile_program((Shape("g", 1, GROUP, "message", children=LINE),))
    deep: tuple[Shape, ...] = (Shape("x", 1, INT32),)
    for _ in range(MAX_DEPTH + 1):
        deep = (Shape("m", 1, MESSAGE, "message", presence=True, children=deep),)
    with pytest.raises(SchemaResolutionError, match="nested more than"):
        compile_program(deep)


def test_values_of_other_frames_are_left_to_the_caller() -> None:
    program = compile_program(ORDER)
    other = b"\x00\x00\x00\x00\x08\x00" + PAYLOAD
    values: list[bytes | None] = [HEADER + PAYLOAD, None, other, b"\x00", HEADER + b"\x08", HEADER + PAYLOAD]
    columns, bad, others = decode(values, HEADER, program)
    assert others == [1, 2, 3]
    assert bad == [(4, "truncated varint at byte 7")]
    assert columns[0][0] == 2 and columns[1][0] == 2  # two rows, the bad one rolled back
    assert columns[9][0] == 4 and columns[11][0] == 4  # nums and ratings: two items a row


def test_the_kernel_takes_any_buffer_and_decodes_chunks_in_threads_at_once() -> None:
    program = compile_program(ORDER)
    values = [HEADER + PAYLOAD[:cut] for cut in range(len(PAYLOAD) + 1)] * 50
    expected = decode(values, HEADER, program)
    as_views: list[bytes | None] = [memoryview(bytearray(v)) for v in values]  # type: ignore[misc]
    assert decode(as_views, HEADER, program) == expected
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: decode(values, HEADER, program), range(8)))
    assert all(r == expected for r in results)
