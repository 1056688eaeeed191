"""Line-based payload formats (JSON objects, CSV lines) parsed a whole chunk at once.

Role: the machinery json_values and csv_values share. The values of a chunk are joined by newlines
and parsed by one Arrow C++ call; a message is good if and only if it parses *alone* into exactly
one row with every required field present. When a whole chunk does not parse cleanly it is halved
until the culprits are single messages (pipelines.executor.halving), and values that could confuse
line-based parsing (empty, blank, or containing a newline) are always parsed alone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pipelines.config.pipeline import Decoder
from pipelines.executor.arrow_types import ARROW_TYPES
from pipelines.executor.halving import Parsed, first_line, halve_until_culprits

_BOM = b"\xef\xbb\xbf"


def suspicious(value: bytes | None, json_object: bool) -> bool:
    """Values a line-based chunk parse could misattribute or glue to a neighbour: parse them alone.
    For JSON, a value that is one line starting with '{' and ending with '}' yields exactly one row
    or an error (it cannot yield none, and cannot merge with the next line, which starts with '{'
    where the parser wants ',' or '}'), so a chunk of such values with as many rows as values maps
    row i to value i."""
    if value is None or b"\n" in value or b"\r" in value:
        return True
    stripped = value.removeprefix(_BOM).strip() if json_object else value.strip()
    if not stripped:
        return True
    return json_object and (stripped[:1] != b"{" or stripped[-1:] != b"}")


_BLANK_FIRST_BYTES = np.frombuffer(b" \t\n\r\x0b\x0c\xef", np.uint8)
"""First bytes that make a value need the careful path: whitespace, and the first byte of a BOM."""


def all_plain(values: Sequence[bytes | None], json_object: bool) -> bool:
    """True if no value of the chunk is ``suspicious``, checked for the whole chunk at C speed
    (the common case); False means "look at each value" (not that one is suspicious). A JSON value
    is plain if it is one line starting with '{' and ending with '}' exactly; a CSV value if it is
    one non-empty line not starting with whitespace."""
    return _plain_chunk(values, json_object) is not None


def _plain_chunk(values: Sequence[bytes | None], json_object: bool) -> bytes | None:
    """The values joined by newlines, what the parser reads, if ``all_plain``; else None."""
    if not values or None in values:
        return None if values else b""
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))  # type: ignore[arg-type]
    if not lengths.all():
        return None
    joined = b"\n".join(values)  # type: ignore[arg-type]
    if joined.count(b"\n") != len(values) - 1 or b"\r" in joined:
        return None
    data = np.frombuffer(joined, np.uint8)
    starts = np.zeros(len(values), np.int64)
    np.cumsum(lengths[:-1] + 1, out=starts[1:])
    first = data[starts]
    if json_object:
        plain = bool((first == ord("{")).all() and (data[starts + lengths - 1] == ord("}")).all())
    else:
        plain = not np.isin(first, _BLANK_FIRST_BYTES).any()
    return joined if plain else None


class LineValues(ABC):
    """A line-based payload decoder (pipelines.executor.payloads.PayloadDecoder): message values
    into a table of the decoded fields, message by message semantics at chunk speed. Subclasses
    say how Arrow reads a chunk (``_read``) and what a value must look like (``json_object``)."""

    json_object = False
    """Values are JSON objects: one line from '{' to '}' is plain, anything else is refused alone."""

    def __init__(self, decoder: Decoder, schema: pa.Schema | None = None) -> None:
        self.decoder = decoder
        self.schema = self.schema_of(decoder) if schema is None else schema
        """The decoded columns: the decoder schema's, or ``schema`` (a format whose columns come
        from the values' schema)."""
        self.required = decoder.required

    @staticmethod
    def schema_of(decoder: Decoder) -> pa.Schema:
        """The decoded columns: the decoder schema's fields, in order."""
        return pa.schema([pa.field(n, ARROW_TYPES[k]) for n, k in decoder.schema.items()])

    @abstractmethod
    def _read(self, data: bytes, single: bool) -> pa.Table:
        """Arrow's parse of ``data`` (values joined by newlines; ``single``: exactly one value, which
        may hold newlines) into a table of ``self.schema``'s columns; raises Arrow's errors."""

    def _parse_range(self, values: Sequence[bytes], lo: int, hi: int, joined: bytes | None = None) -> pa.Table:
        """Parse values[lo:hi] as one chunk (``joined``: those values joined by newlines already);
        raises ValueError if it is not exactly hi-lo good rows."""
        single = hi - lo == 1
        try:
            table = self._read(b"\n".join(values[lo:hi]) if joined is None else joined, single)
            table.validate(full=True)  # Arrow does not check UTF-8 while parsing JSON strings
        except (pa.ArrowException, ValueError) as exc:
            raise ValueError(first_line(str(exc))) from exc
        if table.num_rows != hi - lo:
            raise ValueError(f"the value holds {table.num_rows} records, not one")
        for name in self.required:
            if table.column(name).null_count:
                raise ValueError(f"required field {name!r} is missing or null")
        return table

    def parse(self, values: Sequence[bytes | None]) -> tuple[list[Parsed], list[tuple[int, str]]]:
        """The parsed rows (pieces in message order) and the bad (index, reason) pairs."""
        pieces: list[Parsed] = []
        bad: list[tuple[int, str]] = []
        start = 0

        def run(lo: int, hi: int) -> None:
            if lo < hi:
                halve_until_culprits(lo, hi, lambda a, b: self._parse_range(values, a, b), pieces, bad)  # type: ignore[arg-type]

        json_object = self.json_object
        joined = _plain_chunk(values, json_object)
        if joined is not None:  # the common case: the chunk as joined for the check is parsed as it is
            whole = len(values)

            def attempt(lo: int, hi: int) -> pa.Table:
                return self._parse_range(values, lo, hi, joined if (lo, hi) == (0, whole) else None)  # type: ignore[arg-type]

            if whole:
                halve_until_culprits(0, whole, attempt, pieces, bad)
            return pieces, bad
        for i, value in enumerate(values):
            if suspicious(value, json_object):
                run(start, i)
                if value is None:
                    bad.append((i, "the message has no value (null)"))
                elif json_object and not value.removeprefix(_BOM).strip().startswith(b"{"):
                    # also keeps a bare `null` away from Arrow's JSON reader, which crashes on it
                    bad.append((i, "the value is not a JSON object"))
                else:
                    run(i, i + 1)
                start = i + 1
        run(start, len(values))
        return pieces, bad
