"""The mirror-maker: sources (data centers) consumed into one aggregate cluster, losing nothing."""

from kafkalog.mirror.config import ClusterSpec, MirrorConfig, MirrorConfigError, load_mirror_config
from kafkalog.mirror.gaps import GapPolicy, MirrorGapError
from kafkalog.mirror.mirror import Mirror, MirrorError
from kafkalog.mirror.tracker import AckTracker

__all__ = [
    "AckTracker",
    "ClusterSpec",
    "GapPolicy",
    "Mirror",
    "MirrorConfig",
    "MirrorConfigError",
    "MirrorError",
    "MirrorGapError",
    "load_mirror_config",
]
