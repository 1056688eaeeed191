"""Avro values to columns: runs a compiled program (:mod:`kafkalog.schemas.avro_program`) over a
chunk of values, with the C kernel when it is built, else its pure-Python twin.

Set KAFKALOG_PURE_PYTHON=1 to force the twin (as the record kernels do). :func:`decode` takes the
values of one writer schema (the caller unframed them and grouped them by schema id) and where each
value's datum begins (5 after the Confluent frame's magic byte and schema id).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from kafkalog.schemas import _avro_columns_py
from kafkalog.schemas._avro_columns_py import ColumnBuffers
from kafkalog.schemas.avro_program import MAX_PIECE_OUTPUT, Program


def _load() -> tuple[ModuleType, bool, str]:
    if os.environ.get("KAFKALOG_PURE_PYTHON") == "1":
        return _avro_columns_py, False, "KAFKALOG_PURE_PYTHON=1"
    try:
        from kafkalog.schemas import _avro_columns  # noqa: PLC0415 - optional: absent when not compiled
    except ImportError as exc:
        return _avro_columns_py, False, f"the C kernel did not import: {exc}"
    return _avro_columns, True, ""


implementation, NATIVE, WHY_PURE = _load()
"""The module that decodes; whether it is the C one; if not, why."""


@dataclass(frozen=True)
class Decoded:
    """A piece of a chunk decoded: the values ``first`` to ``end`` (exclusive); ``columns`` in the
    program's column order, each ``(length, null_count, validity, buffer1, buffer2)`` (see
    :mod:`kafkalog.schemas._avro_columns_py`); ``bad`` the (index in the chunk, reason) of each of
    its values that failed, in order (they left nothing in the columns)."""

    columns: list[ColumnBuffers]
    bad: list[tuple[int, str]]
    first: int = 0
    end: int = 0

    @property
    def rows(self) -> int:
        """The values decoded (the root column's length)."""
        return self.columns[0][0]


def decode(values: Sequence[bytes], start: int, program: Program, piece_bytes: int = MAX_PIECE_OUTPUT) -> list[Decoded]:
    """The columns of ``values`` (each datum from byte ``start``) as ``program`` reads them: one
    piece, or several where the columns of the chunk would pass ``piece_bytes`` (each piece ends
    before the value that would pass it; no value's verdict depends on the piece it is in, as long
    as ``piece_bytes`` is at least :data:`~kafkalog.schemas.avro_program.MAX_VALUE_OUTPUT`)."""
    pieces: list[Decoded] = []
    first = 0
    while True:
        rest = values if first == 0 else values[first:]
        columns, bad, stop = implementation.decode(rest, start, program.code, program.layout, piece_bytes)
        if stop == 0 and rest:  # never: a value alone in a piece is decoded or bad
            raise AssertionError("the Avro kernel decoded no value of a piece")
        pieces.append(Decoded(columns, [(first + j, reason) for j, reason in bad], first, first + stop))
        first += stop
        if first >= len(values):
            return pieces
