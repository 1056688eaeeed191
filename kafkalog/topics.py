"""The names every layer shares for a place in a cluster's logs.

``TopicPartition``: (topic, partition), the key of a log, a fetch, an offset or a split, from the
segment log's checkpoints to the pipelines' plans. One definition, so that a signature's
``TopicPartition`` means the same everywhere.
"""

from __future__ import annotations

TopicPartition = tuple[str, int]
