"""Topic configs a client sends (CreateTopics, IncrementalAlterConfigs) are refused in the client's
words: the Kafka name it wrote (``segment.bytes``), not the broker's field (``segment_bytes``)."""

from __future__ import annotations

import pytest

from kafkalog.errors import LogConfigError
from kafkalog.log import LogConfig
from kafkalog.server.cluster.topic_config import kafka_value, topic_log_config


def test_a_value_the_log_refuses_is_named_as_the_client_wrote_it() -> None:
    with pytest.raises(LogConfigError) as info:
        topic_log_config(LogConfig(), {"segment.bytes": "10"})
    assert str(info.value) == "segment.bytes: must be in [64, 2147483647], not 10"


def test_an_unparsable_value_and_an_unknown_name_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^retention.ms='soon' is not a valid value \(expected an integer\)$"):
        topic_log_config(LogConfig(), {"retention.ms": "soon"})
    with pytest.raises(KeyError, match=r"unsupported topic config 'segment\.size'"):
        topic_log_config(LogConfig(), {"segment.size": "1"})


def test_accepted_values_override_the_broker_defaults() -> None:
    config = topic_log_config(LogConfig(segment_bytes=4096), {"retention.ms": "1000"})
    assert config is not None and config.retention_ms == 1000 and config.segment_bytes == 4096
    assert topic_log_config(LogConfig(), {}) is None


def test_compression_type_is_accepted_as_producer_and_a_codec_refused_with_what_to_do_instead() -> None:
    # Kafka Connect's topic creation and MirrorMaker's config sync send it; this broker stores
    # batches as their producer compressed them, which is Kafka's compression.type=producer
    config = topic_log_config(LogConfig(), {"compression.type": "producer"})
    assert config is not None and config.compression_type == "producer"
    assert kafka_value("compression.type", LogConfig()) == "producer"
    with pytest.raises(ValueError, match=r"^compression.type='lz4': this broker keeps batches as their producer"):
        topic_log_config(LogConfig(), {"compression.type": "lz4"})
    with pytest.raises(ValueError, match=r"^compression.type='brotli' is not a valid value \(expected producer\)$"):
        topic_log_config(LogConfig(), {"compression.type": "brotli"})
