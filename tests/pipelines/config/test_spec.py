"""The pipeline spec: a full YAML round trip, and every refusal naming ``file:key.path``.

The spec is checked once, when the file is loaded; these tests pin down both what a valid file
becomes (typed, frozen dataclasses with their defaults) and what each kind of mistake reports:
duplicate keys (with their line), unknown keys, wrong types, missing keys, invalid values, and
``${env:NAME}`` references (whose values must never be echoed in an error).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.config.pipeline import (
    BadRecords,
    CsvOptions,
    Decoder,
    EventTime,
    Limits,
    PipelineSpec,
    RawLayer,
    Source,
    load_spec,
)
from pipelines.errors import PipelineError, SpecError

FULL_CSV = """\
name: clicks_raw.v2-eu
description: Click events from the EU web shop
source:
  bootstrap: [broker-1.example:9092, "10.0.0.2:9093"]
  broker_version: "0.9"
  request_timeout_ms: 5000
  fetch_max_bytes: 1048576
  retry_ms: 1500
topics: [clicks, views]
decoder:
  format: csv
  schema:
    user: string
    clicks: long
    shard: int
    amount: double
    ratio: float
    active: boolean
    seen_at: timestamp
    blob: binary
    ts: string
  required: [user, ts]
  csv:
    delimiter: ";"
    quote: "'"
event_time:
  field: ts
  format: "%Y-%m-%d %H:%M:%S"
  timezone: Asia/Tokyo
raw:
  path: hdfs://namenode:8020/raw/clicks
  format: parquet
  compression: zstd
  webhdfs_url: http://namenode:9870
limits:
  max_messages_per_split: 100000
  max_bytes_per_split: 67108864
on_offset_out_of_range: earliest
new_split_start: latest
bad_records:
  policy: quarantine
  max_share: 0.05
"""

FULL_CSV_SPEC = PipelineSpec(
    name="clicks_raw.v2-eu",
    description="Click events from the EU web shop",
    source=Source(
        bootstrap=("broker-1.example:9092", "10.0.0.2:9093"),
        broker_version="0.9",
        request_timeout_ms=5000,
        fetch_max_bytes=1048576,
        retry_ms=1500,
    ),
    topics=("clicks", "views"),
    decoder=Decoder(
        format="csv",
        schema={
            "user": "string",
            "clicks": "long",
            "shard": "int",
            "amount": "double",
            "ratio": "float",
            "active": "boolean",
            "seen_at": "timestamp",
            "blob": "binary",
            "ts": "string",
        },
        required=("user", "ts"),
        csv=CsvOptions(delimiter=";", quote="'"),
    ),
    event_time=EventTime(field="ts", format="%Y-%m-%d %H:%M:%S", timezone="Asia/Tokyo"),
    raw=RawLayer(
        path="hdfs://namenode:8020/raw/clicks",
        format="parquet",
        compression="zstd",
        webhdfs_url="http://namenode:9870",
    ),
    limits=Limits(max_messages_per_split=100000, max_bytes_per_split=67108864),
    on_offset_out_of_range="earliest",
    new_split_start="latest",
    bad_records=BadRecords(policy="quarantine", max_share=0.05),
)


def base() -> dict[str, Any]:
    """A small valid spec as plain data (each test mutates its own copy)."""
    return {
        "name": "events_raw",
        "source": {"bootstrap": "localhost:9092"},
        "topics": ["events"],
        "decoder": {"format": "json", "schema": {"user_id": "long", "event": "string", "ts": "string"}},
        "event_time": {"field": "ts"},
        "raw": {"path": "/data/raw/events"},
    }


def put(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``data`` with the dotted ``path`` set to ``value`` (intermediate mappings created)."""
    out = copy.deepcopy(data)
    *parents, last = path.split(".")
    node = out
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return out


def drop(data: dict[str, Any], path: str) -> dict[str, Any]:
    """A copy of ``data`` without the dotted ``path``."""
    out = copy.deepcopy(data)
    *parents, last = path.split(".")
    node = out
    for part in parents:
        node = node[part]
    del node[last]
    return out


def write(tmp_path: Path, content: str | dict[str, Any] | bytes, name: str = "pipeline.yaml") -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(content, sort_keys=False), encoding="utf-8")
    return path


def load(tmp_path: Path, content: str | dict[str, Any]) -> PipelineSpec:
    return load_spec(write(tmp_path, content))


def error(tmp_path: Path, content: str | dict[str, Any] | bytes) -> str:
    """The SpecError of loading ``content``, checked to start with the file name; returns the rest
    (which starts with the key path)."""
    path = write(tmp_path, content)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert message.startswith(f"{path}:"), message
    return message[len(str(path)) + 1 :]


# ---------------------------------------------------------------------------------------------
# valid files


def test_full_csv_spec_round_trip(tmp_path: Path) -> None:
    spec = load(tmp_path, FULL_CSV)
    assert spec == FULL_CSV_SPEC
    # the YAML order of the schema is the column order
    assert list(spec.decoder.schema) == [
        "user",
        "clicks",
        "shard",
        "amount",
        "ratio",
        "active",
        "seen_at",
        "blob",
        "ts",
    ]
    assert isinstance(spec.topics, tuple)
    assert isinstance(spec.decoder.required, tuple)
    assert isinstance(spec.bad_records.max_share, float)


def test_json_spec_with_topic_pattern_and_bootstrap_string(tmp_path: Path) -> None:
    text = """\
name: orders
source:
  bootstrap: "kafka-a:9092, kafka-b:9093,kafka-c:9094"
topic_pattern: "orders\\\\..*"
decoder:
  format: json
  schema: {order_id: long, placed_at: timestamp, total: double}
  required: order_id
event_time:
  field: placed_at
raw:
  path: /data/raw/orders
"""
    spec = load(tmp_path, text)
    assert spec.source.bootstrap == ("kafka-a:9092", "kafka-b:9093", "kafka-c:9094")
    assert spec.topics == ()
    assert spec.topic_pattern == r"orders\..*"
    assert spec.decoder == Decoder(
        format="json", schema={"order_id": "long", "placed_at": "timestamp", "total": "double"}, required=("order_id",)
    )
    assert spec.event_time == EventTime(field="placed_at", format="iso8601", timezone="UTC")


def test_raw_decoder_spec_and_defaults(tmp_path: Path) -> None:
    spec = load(
        tmp_path,
        {
            "name": "blobs",
            "source": {"bootstrap": ["h:1"]},
            "topics": "blobs",  # a single string is a one-topic list
            "decoder": {"format": "raw"},
            "raw": {"path": "file:///tmp/raw"},
        },
    )
    assert spec.topics == ("blobs",)
    assert spec.decoder == Decoder(format="raw", schema={}, required=(), csv=CsvOptions())
    assert spec.source == Source(bootstrap=("h:1",))
    assert spec.source.broker_version is None
    assert spec.source.request_timeout_ms == 30_000
    assert spec.source.fetch_max_bytes == 4 * 1024 * 1024
    assert spec.source.retry_ms == 60_000
    assert spec.event_time == EventTime(field=None, format="iso8601", timezone="UTC")
    assert spec.raw == RawLayer(path="file:///tmp/raw", format="parquet", compression="snappy", webhdfs_url=None)
    assert spec.limits == Limits(None, None)
    assert spec.on_offset_out_of_range == "fail"
    assert spec.new_split_start == "earliest"
    assert spec.bad_records == BadRecords(policy="fail", max_share=0.01)
    assert spec.description == ""
    assert spec.topic_pattern is None


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("event_time.format", "epoch_millis"),
        ("event_time.format", "epoch_seconds"),
        ("event_time.format", "%d/%m/%Y"),
        ("event_time.timezone", "America/New_York"),
        ("bad_records.max_share", 0),
        ("bad_records.max_share", 1),
        ("bad_records.max_share", 0.5),
        ("raw.compression", "none"),
        ("raw.compression", "gzip"),
        ("on_offset_out_of_range", "latest"),
        ("source.broker_version", None),
        ("topic_pattern", None),
        ("limits.max_messages_per_split", None),
        ("limits.max_bytes_per_split", 1),
        ("description", ""),
    ],
)
def test_other_valid_values(tmp_path: Path, path: str, value: Any) -> None:
    data = base()
    if path == "event_time.format" and value.startswith("epoch"):
        data = put(data, "decoder.schema.ts", "long")
    spec = load(tmp_path, put(data, path, value))
    node: Any = spec
    for part in path.split("."):
        node = getattr(node, part)
    assert node == value


def test_event_time_field_may_be_any_time_holding_type(tmp_path: Path) -> None:
    for kind, fmt in [
        ("string", "iso8601"),
        ("timestamp", "iso8601"),
        ("long", "epoch_millis"),
        ("int", "epoch_seconds"),
        ("double", "epoch_seconds"),
    ]:
        data = put(put(base(), "decoder.schema.ts", kind), "event_time.format", fmt)
        assert load(tmp_path, data).event_time.field == "ts"


def test_spec_is_frozen(tmp_path: Path) -> None:
    spec = load(tmp_path, base())
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.source.retry_ms = 1  # type: ignore[misc]


def test_spec_error_is_a_pipeline_error() -> None:
    assert issubclass(SpecError, PipelineError)


def test_yaml_anchors_and_aliases(tmp_path: Path) -> None:
    text = """\
name: p
source: {bootstrap: &broker "a:1"}
topics: [t]
decoder:
  format: json
  schema: {a: &kind long, b: *kind}
raw:
  path: /r
description: *broker
"""
    spec = load(tmp_path, text)
    assert spec.decoder.schema == {"a": "long", "b": "long"}
    assert spec.description == "a:1"


def test_yaml_merge_keys(tmp_path: Path) -> None:
    text = """\
name: p
source:
  <<: &defaults {bootstrap: "a:1", retry_ms: 7, request_timeout_ms: 9}
  retry_ms: 5
topics: [t]
decoder: {format: raw}
raw: {path: /r}
"""
    spec = load(tmp_path, text)
    assert (spec.source.bootstrap, spec.source.retry_ms, spec.source.request_timeout_ms) == (("a:1",), 5, 9)


# ---------------------------------------------------------------------------------------------
# duplicate and unknown keys


def test_duplicate_top_level_key_names_file_line_and_key(tmp_path: Path) -> None:
    text = "name: a\nsource: {bootstrap: 'a:1'}\nname: b\n"
    message = error(tmp_path, text)
    assert message.startswith("line 3: duplicate key 'name'"), message


def test_duplicate_nested_key_names_its_line(tmp_path: Path) -> None:
    text = """\
name: p
source:
  bootstrap: "a:1"
  retry_ms: 5
  retry_ms: 6
topics: [t]
decoder: {format: raw}
raw: {path: /r}
"""
    message = error(tmp_path, text)
    assert message.startswith("line 5: duplicate key 'retry_ms'"), message


def test_duplicate_schema_field_in_flow_mapping(tmp_path: Path) -> None:
    text = "name: p\ndecoder: {format: json, schema: {a: long, a: string}}\n"
    message = error(tmp_path, text)
    assert message.startswith("line 2: duplicate key 'a'"), message


@pytest.mark.parametrize(
    ("path", "key_path"),
    [
        ("shema", "shema"),
        ("decoder.shema", "decoder.shema"),
        ("source.bootstrap_servers", "source.bootstrap_servers"),
        ("decoder.csv.escape", "decoder.csv.escape"),
        ("event_time.zone", "event_time.zone"),
        ("raw.partitioning", "raw.partitioning"),
        ("limits.max_rows", "limits.max_rows"),
        ("bad_records.max_count", "bad_records.max_count"),
    ],
)
def test_unknown_key_names_its_path(tmp_path: Path, path: str, key_path: str) -> None:
    message = error(tmp_path, put(base(), path, 1))
    assert message.startswith(f"{key_path}: unknown key"), message
    assert "known:" in message


def test_unknown_key_suggests_the_closest_and_lists_the_known_ones(tmp_path: Path) -> None:
    message = error(tmp_path, put(base(), "decoder.shema", {"a": "long"}))
    known = "csv, format, framed, key_decoder, registry, required, schema, schema_file"
    expected = f"decoder.shema: unknown key (did you mean 'schema'? known: {known})"
    assert message.startswith(expected), message
    message = error(tmp_path, put(base(), "decoder.zzz", 1))
    assert message.startswith(
        "decoder.zzz: unknown key (known: csv, format, framed, key_decoder, registry, required, schema, schema_file)"
    ), message


def test_non_string_keys_are_refused(tmp_path: Path) -> None:
    assert "keys must be strings, got 1" in error(tmp_path, "name: p\n1: x\n")
    data = base()
    data["decoder"][7] = "x"
    message = error(tmp_path, data)
    assert message.startswith("decoder: keys must be strings, got 7"), message


def test_unhashable_yaml_key_is_a_spec_error(tmp_path: Path) -> None:
    message = error(tmp_path, "{[a, b]: 1}\n")
    assert message


# ---------------------------------------------------------------------------------------------
# wrong types, missing keys, invalid values


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("source.retry_ms", "10", "source.retry_ms: expected an integer, got '10'"),
        ("source.retry_ms", True, "source.retry_ms: expected an integer, got True"),
        ("source.retry_ms", 1.5, "source.retry_ms: expected an integer, got 1.5"),
        ("source.request_timeout_ms", None, "source.request_timeout_ms: expected an integer, got None"),
        ("limits.max_messages_per_split", "5", "limits.max_messages_per_split: expected an integer, got '5'"),
        ("limits.max_bytes_per_split", False, "limits.max_bytes_per_split: expected an integer, got False"),
        ("name", 5, "name: expected a string, got 5"),
        ("raw.path", 5, "raw.path: expected a string, got 5"),
        ("description", 1.5, "description: expected a string, got 1.5"),
        ("event_time.timezone", 9, "event_time.timezone: expected a string, got 9"),
        ("event_time.field", True, "event_time.field: expected a string, got True"),
        ("decoder.schema.event", 5, "decoder.schema.event: expected a string, got 5"),
        ("bad_records.max_share", "0.1", "bad_records.max_share: expected a number, got '0.1'"),
        ("bad_records.max_share", True, "bad_records.max_share: expected a number, got True"),
        ("source.bootstrap", 9092, "source.bootstrap: expected a list, got int"),
        ("source.bootstrap", [9092], "source.bootstrap[0]: expected a string, got 9092"),
        ("topics", {"a": 1}, "topics: expected a list, got dict"),
        ("topics", ["ok", 5], "topics[1]: expected a string, got 5"),
        ("decoder.required", 5, "decoder.required: expected a list, got int"),
        ("decoder.schema", ["a", "b"], "decoder.schema: expected a mapping, got list"),
        ("decoder", "json", "decoder: expected a mapping, got str"),
        ("limits", None, "limits: expected a mapping, got NoneType"),
        ("decoder.csv", ";", "decoder.csv: expected a mapping, got str"),
    ],
)
def test_wrong_type_names_key_and_value(tmp_path: Path, path: str, value: Any, expected: str) -> None:
    message = error(tmp_path, put(base(), path, value))
    assert message.startswith(expected), message


@pytest.mark.parametrize(
    "path",
    ["name", "source", "raw", "decoder", "source.bootstrap", "raw.path", "decoder.format"],
)
def test_missing_required_key(tmp_path: Path, path: str) -> None:
    message = error(tmp_path, drop(base(), path))
    assert message.startswith(f"{path}: required key is missing"), message


@pytest.mark.parametrize(
    ("path", "value", "allowed"),
    [
        ("on_offset_out_of_range", "sometimes", "fail, earliest, latest"),
        ("new_split_start", "middle", "earliest, latest"),
        ("decoder.format", "xml", "json, csv, raw, avro, protobuf, json_schema, connect_json"),
        ("bad_records.policy", "drop", "fail, quarantine"),
        ("raw.compression", "lz4", "snappy, zstd, gzip, none"),
        ("raw.format", "orc", "parquet"),
    ],
)
def test_invalid_literal_value(tmp_path: Path, path: str, value: Any, allowed: str) -> None:
    message = error(tmp_path, put(base(), path, value))
    assert message.startswith(f"{path}: must be one of {allowed}, not {value!r}"), message


@pytest.mark.parametrize("given", ["0.9", 0.9, "0.9.0.1"])
def test_broker_version_0_9_in_any_spelling(tmp_path: Path, given: Any) -> None:
    assert load(tmp_path, put(base(), "source.broker_version", given)).source.broker_version == "0.9"


@pytest.mark.parametrize("given", ["4.3", 4.3, "0.10", "3.9.1", "1"])
def test_a_newer_broker_version_is_refused_with_what_to_do(tmp_path: Path, given: Any) -> None:
    """Kafka 4.x users write the version they run; it would only be ignored (versions are asked)."""
    message = error(tmp_path, put(base(), "source.broker_version", given))
    assert message.startswith(f"source.broker_version: leave it out for Kafka {given}: brokers from 0.10 on"), message


@pytest.mark.parametrize("given", ["0.8", "latest", ""])
def test_a_broker_version_that_is_no_version_is_refused(tmp_path: Path, given: str) -> None:
    message = error(tmp_path, put(base(), "source.broker_version", given))
    assert message.startswith('source.broker_version: must be "0.9" (for Apache Kafka 0.9) or left out'), message


def test_a_kafka_listener_as_bootstrap_is_taken_as_its_address(tmp_path: Path) -> None:
    """``PLAINTEXT://host:9092``, copied from a broker's ``listeners``, is the address after ``//``."""
    spec = load(tmp_path, put(base(), "source.bootstrap", "PLAINTEXT://kafka-a:9092,plaintext://kafka-b:9093"))
    assert spec.source.bootstrap == ("kafka-a:9092", "kafka-b:9093")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("SSL://kafka-a:9093", "bootstrap[0]: 'SSL://kafka-a:9093' is a SSL listener, but this source's security"),
        ("http://kafka-a:9092", "bootstrap[0]: 'http://kafka-a:9092' is not host:port (a listener is taken only"),
        ("INTERNAL://kafka-a:9092", "bootstrap[0]: 'INTERNAL://kafka-a:9092' is not host:port (a listener is"),
        ("PLAINTEXT://", "bootstrap[0]: '' is not host:port"),
        ("PLAINTEXT://a/b:1", "bootstrap[0]: 'a/b:1' is not host:port"),
    ],
)
def test_a_listener_of_another_protocol_or_scheme_is_refused(tmp_path: Path, given: str, expected: str) -> None:
    message = error(tmp_path, put(base(), "source.bootstrap", given))
    assert message.startswith(f"source.{expected}"), message


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("name", "events raw", "name: letters, digits"),
        ("name", "", "name: letters, digits"),
        ("source.retry_ms", 0, "source.retry_ms: must be positive"),
        ("source.request_timeout_ms", -5, "source.request_timeout_ms: must be positive"),
        ("source.fetch_max_bytes", 0, "source.fetch_max_bytes: must be positive"),
        ("limits.max_messages_per_split", 0, "limits.max_messages_per_split: must be positive"),
        ("limits.max_bytes_per_split", -1, "limits.max_bytes_per_split: must be positive"),
        ("raw.path", "", "raw.path: must not be empty"),
        ("decoder.csv.delimiter", ";;", "decoder.csv.delimiter: must be one character"),
        ("decoder.csv.quote", "", "decoder.csv.quote: must be one character"),
        ("decoder.csv.delimiter", "é", "decoder.csv.delimiter: must be an ASCII character, not 'é'"),
        ("event_time.format", "yyyy-MM-dd", "event_time.format: must be iso8601, epoch_millis, epoch_seconds"),
        ("event_time.timezone", "Mars/Olympus_Mons", "event_time.timezone: unknown time zone 'Mars/Olympus_Mons'"),
        ("event_time.timezone", "../../etc/passwd", "event_time.timezone: unknown time zone"),
        ("event_time.timezone", "", "event_time.timezone: unknown time zone"),
        ("bad_records.max_share", 1.5, "bad_records.max_share: must be between 0 and 1"),
        ("bad_records.max_share", -0.1, "bad_records.max_share: must be between 0 and 1"),
        ("bad_records.max_share", float("nan"), "bad_records.max_share: must be between 0 and 1"),
        ("bad_records.max_share", float("inf"), "bad_records.max_share: must be between 0 and 1"),
    ],
)
def test_invalid_value_names_key(tmp_path: Path, path: str, value: Any, expected: str) -> None:
    message = error(tmp_path, put(base(), path, value))
    assert message.startswith(expected), message


def test_both_topics_and_topic_pattern(tmp_path: Path) -> None:
    message = error(tmp_path, put(base(), "topic_pattern", "events.*"))
    assert message.startswith("topics: give either topics or topic_pattern (exactly one)"), message


@pytest.mark.parametrize("topics", [None, []])
def test_neither_topics_nor_topic_pattern(tmp_path: Path, topics: list[str] | None) -> None:
    data = drop(base(), "topics") if topics is None else put(base(), "topics", topics)
    message = error(tmp_path, data)
    assert message.startswith("topics: give either topics or topic_pattern (exactly one)"), message


@pytest.mark.parametrize("pattern", ["events[", "(unclosed", "*start", "a{1,2"])
def test_invalid_topic_pattern(tmp_path: Path, pattern: str) -> None:
    data = put(drop(base(), "topics"), "topic_pattern", pattern)
    if pattern == "a{1,2":  # Python reads an unterminated {m,n} literally: a valid pattern
        assert load(tmp_path, data).topic_pattern == pattern
        return
    message = error(tmp_path, data)
    assert message.startswith("topic_pattern: not a valid regular expression"), message


@pytest.mark.parametrize(
    ("bootstrap", "index", "item"),
    [
        (["a:1", "nope"], 1, "nope"),
        (["a:1", "b:2", "c:port"], 2, "c:port"),
        ("a:1,b", 1, "b"),
        ("a:1, :9092", 1, ":9092"),
        ("host:", 0, "host:"),
        (["a:1", "b:-1"], 1, "b:-1"),
    ],
)
def test_bad_bootstrap_entry_names_its_index(tmp_path: Path, bootstrap: Any, index: int, item: str) -> None:
    message = error(tmp_path, put(base(), "source.bootstrap", bootstrap))
    assert message.startswith(f"source.bootstrap[{index}]: {item!r} is not host:port"), message


@pytest.mark.parametrize("bootstrap", [[], "", " , ", [""]])
def test_empty_bootstrap(tmp_path: Path, bootstrap: Any) -> None:
    message = error(tmp_path, put(base(), "source.bootstrap", bootstrap))
    assert message.startswith("source.bootstrap: at least one host:port is needed"), message


def test_bootstrap_ipv6_and_list_items_with_commas(tmp_path: Path) -> None:
    spec = load(tmp_path, put(base(), "source.bootstrap", ["[::1]:9092", "a:1,b:2"]))
    assert spec.source.bootstrap == ("[::1]:9092", "a:1", "b:2")


def test_bad_bootstrap_index_refers_to_the_yaml_list(tmp_path: Path) -> None:
    message = error(tmp_path, put(base(), "source.bootstrap", ["a:1,b:2", "nope"]))
    assert message.startswith("source.bootstrap[1]:"), message


@pytest.mark.parametrize("kind", ["integer", "str", "LONG", "timestamp[us]", "decimal", ""])
def test_unknown_field_type(tmp_path: Path, kind: str) -> None:
    message = error(tmp_path, put(base(), "decoder.schema.event", kind))
    assert message.startswith("decoder.schema.event: type must be one of string, long, int"), message
    assert f"not {kind!r}" in message


@pytest.mark.parametrize(
    "name",
    [
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
    ],
)
def test_field_name_clashing_with_row_columns(tmp_path: Path, name: str) -> None:
    message = error(tmp_path, put(base(), f"decoder.schema.{name}", "string"))
    assert message.startswith(f"decoder.schema.{name}: clashes with a column every raw row has"), message


@pytest.mark.parametrize("name", ["Offset", "DT", "Value", "Headers", "Tombstone"])
def test_field_name_clashing_with_row_columns_in_another_case(tmp_path: Path, name: str) -> None:
    message = error(tmp_path, put(base(), f"decoder.schema.{name}", "string"))
    assert message.startswith(f"decoder.schema.{name}:"), message


@pytest.mark.parametrize("name", ["1st", "has space", "dash-ed", "dot.ted", "é"])
def test_field_name_must_be_an_identifier(tmp_path: Path, name: str) -> None:
    data = base()
    data["decoder"]["schema"] = {name: "string", "ts": "string"}
    message = error(tmp_path, data)
    assert message.startswith(f"decoder.schema.{name}: a field name must be letters, digits and _"), message


def test_required_must_name_a_field(tmp_path: Path) -> None:
    message = error(tmp_path, put(base(), "decoder.required", ["user_id", "usr"]))
    assert message.startswith("decoder.required[1]: 'usr' is not a field of the schema"), message
    message = error(tmp_path, put(base(), "decoder.required", "nope"))
    assert message.startswith("decoder.required[0]: 'nope' is not a field of the schema"), message


def test_event_time_field_not_in_schema(tmp_path: Path) -> None:
    message = error(tmp_path, put(base(), "event_time.field", "created"))
    assert message.startswith("event_time.field: 'created' is not a field of decoder.schema"), message


@pytest.mark.parametrize("kind", ["boolean", "binary", "float"])
def test_event_time_field_of_a_type_that_cannot_hold_a_time(tmp_path: Path, kind: str) -> None:
    message = error(tmp_path, put(base(), "decoder.schema.ts", kind))
    assert message.startswith(f"event_time.field: 'ts' is a {kind}: it cannot hold a time"), message


def test_event_time_field_with_raw_decoder(tmp_path: Path) -> None:
    data = put(base(), "decoder", {"format": "raw"})
    message = error(tmp_path, data)
    assert message.startswith("event_time.field: 'ts' is not a field of decoder.schema"), message


@pytest.mark.parametrize(("kind", "fmt"), [("long", "iso8601"), ("double", "%Y-%m-%d"), ("string", "epoch_millis")])
def test_event_time_format_must_suit_the_field_type(tmp_path: Path, kind: str, fmt: str) -> None:
    data = put(put(base(), "decoder.schema.ts", kind), "event_time.format", fmt)
    message = error(tmp_path, data)
    assert message.startswith("event_time."), message


def test_raw_decoder_takes_no_schema(tmp_path: Path) -> None:
    data = drop(put(base(), "decoder.format", "raw"), "event_time")
    message = error(tmp_path, data)
    assert message.startswith("decoder.schema: the raw decoder keeps the value as bytes: it takes no schema"), message


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_json_and_csv_decoders_need_a_schema(tmp_path: Path, fmt: str) -> None:
    data = drop(drop(put(base(), "decoder.format", fmt), "decoder.schema"), "event_time")
    message = error(tmp_path, data)
    assert message.startswith(f"decoder.schema: the {fmt} decoder needs a schema"), message


# ---------------------------------------------------------------------------------------------
# ${env:NAME}


def test_env_expansion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPE_TEST_BROKERS", "k1:9092,k2:9093")
    monkeypatch.setenv("PIPE_TEST_ROOT", "/mnt/lake")
    monkeypatch.setenv("PIPE_TEST_ZONE", "Europe/Paris")
    monkeypatch.setenv("PIPE_TEST_NESTED", "${env:PIPE_TEST_ROOT}")
    data = put(base(), "source.bootstrap", "${env:PIPE_TEST_BROKERS}")
    data = put(data, "raw.path", "${env:PIPE_TEST_ROOT}/raw/${env:PIPE_TEST_ZONE}")
    data = put(data, "event_time.timezone", "${env:PIPE_TEST_ZONE}")
    data = put(data, "description", "literal $PIPE_TEST_ROOT and ${PIPE_TEST_ROOT} and ${env:PIPE_TEST_NESTED}")
    data = put(data, "topics", ["${env:PIPE_TEST_ZONE}"])
    spec = load(tmp_path, data)
    assert spec.source.bootstrap == ("k1:9092", "k2:9093")
    assert spec.raw.path == "/mnt/lake/raw/Europe/Paris"
    assert spec.event_time.timezone == "Europe/Paris"
    assert spec.topics == ("Europe/Paris",)
    # only ${env:NAME} is a reference, and a value read from the environment is not expanded again
    assert spec.description == "literal $PIPE_TEST_ROOT and ${PIPE_TEST_ROOT} and ${env:PIPE_TEST_ROOT}"


def test_env_variable_set_to_empty_string(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPE_TEST_EMPTY", "")
    spec = load(tmp_path, put(base(), "description", "x${env:PIPE_TEST_EMPTY}y"))
    assert spec.description == "xy"


def test_unset_env_variable_names_key_and_variable_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-Pa55w0rd-value"
    monkeypatch.setenv("PIPE_TEST_SECRET", secret)
    monkeypatch.delenv("PIPE_TEST_UNSET", raising=False)
    data = put(base(), "raw.path", "/x/${env:PIPE_TEST_SECRET}/${env:PIPE_TEST_UNSET}")
    message = error(tmp_path, data)
    assert message == "raw.path: environment variable PIPE_TEST_UNSET is not set"
    assert secret not in message


def test_unset_env_variable_in_list_and_mapping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIPE_TEST_UNSET", raising=False)
    message = error(tmp_path, put(base(), "source.bootstrap", ["a:1", "${env:PIPE_TEST_UNSET}"]))
    assert message == "source.bootstrap[1]: environment variable PIPE_TEST_UNSET is not set"
    message = error(tmp_path, put(base(), "decoder.schema.event", "${env:PIPE_TEST_UNSET}"))
    assert message == "decoder.schema.event: environment variable PIPE_TEST_UNSET is not set"


def test_unset_env_error_never_contains_environment_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIPE_TEST_UNSET", raising=False)
    monkeypatch.setenv("PIPE_TEST_TOKEN", "tok-0123456789abcdef")
    message = error(tmp_path, put(base(), "name", "${env:PIPE_TEST_TOKEN}${env:PIPE_TEST_UNSET}"))
    assert message == "name: environment variable PIPE_TEST_UNSET is not set"
    for value in os.environ.values():
        if len(value) >= 8:  # short values (a "1", a "C") can occur in any message by chance
            assert value not in message


@pytest.mark.parametrize("path", ["source.bootstrap", "event_time.timezone", "event_time.format"])
def test_env_value_is_not_echoed_when_it_is_invalid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    secret = "hunter2-do-not-log"
    monkeypatch.setenv("PIPE_TEST_SECRET", secret)
    message = error(tmp_path, put(base(), path, "${env:PIPE_TEST_SECRET}"))
    assert message.startswith(path), message
    assert secret not in message


# ---------------------------------------------------------------------------------------------
# the file itself


@pytest.mark.parametrize("text", ["- name: p\n- raw: x\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    message = error(tmp_path, text)
    assert message == " the top level must be a mapping of keys to values"


@pytest.mark.parametrize("text", ["", "# only a comment\n", "null\n"])
def test_an_empty_file_names_the_first_required_key(tmp_path: Path, text: str) -> None:
    # an empty document is an empty mapping (a broker file may be empty: every default)
    assert error(tmp_path, text) == "name: required key is missing"


@pytest.mark.parametrize(
    "text",
    [
        "name: [unclosed\n",
        "name: p\n  bad: indent\n",
        "a: 1\n---\nb: 2\n",
        "key: 'unterminated\n",
        "\tname: p\n",
    ],
)
def test_invalid_yaml(tmp_path: Path, text: str) -> None:
    message = error(tmp_path, text)
    assert message.startswith(" not valid YAML:"), message
    # the place in the text names the file, not PyYAML's "<unicode string>"
    assert f'in "{tmp_path / "pipeline.yaml"}", line ' in message and "<unicode string>" not in message, message


def test_python_tags_are_refused_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    text = f"name: !!python/object/apply:os.system ['touch {marker}']\n"
    message = error(tmp_path, text)
    assert message.startswith(" not valid YAML:"), message
    assert not marker.exists()


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value) == f"{path}: cannot read the pipeline file: No such file or directory"


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(str(tmp_path))
    assert str(info.value).startswith(f"{tmp_path}: cannot read the pipeline file:")


def test_file_that_is_not_utf8(tmp_path: Path) -> None:
    message = error(tmp_path, "name: p\ndescription: caf\xe9\n".encode("latin-1"))
    assert message.startswith(" "), message


# ---------------------------------------------------------------------------------------------
# fingerprint


def fingerprint(tmp_path: Path, data: dict[str, Any]) -> str:
    return load(tmp_path, data).fingerprint()


def test_fingerprint_is_stable(tmp_path: Path) -> None:
    first = fingerprint(tmp_path, base())
    assert len(first) == 16
    assert int(first, 16) >= 0
    assert fingerprint(tmp_path, base()) == first
    assert load(tmp_path, FULL_CSV).fingerprint() == FULL_CSV_SPEC.fingerprint()


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("decoder.schema.event", "binary"),
        ("decoder.schema.extra", "long"),
        ("decoder.required", ["user_id"]),
        ("decoder.format", "csv"),
        ("decoder.csv.delimiter", ";"),
        ("event_time.field", None),
        ("event_time.timezone", "Asia/Tokyo"),
        ("event_time.format", "%Y-%m-%d"),
        ("raw.path", "/data/raw/other"),
        ("raw.compression", "zstd"),
    ],
)
def test_fingerprint_changes_with_what_shapes_rows(tmp_path: Path, path: str, value: Any) -> None:
    assert fingerprint(tmp_path, put(base(), path, value)) != fingerprint(tmp_path, base())


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("limits.max_messages_per_split", 1000),
        ("limits.max_bytes_per_split", 1 << 20),
        ("source.bootstrap", "other:1"),
        ("source.retry_ms", 5),
        ("topics", ["events", "more"]),
        ("bad_records.policy", "quarantine"),
        ("on_offset_out_of_range", "earliest"),
        ("new_split_start", "latest"),
        ("description", "words"),
        ("name", "renamed"),
    ],
)
def test_fingerprint_ignores_what_does_not_shape_rows(tmp_path: Path, path: str, value: Any) -> None:
    assert fingerprint(tmp_path, put(base(), path, value)) == fingerprint(tmp_path, base())


def test_fingerprint_changes_with_schema_field_order(tmp_path: Path) -> None:
    data = put(base(), "decoder.format", "csv")
    reordered = copy.deepcopy(data)
    reordered["decoder"]["schema"] = dict(reversed(list(data["decoder"]["schema"].items())))
    assert list(load(tmp_path, reordered).decoder.schema) != list(load(tmp_path, data).decoder.schema)
    assert fingerprint(tmp_path, reordered) != fingerprint(tmp_path, data)
