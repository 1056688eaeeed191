"""Consumer groups coordinated by the broker: Kafka's classic group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup) and the group side of OffsetCommit, DescribeGroups and ListGroups."""

from kafkalog.server.groups.coordinator import GroupCoordinator
from kafkalog.server.groups.settings import GroupSettings
from kafkalog.server.groups.state import GroupState

__all__ = ["GroupCoordinator", "GroupSettings", "GroupState"]
