"""Type stubs of the C kernel; see kafkalog.schemas.protobuf_program.decode."""

from collections.abc import Sequence

def decode(
    values: Sequence[bytes | None], header: bytes, code: Sequence[int], columns: Sequence[tuple[int, int]]
) -> tuple[list[tuple[int, int, bytes | None, bytes | None, bytes | None]], list[tuple[int, str]], list[int]]: ...
