"""A run's Protobuf schemas read from a registry (pipelines.schemas.resolved, decoder.format
protobuf): the reader message chosen, its columns, the schemas shipped to the tasks, and the
versions that refuse the run before anything loads. The registry is kafkalog's own, served from
the test process (tests.support.registry_in_process)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipelines.config.pipeline import Decoder, Registry
from pipelines.errors import PayloadSchemaError
from pipelines.schemas.resolved import RunSchemas, check_columns, resolve_schemas
from tests.support.registry_in_process import LocalRegistry

pytestmark = pytest.mark.integration

V1 = 'syntax = "proto3"; package shop; message Other { string x = 1; } message Order { int64 id = 1; int32 qty = 2; }'
V2 = (
    'syntax = "proto3"; package shop; message Other { string x = 1; } '
    "message Order { int64 id = 1; int32 qty = 2; optional string note = 3; }"
)


def decoder(url: str, **registry: object) -> Decoder:
    return Decoder(format="protobuf", registry=Registry(urls=(url,), **registry))  # type: ignore[arg-type]


def test_the_reader_is_the_latest_version_read_as_the_named_message_or_the_first() -> None:
    with LocalRegistry() as sr:
        ids = [sr.register("t-value", v, "PROTOBUF") for v in (V1, V2)]
        schemas = resolve_schemas(decoder(sr.url, record="shop.Order"), ["t"])
        assert schemas is not None
        value = schemas.value_for("t")
        assert (value.schema_type, value.reader_version, value.reader_id, value.message) == (
            "PROTOBUF", 2, ids[1], "shop.Order",
        )  # fmt: skip
        assert set(value.writers) == set(ids)
        assert RunSchemas.from_json(schemas.to_json()) == schemas  # what the tasks get
        columns = check_columns(decoder(sr.url, record="shop.Order"), schemas, None)
        assert columns == pa.schema([("id", pa.int64()), ("qty", pa.int32()), ("note", pa.string())])
        first = resolve_schemas(decoder(sr.url), ["t"])
        assert first is not None and first.value_for("t").message is None
        assert check_columns(decoder(sr.url), first, None) == pa.schema([("x", pa.string())])


def test_the_record_strategy_names_the_subject_and_the_message() -> None:
    with LocalRegistry() as sr:
        sr.register("shop.Order", V1, "PROTOBUF")
        schemas = resolve_schemas(decoder(sr.url, subject_strategy="record", record="shop.Order"), ["a", "b"])
        assert schemas is not None
        assert {t: (s.subject, s.message) for t, s in schemas.values.items()} == {
            "a": ("shop.Order", "shop.Order"),
            "b": ("shop.Order", "shop.Order"),
        }


@pytest.mark.parametrize(
    ("versions", "registry", "expected"),
    [
        (
            [V1.replace("int32 qty = 2", "string qty = 2"), V1],
            {"record": "shop.Order"},
            "subject t-value: records written with version 1 (id 1) cannot be read into version 2 (id 2), the run's "
            'reader schema: {errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path '
            "'#/Order/2' in the new schema does not match its kind in the old schema\"}",
        ),
        (
            ['syntax = "proto3"; message Order { strin id = 1; }', V1],
            {},
            "subject t-value version 1 is not a Protobuf schema protoc compiles: schema.proto:1:36: "
            '"strin" is not defined.',
        ),
        ([V1], {"record": "shop.Nope"}, "subject t-value version 1 (id 1) (topic t): no message 'shop.Nope'"),
        (
            ['syntax = "proto3"; message Node { Node next = 1; }'],
            {},
            "subject t-value version 1 (id 1) (topic t): message Node contains itself (Node → Node)",
        ),
    ],
)
def test_versions_that_cannot_be_read_refuse_the_run_before_anything_loads(
    versions: list[str], registry: dict[str, object], expected: str
) -> None:
    with LocalRegistry() as sr:
        for number, text in enumerate(versions, start=1):
            if "strin " in text:  # not a schema the registry takes: one another registry left in the topic
                sr.write_record("t-value", number, number, text, "PROTOBUF")
            else:  # registered at level NONE: what a user does to force a change through
                sr.register("t-value", text, "PROTOBUF", compatibility="NONE")
        with pytest.raises(PayloadSchemaError) as caught:
            resolve_schemas(decoder(sr.url, **registry), ["t"])
    assert str(caught.value).startswith(expected), str(caught.value)
