"""``decoder.format: avro``: each value is Avro binary, framed with the schema id it was written with
(kafkalog.schemas.wire) or, with a ``schema_file``, plain (``framed: true``: framed, the id not
looked up). Each value is decoded with its writer schema and resolved into the run's reader schema
(Avro's resolution: fields added with defaults, removed fields skipped, int → long promotions,
enum defaults) by our own kernel: per chunk, the values are grouped by schema id; each writer
schema is compiled once per task against the reader (kafkalog.schemas.avro_program) and run over
its group by kafkalog.schemas.avro_columns (the C kernel, or its pure-Python twin where the C one is
not built: the ``--py-files`` zip ships no compiled code, the ``--archives`` tarball does), straight
into column buffers that pipelines.executor.payloads.avro_arrow wraps as Arrow arrays of the
columns pipelines.schemas.columns maps the reader schema to. Rows come out in message order.

A value is bad, with its reason, if its frame is (``wrong magic byte 0x7b``, ``value shorter than
5 bytes``), its id is none of the subject's (``unknown schema id 7``), its writer schema cannot be
read into the reader schema (``schema id 7 cannot be read into the reader schema: ...``), it ends
before its record does (``truncated Avro payload``), it does not decode (``corrupt Avro payload:
...``, the kernel's reason: an enum index or union branch out of range, a varint too long, a
negative length, a string that is not UTF-8, ...), it has bytes after its record (``2 bytes left
after the record``), it would make more bytes of columns than a value of its size may (``the value
would expand to more than 18688 bytes of columns``: see kafkalog.schemas.avro_program's
MAX_VALUE_OUTPUT), or its record cannot be a row (``the record cannot be a row: ...``: a decimal
with more digits than its precision, a millisecond timestamp beyond what microseconds hold).
Trailing bytes are refused although Confluent's deserializer ignores them: a value whose record
does not use exactly its bytes was not written by an Avro serializer with this schema, and reading
it would load a guess.

Every value is decoded within its own bounds, so one corrupt value is bad alone and never shifts
its neighbours; a chunk whose columns would grow past a piece's bound is decoded in several pieces
(kafkalog.schemas.avro_columns), so no value's verdict depends on the chunk it came in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from kafkalog.schemas import avro
from kafkalog.schemas.avro_columns import decode
from kafkalog.schemas.avro_program import Program, compile_program
from kafkalog.schemas.errors import SchemaError
from kafkalog.schemas.wire import HEADER_SIZE, schema_ids
from pipelines.config.pipeline import Decoder
from pipelines.errors import PayloadSchemaError
from pipelines.executor.halving import Parsed
from pipelines.executor.payloads.avro_arrow import BAD_ROW, arrow_schema, to_arrow
from pipelines.schemas.columns import avro_columns
from pipelines.schemas.resolved import SubjectSchemas

_NO_ID = -2
"""The id of a value of a schema file without framing: read with the reader schema."""

_LEFT_OVER = re.compile(r"(\d+) bytes left after the record")
_TRUNCATED = re.compile(r"truncated at byte \d+|length \d+ at byte \d+ exceeds the \d+ bytes left")


def bad_reason(kernel: str) -> str:
    """The reason a value is bad, from the kernel's: a truncation, trailing bytes, a decimal wider
    than its column, a value that would make more bytes of columns than it may, or the kernel's
    words behind ``corrupt Avro payload:``."""
    left = _LEFT_OVER.fullmatch(kernel)
    if left is not None:
        n = int(left.group(1))
        return f"{n} byte{'s' if n > 1 else ''} left after the record"
    if _TRUNCATED.fullmatch(kernel):
        return "truncated Avro payload"
    if kernel.startswith("decimal of "):
        return BAD_ROW + kernel
    if kernel.startswith(("the value would expand to more than ", "the value alone makes a column exceed ")):
        return kernel  # it decodes, but would take more memory than a value may
    return f"corrupt Avro payload: {kernel}"


class AvroValues:
    """Avro values into the reader schema's columns (see the module doc). Made per task from the
    run's schemas; each writer schema is compiled once, when a value first names it."""

    def __init__(self, decoder: Decoder, schemas: SubjectSchemas) -> None:
        self.decoder = decoder
        self.schemas = schemas
        where = schemas.describe()
        self.columns = avro_columns(schemas.reader, where=where)
        self.schema = self.columns.schema
        self.required = decoder.required
        try:
            self._reader = avro.parse(schemas.reader)
        except SchemaError as exc:
            raise PayloadSchemaError(f"{where} is not an Avro schema: {exc}") from None
        self._framed = not schemas.any_id or decoder.framed
        self._programs: dict[int, Program | str | None] = {}
        """id → its program, or why its values cannot be read (a reason), or None: no such id."""

    def _program(self, schema_id: int) -> Program | str | None:
        if schema_id in self._programs:
            return self._programs[schema_id]
        reader_itself = self.schemas.any_id or schema_id in (self.schemas.reader_id, _NO_ID)
        text = self.schemas.reader if reader_itself else self.schemas.writers.get(schema_id)
        found: Program | str | None = None
        if text is not None:
            try:
                writer = self._reader if reader_itself else avro.parse(text)
                found = compile_program(writer, self._reader)
            except SchemaError as exc:
                found = f"schema id {schema_id} cannot be read into the reader schema: {exc}"
            else:
                if arrow_schema(found.columns) != self.schema:  # one mapping: a difference is a defect
                    raise PayloadSchemaError(
                        f"{self.schemas.describe()}: the decoded columns of schema id {schema_id} differ "
                        f"from the reader schema's: {arrow_schema(found.columns)} vs {self.schema}"
                    )
        self._programs[schema_id] = found
        return found

    def parse(self, values: Sequence[bytes | None]) -> tuple[list[Parsed], list[tuple[int, str]]]:
        """The decoded rows (one piece, in message order) and the bad (index, reason) pairs."""
        if self._framed:
            ids, bad = schema_ids(values)
            start = HEADER_SIZE
        else:
            ids = [_NO_ID if v is not None else -1 for v in values]
            bad = [(i, "the message has no value (null)") for i, v in enumerate(values) if v is None]
            start = 0
        distinct = set(ids)
        groups: dict[int, list[int]] = {}
        if len(distinct) == 1 and -1 not in distinct:  # the common chunk: one writer schema throughout
            groups[ids[0]] = list(range(len(ids)))
        else:
            for i, schema_id in enumerate(ids):
                if schema_id != -1:
                    groups.setdefault(schema_id, []).append(i)
        tables: list[pa.Table] = []
        indexes: list[int] = []
        for schema_id, members in groups.items():
            program = self._program(schema_id)
            if not isinstance(program, Program):
                reason = f"unknown schema id {schema_id}" if program is None else program
                bad.extend((i, reason) for i in members)
                continue
            table, kept, more_bad = self._decode(values, members, start, program)
            bad.extend(more_bad)
            if table.num_rows:
                tables.append(table)
                indexes.extend(kept)
        bad.sort()
        if not tables:
            return [], bad
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        if len(tables) > 1:  # several writer schemas: back into message order
            order = sorted(range(len(indexes)), key=indexes.__getitem__)
            table = table.take(pa.array(order, pa.int64()))
            indexes = [indexes[i] for i in order]
        if not self.required:
            return [Parsed(indexes, table)], bad
        pieces, missing = _drop_missing(table, indexes, self.required)
        return pieces, sorted([*bad, *missing])

    def _decode(
        self, values: Sequence[bytes | None], members: list[int], start: int, program: Program
    ) -> tuple[pa.Table, list[int], list[tuple[int, str]]]:
        """The rows of the values at ``members`` (one writer schema's), the message index of each,
        and the bad ones."""
        chunk = values if len(members) == len(values) else [values[i] for i in members]
        tables: list[pa.Table] = []
        kept: list[int] = []
        bad: list[tuple[int, str]] = []
        for piece in decode(chunk, start, program):  # type: ignore[arg-type] # a member's value is never None
            bad.extend((members[j], bad_reason(reason)) for j, reason in piece.bad)
            good = members[piece.first : piece.end]
            if piece.bad:
                failed = {j - piece.first for j, _ in piece.bad}
                good = [i for j, i in enumerate(good) if j not in failed]
            rows = to_arrow(piece.columns, program.columns)
            bad.extend((good[r], reason) for r, reason in rows.bad)
            kept.extend(good if not rows.bad else [good[r] for r in rows.kept])
            tables.append(rows.table)
        return (tables[0] if len(tables) == 1 else pa.concat_tables(tables)), kept, bad


def _drop_missing(
    table: pa.Table, indexes: list[int], required: Sequence[str]
) -> tuple[list[Parsed], list[tuple[int, str]]]:
    """Rows with every required field, and the others as bad."""
    keep = None
    bad: dict[int, str] = {}
    for name in required:
        column = table.column(name)
        if column.null_count:
            missing = column.is_null().to_pylist()
            for index, gone in zip(indexes, missing, strict=True):
                if gone:
                    bad.setdefault(index, f"required field {name!r} is missing or null")
            keep = pc.invert(column.is_null()) if keep is None else pc.and_(keep, pc.invert(column.is_null()))
    if keep is None:
        return [Parsed(indexes, table)], []
    flags = keep.to_pylist()
    kept = [i for i, ok in zip(indexes, flags, strict=True) if ok]
    return ([Parsed(kept, table.filter(keep))] if kept else []), sorted(bad.items())
