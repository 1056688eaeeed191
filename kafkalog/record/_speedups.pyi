"""Type stubs of the C kernels; see _fastpath.py, the pure-Python reference with the same signatures."""

from typing import Any

ErrorTriple = tuple[str, int, str]
IndexPoints = list[tuple[int, int, int, int]]

def configure(message_type: Any, create_time: Any, log_append_time: Any) -> None: ...
def decode_plain(
    buf: Any, pos: int, stop: int, verify_crc: bool, min_offset: int, required_magic: int, max_count: int
) -> tuple[list[Any], int, ErrorTriple | None]: ...
def scan_entries(
    buf: Any, pos: int, stop: int, verify_crc: bool, min_next_offset: int, index_interval: int, bytes_since_index: int
) -> tuple[int, int, int, int, int, IndexPoints, int, ErrorTriple | None]: ...
def assign_plain(
    buf: bytearray,
    pos: int,
    stop: int,
    next_offset: int,
    max_entry_bytes: int,
    now_ms: int,
    log_append_time: bool,
    index_interval: int,
    bytes_since_index: int,
) -> tuple[int, int, int, int, IndexPoints, int, ErrorTriple | None]: ...
def crc32c(data: Any) -> int: ...
def decode_records(
    buf: Any,
    count: int,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    last_offset_delta: int,
    log_append_time: bool,
) -> tuple[list[Any], ErrorTriple | None]: ...
def check_records(
    buf: Any, count: int, base_timestamp: int, log_append_time: bool
) -> tuple[int, bool, ErrorTriple | None]: ...
def encode_records(items: Any, base_timestamp: int) -> bytearray: ...
def batch_timestamps(items: Any) -> tuple[int, int]: ...
def assign_batches(
    buf: bytearray,
    pos: int,
    stop: int,
    next_offset: int,
    max_entry_bytes: int,
    now_ms: int,
    log_append_time: bool,
    index_interval: int,
    bytes_since_index: int,
    decompress: Any,
) -> tuple[int, int, int, int, IndexPoints, int]: ...
def map_get(table: Any, key: bytes) -> int: ...
def map_put_records(
    table: bytearray, max_entries: int, used: int, payload: Any, count: int, base_offset: int
) -> int: ...
def map_put_batches(
    table: bytearray, max_entries: int, used: int, buf: Any, pos: int, stop: int
) -> tuple[int, int, int, int]: ...
def filter_records(
    table: Any, payload: Any, count: int, base_offset: int, retain_tombstones: bool
) -> tuple[bytearray, int, int]: ...
def filter_batches(
    table: Any, buf: Any, pos: int, stop: int, out: bytearray, retain_tombstones: bool, protected: Any
) -> tuple[int, int, int, int]: ...
