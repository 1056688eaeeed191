"""The segment log: partitions stored as segment files with sparse indexes, recovered after crashes.

Knows nothing of the network or of ZooKeeper; imports only kafkalog.record and kafkalog.errors.
"""

from kafkalog.log.config import LogConfig
from kafkalog.log.log import EARLIEST_TIME, LATEST_TIME, MAX_TIMESTAMP, AppendInfo, Log, OffsetAndTimestamp, ReadInfo
from kafkalog.log.manager import LogManager, validate_topic
from kafkalog.log.producer_state import VerificationGuard
from kafkalog.log.region import FileRegion
from kafkalog.log.segment import LogSegment

__all__ = [
    "EARLIEST_TIME",
    "LATEST_TIME",
    "MAX_TIMESTAMP",
    "AppendInfo",
    "FileRegion",
    "Log",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "OffsetAndTimestamp",
    "ReadInfo",
    "VerificationGuard",
    "validate_topic",
]
