"""Kafka clients: a producer, a simple consumer and admin calls, for kafkalog and Kafka brokers alike.

Uses kafkalog.protocol and kafkalog.record only; knows nothing of the broker's internals.
"""

from kafkalog.client.admin import Admin
from kafkalog.client.client import Client, TopicMetadata
from kafkalog.client.consumer import EARLIEST, LATEST, FetchResult, SimpleConsumer
from kafkalog.client.partitioner import default_partitioner, murmur2
from kafkalog.client.producer import Producer, RecordMetadata

__all__ = [
    "EARLIEST",
    "LATEST",
    "Admin",
    "Client",
    "FetchResult",
    "Producer",
    "RecordMetadata",
    "SimpleConsumer",
    "TopicMetadata",
    "default_partitioner",
    "murmur2",
]
