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
from kafkalog.schemas.avro_program import Program


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
    """A chunk decoded: ``columns`` in the program's column order, each ``(length, null_count,
    validity, buffer1, buffer2)`` (see :mod:`kafkalog.schemas._avro_columns_py`); ``bad`` the
    (index, reason) of each value that failed, in order (they left nothing in the columns)."""

    columns: list[ColumnBuffers]
    bad: list[tuple[int, str]]

    @property
    def rows(self) -> int:
        """The values decoded (the root column's length)."""
        return self.columns[0][0]


def decode(values: Sequence[bytes], start: int, program: Program) -> Decoded:
    """The columns of ``values`` (each datum from byte ``start``) as ``program`` reads them."""
    columns, bad = implementation.decode(values, start, program.code, program.layout)
    return Decoded(columns, bad)
