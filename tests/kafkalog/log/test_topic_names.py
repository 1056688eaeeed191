"""Topic names: Kafka's rule, and the prefix the data directory keeps for deleted partitions."""

from __future__ import annotations

import pytest

from kafkalog.errors import LogConfigError
from kafkalog.log import validate_topic
from kafkalog.log.manager import partition_of


@pytest.mark.parametrize("topic", ["a", "web.page_views", "A-b_c.9", "x" * 249, "deleted-x", "..x", ".hidden"])
def test_names_kafka_allows_are_taken(topic: str) -> None:
    validate_topic(topic)
    assert partition_of(f"{topic}-0") == (topic, 0)  # and its partitions are found again at start


@pytest.mark.parametrize(
    ("topic", "words"),
    [
        ("", "1-249"),
        ("x" * 250, "1-249"),
        ("a b", "1-249"),
        ("ä", "1-249"),
        (".", "1-249"),
        ("..", "1-249"),
        (".deleted-x", "kept for deleted partitions"),  # its partitions would be removed at start
        (".deleted-", "kept for deleted partitions"),
    ],
)
def test_other_names_are_refused_saying_why(topic: str, words: str) -> None:
    with pytest.raises(LogConfigError, match=words) as caught:
        validate_topic(topic)
    assert repr(topic) in str(caught.value)
