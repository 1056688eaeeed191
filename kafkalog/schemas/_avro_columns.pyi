"""Type stubs of the C kernel; see _avro_columns_py.py, the pure-Python twin with the same signature."""

from collections.abc import Sequence

def decode(
    values: Sequence[bytes],
    start: int,
    code: Sequence[int],
    layout: Sequence[tuple[int, int, int]],
    piece_bytes: int = ...,
) -> tuple[list[tuple[int, int, bytes | None, bytes | None, bytes | None]], list[tuple[int, str]], int]: ...
