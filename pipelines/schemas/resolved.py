"""A run's schemas: read once on the driver, shipped to every task as data.

Role: for each topic of a run, the schema its values are read into (the reader schema: the
subject's latest version, or the pinned ``decoder.registry.version``, or the version a replayed run
used) and every schema its values may have been written with (every version of the subject, soft-
deleted ones too, by global id), plus the same for keys with an avro ``key_decoder``. A schema
file's (avro without a registry, connect_json's ``schema_file``) is read here too, so executors
need no access to the file. The whole is a frozen value that serialises to JSON: the tasks get it
in their options (pipelines.ingest.stage) and never ask the registry; a value written with an id
that is not here is quarantined as ``unknown schema id N``.

Also checked here, once, before anything loads: the schemas are of the decoder's type, parse, map
to columns (pipelines.schemas.columns), give every topic the same columns (one raw table), hold the
``required`` fields and an ``event_time.field`` that can carry a time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from kafkalog.schemas import avro
from kafkalog.schemas.errors import SchemaError
from pipelines.config.pipeline import Decoder, EventTime, PipelineSpec, Registry
from pipelines.errors import PayloadSchemaError
from pipelines.schemas.columns import (
    UTC_MICROS,
    avro_columns,
    connect_columns,
    declared_connect_schema,
    endless_array,
    json_schema_columns,
)
from pipelines.schemas.registry_client import RegisteredSchema, RegistryClient

_TYPE_OF_FORMAT = {"avro": "AVRO", "json_schema": "JSON", "protobuf": "PROTOBUF"}
MAX_VERSIONS = 10_000
"""More versions than a subject has in practice: each is one request, so a registry answering more
is refused rather than asked that many times."""


@dataclass(frozen=True, slots=True)
class SubjectSchemas:
    """The schemas one topic's values (or keys) are read with."""

    schema_type: str
    """AVRO, JSON (JSON Schema) or CONNECT (a Connect schema)."""
    reader: str
    """The reader schema's text: the raw layer's columns come from it."""
    subject: str | None = None
    """The registry subject (None: a schema file's, or a declared one)."""
    reader_version: int | None = None
    reader_id: int | None = None
    writers: Mapping[int, str] = field(default_factory=dict)
    """Every schema id of the subject → the schema text values framed with it were written with."""
    any_id: bool = False
    """A schema file's: every value is read with ``reader`` (a frame's id, if any, is not looked up)."""
    message: str | None = None
    """PROTOBUF: the full name of the message values are read as (``decoder.registry.record``);
    None: the reader schema's first message."""

    def describe(self) -> str:
        """How errors and reports name it: ``subject orders-value version 3 (id 12)`` or ``the schema file``."""
        if self.subject is None:
            return "the schema file" if self.any_id else "the declared schema"
        return f"subject {self.subject} version {self.reader_version} (id {self.reader_id})"


@dataclass(frozen=True, slots=True)
class RunSchemas:
    """The schemas of a run, by topic (see the module doc)."""

    values: Mapping[str, SubjectSchemas]
    keys: Mapping[str, SubjectSchemas] = field(default_factory=dict)
    kept: Mapping[str, SubjectSchemas] = field(default_factory=dict)
    """Columns the raw table keeps that this run's reader schema no longer has (a field removed
    since an earlier run) → the reader schema they were last in: null in this run's rows; only
    readers of the table declare them, the tasks write none (pipelines.schemas.evolution)."""

    def value_for(self, topic: str) -> SubjectSchemas:
        """The value schemas of ``topic`` (a topic the run did not resolve is an error, not a guess)."""
        try:
            return self.values[topic]
        except KeyError:
            raise PayloadSchemaError(f"no schema was resolved for topic {topic!r} in this run") from None

    def key_for(self, topic: str) -> SubjectSchemas | None:
        return self.keys.get(topic)

    def kept_columns(self) -> list[pa.Field]:
        """The ``kept`` columns, as the reader schemas they were last in give them."""
        return [columns_of(s, s.describe()).field(name) for name, s in self.kept.items()]

    def readers(self) -> dict[str, dict[str, dict[str, Any]]]:
        """What a manifest records of the run's schemas: for values and keys, topic → the reader
        schema's subject, version and id (topics read with a schema file or a declared schema are
        left out: nothing in a registry to name); and, if any, the ``kept`` columns → the same of
        the schema each was last in."""

        def of(side: Mapping[str, SubjectSchemas]) -> dict[str, dict[str, Any]]:
            return {
                topic: {"subject": s.subject, "version": s.reader_version, "id": s.reader_id}
                for topic, s in side.items()
                if s.subject is not None
            }

        recorded = {"values": of(self.values), "keys": of(self.keys)}
        if self.kept:
            recorded["kept"] = of(self.kept)
        return recorded

    def to_json(self) -> str:
        def one(s: SubjectSchemas) -> dict[str, Any]:
            return {
                "schema_type": s.schema_type,
                "reader": s.reader,
                "subject": s.subject,
                "reader_version": s.reader_version,
                "reader_id": s.reader_id,
                "writers": {str(k): v for k, v in s.writers.items()},
                "any_id": s.any_id,
                "message": s.message,
            }

        return json.dumps({
            "values": {t: one(s) for t, s in self.values.items()},
            "keys": {t: one(s) for t, s in self.keys.items()},
            "kept": {c: one(s) for c, s in self.kept.items()},
        })  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> RunSchemas:
        data = json.loads(text)

        def one(s: dict[str, Any]) -> SubjectSchemas:
            return SubjectSchemas(**{**s, "writers": {int(k): v for k, v in s["writers"].items()}})

        return cls(
            {t: one(s) for t, s in data["values"].items()},
            {t: one(s) for t, s in data["keys"].items()},
            {c: one(s) for c, s in data.get("kept", {}).items()},
        )


Clients = Callable[[Registry], RegistryClient]


@dataclass(frozen=True, slots=True)
class Pin:
    """A reader schema a run recorded, to read into again (a replay): by its global id, which a
    hard delete of its version number does not take away; the version names it in messages."""

    id: int
    version: int | None = None


def needs_schemas(decoder: Decoder) -> bool:
    """The decoder's columns (or its keys') come from a schema read per run."""
    return not decoder.declares_columns or decoder.format == "connect_json" or decoder.key_decoder.format == "avro"


def resolve_schemas(
    decoder: Decoder,
    topics: Sequence[str],
    *,
    event_time: EventTime | None = None,
    pinned: Mapping[str, Pin] | None = None,
    recorded: Mapping[str, Any] | None = None,
    client: Clients = RegistryClient,
) -> RunSchemas | None:
    """The run's schemas for ``topics`` (None for a decoder that declares its columns and reads no
    key schema). ``pinned``: subject → the schema to read into instead of the decoder's (a replay
    reads with what the replaced runs used). ``recorded``: the newest committed run's ``schemas``
    (its manifest's): the reader schemas may differ from those only as pipelines.schemas.evolution
    allows, and the columns the table keeps are carried on (``RunSchemas.kept``). Every registry
    is asked here and only here; SchemaRegistryError if one does not answer, PayloadSchemaError
    for a schema that cannot be read or an evolution that is refused."""
    if not needs_schemas(decoder):
        return None
    values: dict[str, SubjectSchemas] = {}
    readers: dict[str, _SubjectReader] = {}
    earlier = _earlier_readers(recorded or {})
    if decoder.format == "connect_json":
        if decoder.schema_file is not None:
            text = _read_file(decoder.schema_file)
        else:
            text = json.dumps(declared_connect_schema(decoder.schema))
        values = dict.fromkeys(topics, SubjectSchemas("CONNECT", text))
    elif decoder.format == "avro" and decoder.schema_file is not None:
        values = dict.fromkeys(topics, SubjectSchemas("AVRO", _read_file(decoder.schema_file), any_id=True))
    elif not decoder.declares_columns:
        assert decoder.registry is not None  # checked with the pipeline file
        reader = _SubjectReader(client(decoder.registry), _TYPE_OF_FORMAT[decoder.format], pinned or {}, earlier)
        values = {topic: reader.read(decoder.registry.subject(topic), decoder.registry.version) for topic in topics}
        readers["values"] = reader
        if decoder.format == "protobuf" and decoder.registry.record is not None:
            values = {topic: replace(s, message=decoder.registry.record) for topic, s in values.items()}
    keys: dict[str, SubjectSchemas] = {}
    key_registry = decoder.key_registry
    if key_registry is not None:
        reader = _SubjectReader(client(key_registry), "AVRO", pinned or {}, earlier)
        keys = {topic: reader.read(key_registry.subject(topic, key=True), key_registry.version) for topic in topics}
        readers["keys"] = reader
    schemas = RunSchemas(values, keys)
    if values:
        check_columns(decoder, schemas, event_time)
    found: tuple[str, pa.Schema] | None = None
    for topic in sorted(keys):
        key = keys[topic]
        columns = avro_columns(key.reader, where=f"the key schema of {topic} ({key.describe()})").schema
        check_programs(key, f"the key schema of {topic} ({key.describe()})")
        if found is not None and not columns.equals(found[1]):
            raise PayloadSchemaError(f"topics {found[0]} and {topic} have keys of different schemas ({key.describe()})")
        found = found or (topic, columns)
    if recorded and readers:
        # pipelines.schemas.evolution builds on this module's types: imported where it is used
        from pipelines.schemas.evolution import Recorded, evolve  # noqa: PLC0415

        def lookup(side: str, schema: Recorded) -> SubjectSchemas:
            if side not in readers:
                raise PayloadSchemaError(f"the run reads no {side} from a registry, but {schema.subject} was recorded")
            return readers[side].recorded(schema.subject, Pin(schema.id, schema.version))

        schemas = evolve(schemas, recorded, lookup)
    return schemas


def recorded_pins(readers: Mapping[str, Any]) -> dict[str, Pin]:
    """Subject → reader schema, from what a manifest recorded (``RunSchemas.readers``): the
    schemas a replay pins, to read with those of the runs it replaces."""
    pins: dict[str, Pin] = {}
    for side in ("values", "keys"):
        for entry in (readers.get(side) or {}).values():
            if isinstance(entry, dict) and isinstance(entry.get("subject"), str) and _is_int(entry.get("id")):
                version = entry.get("version")
                pins[entry["subject"]] = Pin(entry["id"], version if _is_int(version) else None)
    return pins


def _earlier_readers(recorded: Mapping[str, Any]) -> dict[str, dict[int, int | None]]:
    """Subject → the ids (→ versions) of reader schemas recorded runs read into (their values are
    in the table's files): read as writers too, though a hard delete took their version away."""
    out: dict[str, dict[int, int | None]] = {}
    for side in ("values", "keys", "kept"):
        for entry in (recorded.get(side) or {}).values():
            if isinstance(entry, dict) and isinstance(entry.get("subject"), str) and _is_int(entry.get("id")):
                version = entry.get("version")
                out.setdefault(entry["subject"], {})[entry["id"]] = version if _is_int(version) else None
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def spec_schemas(spec: PipelineSpec, topics: Iterable[str], recorded: Mapping[str, Any]) -> RunSchemas | None:
    """The schemas the readers of a raw layer read it with (the transforms' view, the metastore's
    table): the versions the newest run recorded (``recorded``: its manifest's ``schemas``), for
    ``topics`` (those its runs loaded, for a ``topic_pattern``), with the columns the table keeps;
    files of earlier runs, written with fewer columns, read as nulls there."""
    if not needs_schemas(spec.decoder):
        return None
    wanted = sorted(set(spec.topics) or set(topics))
    return resolve_schemas(
        spec.decoder, wanted, event_time=spec.event_time, pinned=recorded_pins(recorded), recorded=recorded
    )


def _read_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PayloadSchemaError(f"cannot read the schema file {path}: {exc}") from None


class _SubjectReader:
    """Reads subjects of one registry, each schema id fetched once. ``pinned``: subject → the
    schema to read into, whatever version is asked; ``earlier``: subject → ids of schemas earlier
    runs read into, checked as writers even when no version of the subject has them any more."""

    def __init__(
        self,
        client: RegistryClient,
        schema_type: str,
        pinned: Mapping[str, Pin],
        earlier: Mapping[str, Mapping[int, int | None]] | None = None,
    ) -> None:
        self.client = client
        self.schema_type = schema_type
        self.pinned = pinned
        self.earlier = earlier or {}
        self.read_subjects: dict[tuple[str, int | str], SubjectSchemas] = {}
        self.by_id: dict[int, RegisteredSchema] = {}

    def recorded(self, subject: str, pin: Pin) -> SubjectSchemas:
        """The schema of id ``pin.id`` as the reader schema of ``subject`` (version ``pin.version``):
        a recorded run's reader, fetched by id unless the subject's versions brought it."""
        found = self._schema_of_id(subject, pin)
        return SubjectSchemas(self.schema_type, found.schema, subject, pin.version, pin.id)

    def _schema_of_id(self, subject: str, pin: Pin) -> RegisteredSchema:
        if pin.id not in self.by_id:
            fetched = self.client.schema_by_id(pin.id)  # no ?subject=: a hard-deleted version has none
            self.by_id[pin.id] = RegisteredSchema(
                pin.id, fetched.schema_type, fetched.schema, fetched.references, subject, pin.version
            )
            self._check(self.by_id[pin.id])
        return self.by_id[pin.id]

    def read(self, subject: str, version: int | str) -> SubjectSchemas:
        pin = self.pinned.get(subject)
        asked = (subject, version if pin is None else f"id {pin.id}")
        if asked in self.read_subjects:
            return self.read_subjects[asked]
        numbers = self.client.versions(subject, deleted=True)
        if len(numbers) > MAX_VERSIONS:
            raise PayloadSchemaError(
                f"subject {subject} of schema registry {self.client.name} has {len(numbers)} versions, "
                f"more than the {MAX_VERSIONS} a run reads"
            )
        if not numbers:
            raise PayloadSchemaError(f"subject {subject} of schema registry {self.client.name} has no version")
        versions = [self.client.version(subject, n) for n in numbers]
        for registered in versions:
            self._check(registered)
            self.by_id.setdefault(registered.id, registered)
        known = {v.id for v in versions}
        earlier = self.earlier.get(subject, {})
        versions += [self._schema_of_id(subject, Pin(i, earlier[i])) for i in sorted(earlier) if i not in known]
        if pin is not None:  # by id: a version number hard-deleted since still reads
            reader = next((v for v in versions if v.id == pin.id), None) or self._schema_of_id(subject, pin)
            if reader not in versions:
                versions.append(reader)
        else:
            if version == "latest":
                live = self.client.versions(subject, deleted=False)
                if not live:
                    raise PayloadSchemaError(f"every version of subject {subject} is deleted: no schema to read into")
                version = max(live)
            chosen = [v for v in versions if v.version == version]
            if not chosen:
                raise PayloadSchemaError(
                    f"subject {subject} has no version {version} (it has {', '.join(map(str, numbers))})"
                )
            reader = chosen[0]
        if self.schema_type == "AVRO":
            _refuse_unreadable_writers(subject, reader, versions)
        elif self.schema_type == "PROTOBUF":
            _refuse_unreadable_protobuf_writers(subject, reader, versions)
        found = SubjectSchemas(
            self.schema_type,
            reader.schema,
            subject,
            reader.version,
            reader.id,
            {v.id: v.schema for v in versions},
        )
        self.read_subjects[asked] = found
        return found

    def _check(self, registered: RegisteredSchema) -> None:
        where = f"subject {registered.subject} version {registered.version} (id {registered.id})"
        if registered.schema_type != self.schema_type:
            raise PayloadSchemaError(
                f"{where} is a {registered.schema_type} schema; this decoder reads {self.schema_type} (decoder.format)"
            )
        if registered.references:
            raise PayloadSchemaError(f"{where} refers to other schemas (references): not supported yet")
        if self.schema_type == "AVRO":
            try:  # the tasks' decoder (kafkalog.schemas.avro_program) reads the schema as this parser does
                avro.parse(registered.schema)
                data = json.loads(registered.schema)
            except (SchemaError, ValueError) as exc:
                raise PayloadSchemaError(f"{where} is not an Avro schema: {exc}") from None
            endless = endless_array(data)  # values are decoded by the writer schema's layout
            if endless is not None:
                raise PayloadSchemaError(
                    f"{where}: {endless}: an array of items that take no bytes cannot be read safely"
                )


def columns_of(subject: SubjectSchemas, where: str) -> pa.Schema:
    """The decoded columns ``subject``'s reader schema gives."""
    if subject.schema_type == "AVRO":
        return avro_columns(subject.reader, where=where).schema
    if subject.schema_type == "JSON":
        return json_schema_columns(subject.reader, where=where)
    if subject.schema_type == "PROTOBUF":
        from pipelines.schemas.protobuf_columns import protobuf_columns  # noqa: PLC0415 - Protobuf subjects only

        return protobuf_columns(subject.reader, where=where, message=subject.message).schema
    if subject.schema_type == "CONNECT":
        try:
            data = json.loads(subject.reader)
        except ValueError as exc:
            raise PayloadSchemaError(f"{where} is not JSON: {exc}") from None
        return connect_columns(data, where=where).schema
    raise PayloadSchemaError(f"{where}: {subject.schema_type} schemas are not decoded yet")


def check_programs(subject: SubjectSchemas, where: str) -> None:
    """Before anything is loaded: the tasks' decoding programs of an Avro subject compile, its reader
    schema against itself and against every writer version (kafkalog.schemas.avro_program refuses
    what Avro's compatibility rules let through but the columns cannot take: a default its type
    cannot hold, a logical type read as another, a fixed wider than a column's value may be).
    PayloadSchemaError naming ``where``, the writer's id and the first cause."""
    if subject.schema_type != "AVRO":
        return
    from kafkalog.schemas.avro_program import compile_program  # noqa: PLC0415 - Avro subjects only

    try:
        reader = avro.parse(subject.reader)
        compile_program(reader, reader)
        for schema_id, text in sorted(subject.writers.items()):
            try:
                compile_program(avro.parse(text), reader)
            except SchemaError as exc:
                raise PayloadSchemaError(
                    f"{where}: records written with schema id {schema_id} cannot be read into its columns: {exc}"
                ) from None
    except SchemaError as exc:
        raise PayloadSchemaError(f"{where}: its values cannot be decoded into its columns: {exc}") from None


def run_columns(schemas: RunSchemas) -> pa.Schema:
    """The decoded columns of the run: one raw table, so every topic's reader schema must give the
    same ones (PayloadSchemaError naming two that differ)."""
    found: tuple[str, pa.Schema] | None = None
    for topic in sorted(schemas.values):
        subject = schemas.values[topic]
        columns = columns_of(subject, f"{subject.describe()} (topic {topic})")
        check_programs(subject, f"{subject.describe()} (topic {topic})")
        if found is None:
            found = (topic, columns)
        elif not columns.equals(found[1]):
            raise PayloadSchemaError(
                f"topics {found[0]} and {topic} are read into different columns ({subject.describe()}): "
                "one pipeline loads one raw table; give them a pipeline each"
            )
    if found is None:
        raise PayloadSchemaError("the run has no topic to read a schema for")
    return found[1]


def check_columns(decoder: Decoder, schemas: RunSchemas, event_time: EventTime | None) -> pa.Schema:
    """The run's columns, with the file's ``required`` fields and ``event_time.field`` checked against them."""
    columns = run_columns(schemas)
    for i, name in enumerate(decoder.required):
        if name not in columns.names:
            raise PayloadSchemaError(f"decoder.required[{i}]: {name!r} is not a field of the values' schema")
    if event_time is not None and event_time.field is not None:
        kind = field_kind(columns, event_time.field)
        if kind is None:
            raise PayloadSchemaError(
                f"event_time.field: {event_time.field!r} is not a field of the values' schema that holds a time "
                "(a timestamp, a long or int of epoch time, a double, or a string)"
            )
        numeric = event_time.format in ("epoch_millis", "epoch_seconds")
        if kind in ("long", "int", "double") and not numeric:
            raise PayloadSchemaError(
                f"event_time.format: {event_time.field!r} is a number: use epoch_millis or epoch_seconds"
            )
        if kind == "string" and numeric:
            raise PayloadSchemaError(
                f"event_time.format: {event_time.field!r} is a string: use iso8601 or a strptime pattern"
            )
    return columns


_KINDS = {pa.string(): "string", pa.int64(): "long", pa.int32(): "int", pa.float64(): "double", UTC_MICROS: "timestamp"}


def field_kind(columns: pa.Schema, name: str) -> str | None:
    """The ``decoder.schema`` kind of a decoded column that can hold an event time (None if it cannot)."""
    if name not in columns.names:
        return None
    return _KINDS.get(columns.field(name).type)


def _refuse_unreadable_writers(subject: str, reader: RegisteredSchema, versions: Sequence[RegisteredSchema]) -> None:
    """Before anything is loaded: every version of the subject (soft-deleted ones too: their
    records may be in the topic) must be readable into the run's reader schema by Avro's
    resolution, else the run is refused naming the subject, both versions and the first field that
    cannot be read (Confluent's wording: ``new`` is the reader, ``old`` the writer)."""
    from kafkalog.schemas import avro, avro_compat  # noqa: PLC0415 - Avro subjects only
    from kafkalog.schemas.errors import InvalidSchemaError  # noqa: PLC0415

    try:
        read_with = avro.parse(reader.schema)
    except InvalidSchemaError as exc:
        raise PayloadSchemaError(f"subject {subject} version {reader.version}: {exc}") from None
    for written in versions:
        if written.id == reader.id:
            continue
        try:
            findings = avro_compat.incompatibilities(read_with, avro.parse(written.schema))
        except InvalidSchemaError as exc:
            raise PayloadSchemaError(f"subject {subject} version {written.version}: {exc}") from None
        if findings:
            raise PayloadSchemaError(
                f"subject {subject}: records written with version {written.version} (id {written.id}) cannot be "
                f"read into version {reader.version} (id {reader.id}), the run's reader schema: {findings[0]}"
                + (f" (and {len(findings) - 1} more)" if len(findings) > 1 else "")
            )


def _refuse_unreadable_protobuf_writers(
    subject: str, reader: RegisteredSchema, versions: Sequence[RegisteredSchema]
) -> None:
    """The Protobuf form of ``_refuse_unreadable_writers``: every version of the subject must
    compile, and its messages be readable by field number into the reader version's (Confluent's
    Protobuf rules, kafkalog.schemas.protobuf_compat: a field's number reused for another kind of
    value is refused), else the run is refused before anything is loaded."""
    from kafkalog.schemas import protobuf, protobuf_compat  # noqa: PLC0415 - Protobuf subjects only
    from kafkalog.schemas.errors import InvalidSchemaError  # noqa: PLC0415

    def compiled(registered: RegisteredSchema) -> protobuf.ProtobufSchema:
        try:
            return protobuf.parse(registered.schema)
        except InvalidSchemaError as exc:
            raise PayloadSchemaError(
                f"subject {subject} version {registered.version} is not a Protobuf schema protoc compiles: {exc}"
            ) from None

    read_with = compiled(reader)
    for written in versions:
        if written.id == reader.id:
            continue
        try:
            findings = protobuf_compat.incompatibilities(read_with, compiled(written))
        except InvalidSchemaError as exc:  # nested too deeply to compare
            raise PayloadSchemaError(f"subject {subject} version {written.version}: {exc}") from None
        if findings:
            raise PayloadSchemaError(
                f"subject {subject}: records written with version {written.version} (id {written.id}) cannot be "
                f"read into version {reader.version} (id {reader.id}), the run's reader schema: {findings[0]}"
                + (f" (and {len(findings) - 1} more)" if len(findings) > 1 else "")
            )
