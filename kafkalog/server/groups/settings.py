"""The group coordinator's settings (the broker configuration's ``groups`` section)."""

from __future__ import annotations

from dataclasses import dataclass

from kafkalog.errors import KafkalogError


class GroupSettingsError(KafkalogError):
    """A ``groups`` setting is invalid (the broker configuration reports where it came from)."""


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The group coordinator's rules for consumer groups (Kafka's ``group.*`` broker settings)."""

    min_session_timeout_ms: int = 6000
    """A member asking for a shorter session timeout is refused (INVALID_SESSION_TIMEOUT)."""

    max_session_timeout_ms: int = 1_800_000
    """A member asking for a longer session timeout is refused (INVALID_SESSION_TIMEOUT)."""

    initial_rebalance_delay_ms: int = 3000
    """The first rebalance of an empty group waits this long for more members to join, and longer
    (up to the rebalance timeout) while they keep arriving: starting ten consumers then costs one
    rebalance instead of ten. 0: no wait."""

    max_size: int = 1_000_000
    """A join beyond this many members is refused (GROUP_MAX_SIZE_REACHED)."""

    def __post_init__(self) -> None:
        if not 1 <= self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise GroupSettingsError(
                f"min_session_timeout_ms: must be in [1, max_session_timeout_ms ({self.max_session_timeout_ms})],"
                f" not {self.min_session_timeout_ms}"
            )
        if self.initial_rebalance_delay_ms < 0:
            raise GroupSettingsError(f"initial_rebalance_delay_ms: must be >= 0, not {self.initial_rebalance_delay_ms}")
        if self.max_size < 1:
            raise GroupSettingsError(f"max_size: must be >= 1, not {self.max_size}")
