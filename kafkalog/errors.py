"""The exception root of kafkalog and the errors of its storage layers.

Every error raised on purpose by kafkalog derives from :class:`KafkalogError`. An error that maps to
a Kafka wire error code carries it as ``error_code`` (the protocol layer turns it into a response).
This module imports nothing of ours, so every layer (record, log, protocol, ...) may use it.
"""

from __future__ import annotations


class KafkalogError(Exception):
    """Root of every kafkalog error.

    ``error_code`` is the Kafka protocol error code this error becomes on the wire (-1, UNKNOWN, when
    it has no better one); ``retriable`` says whether the same request may succeed if sent again.
    """

    error_code: int = -1
    retriable: bool = False


class CorruptRecordError(KafkalogError):
    """Bytes that do not form a valid message: bad CRC, impossible size, unknown magic or codec,
    key/value lengths that disagree with the message size, or a compressed payload that does not
    decompress. ``offset`` and ``position`` locate the message when known (else None)."""

    error_code = 2  # CORRUPT_MESSAGE
    retriable = True

    def __init__(self, reason: str, *, offset: int | None = None, position: int | None = None):
        where = []
        if offset is not None:
            where.append(f"offset {offset}")
        if position is not None:
            where.append(f"byte position {position}")
        super().__init__(f"{reason}" + (f" (at {', '.join(where)})" if where else ""))
        self.reason = reason
        self.offset = offset
        self.position = position


class UnsupportedCodecError(CorruptRecordError):
    """A message names a compression codec we cannot decode (or encode)."""

    error_code = 76  # UNSUPPORTED_COMPRESSION_TYPE


class InvalidRecordError(KafkalogError):
    """A produced record is well formed but not one a client may write (a control batch, a
    transactional batch without its producer), as Kafka's InvalidRecordException."""

    error_code = 87  # INVALID_RECORD


class RecordTooLargeError(KafkalogError):
    """A message (or a decompressed payload) is larger than the configured limit."""

    error_code = 10  # MESSAGE_TOO_LARGE


class UnsupportedForMessageFormatError(KafkalogError):
    """What was produced cannot be stored in the topic's message format (headers in a v1 topic)."""

    error_code = 43  # UNSUPPORTED_FOR_MESSAGE_FORMAT


class InvalidTimestampError(KafkalogError):
    """A message carries a timestamp that is neither -1 (none) nor a non-negative epoch time."""

    error_code = 32  # INVALID_TIMESTAMP


class LogError(KafkalogError):
    """Root of the errors of the segment log (kafkalog.log)."""


class OffsetOutOfRangeError(LogError):
    """A read or lookup asked for an offset outside [log_start_offset, log_end_offset]."""

    error_code = 1  # OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int, *, where: str = ""):
        super().__init__(
            f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]"
            + (f" of {where}" if where else "")
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class CorruptSegmentError(LogError):
    """A segment holds bytes that fail validation where no torn write can explain them (inside data
    that was already flushed, or in a sealed segment). Such data is never served and never silently
    truncated: the partition is quarantined until an operator acts."""

    error_code = 2  # CORRUPT_MESSAGE

    def __init__(self, path: str, position: int, offset: int | None, reason: str):
        at_offset = f"offset {offset}" if offset is not None else "an unknown offset"
        super().__init__(f"corrupt message in {path} at byte position {position} ({at_offset}): {reason}")
        self.path = path
        self.position = position
        self.offset = offset
        self.reason = reason


class LogDirLockedError(LogError):
    """Another process (or another LogManager) holds the lock of a data directory."""


class LogClosedError(LogError):
    """An operation was attempted on a log or log manager that has been closed."""


class StorageError(LogError):
    """An I/O operation on a data directory failed (disk full, permission, EIO, a failed rename)."""

    error_code = 56  # KAFKA_STORAGE_ERROR
    retriable = True


class LogConfigError(LogError):
    """A log configuration value is invalid; the message names the field and the value."""


class ProtocolError(KafkalogError):
    """Bytes from the network that are not a valid request or response: a truncated field, a length
    or count that cannot fit, a string that is not UTF-8, an unknown API key or version. The only
    error the protocol decoder raises for bad input; the server answers it by closing the
    connection (or with an error code where the protocol has one)."""

    error_code = 2  # CORRUPT_MESSAGE is the closest code; most callers close the connection instead


class ClientError(KafkalogError):
    """Root of the errors of kafkalog.client. ``retriable``: sending again may succeed;
    ``invalid_metadata``: refresh the cluster metadata before retrying."""

    invalid_metadata: bool = False


class KafkaConnectionError(ClientError):
    """A broker could not be reached, or the connection broke."""

    retriable = True


class AuthenticationError(ClientError):
    """A broker refused the client's TLS handshake or SASL login (wrong password, unknown user, an
    untrusted certificate); sending again will not help. The message never holds a secret."""

    retriable = False


class RequestTimedOutError(ClientError):
    """A broker did not answer within the request timeout (the connection is dropped)."""

    error_code = 7
    retriable = True


class BrokerResponseError(ClientError):
    """A broker answered with an error code; ``error_name`` is Kafka's name for it."""

    def __init__(self, error_code: int, error_name: str, context: str) -> None:
        super().__init__(f"{context}: {error_name} ({error_code})")
        self.error_code = error_code
        self.error_name = error_name
        self.retriable = error_code in _RETRIABLE_CODES
        self.invalid_metadata = error_code in _METADATA_CODES


# LEADER_NOT_AVAILABLE, NOT_LEADER_FOR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION (while a topic is being
# created), REQUEST_TIMED_OUT, NETWORK_EXCEPTION, COORDINATOR_*, NOT_COORDINATOR, CORRUPT_MESSAGE (in
# transit), KAFKA_STORAGE_ERROR, CONCURRENT_TRANSACTIONS (the last transaction's markers are being written)
_RETRIABLE_CODES = frozenset({2, 3, 5, 6, 7, 13, 14, 15, 16, 51, 56})
_METADATA_CODES = frozenset({3, 5, 6, 16})


class UnsupportedByBrokerError(ClientError):
    """The broker does not speak an API (or version) the call needs, e.g. CreateTopics on Kafka 0.9."""


class BufferFullError(ClientError):
    """The producer's bounded queue stayed full for max_block_ms: the broker cannot keep up."""


class TransactionError(ClientError):
    """Root of a transactional producer's errors (kafkalog.client.transactions)."""


class TransactionStateError(TransactionError):
    """A transactional call the producer's state does not allow (a commit without a begin, a send
    outside a transaction ...): the state is unchanged."""


class TransactionTimeoutError(TransactionError):
    """A transactional call did not succeed within the producer's ``max_block_ms`` (the coordinator
    loading, moving, or the last transaction's markers still being written): the same call may be
    made again."""

    retriable = True


class AbortableTransactionError(TransactionError):
    """The transaction cannot commit (a send failed, a partition or the group was refused): only
    ``abort_transaction`` is allowed; the producer may then begin another. ``cause`` is the first."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class FatalTransactionError(TransactionError):
    """The producer can make no more transactional calls (fenced by a newer producer with its
    transactional id, not authorized, a timeout the coordinator refuses ...): close it. ``cause``
    is the broker's error that made it so."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class ProducerFencedError(FatalTransactionError):
    """Another producer took this transactional id (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, or
    TRANSACTION_COORDINATOR_FENCED): this one is a zombie."""


class RegistryError(KafkalogError):
    """A ZooKeeper registry operation failed: the message names the path and the cause."""


class AssignmentError(RegistryError):
    """A consumer group cannot be assigned as asked, e.g. round-robin over members that subscribe
    to different topics or stream counts."""
