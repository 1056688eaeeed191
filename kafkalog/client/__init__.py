"""Kafka clients: a producer, a simple consumer and admin calls, for kafkalog and Kafka brokers alike.

Uses kafkalog.protocol and kafkalog.record, and kafkalog.registry to bootstrap from ZooKeeper
(``zookeeper=``) or read the registry once (registry_view); knows nothing of the broker's internals.
"""

from kafkalog.client.admin import Admin
from kafkalog.client.client import Client, TopicMetadata
from kafkalog.client.consumer import EARLIEST, LATEST, FetchResult, SimpleConsumer
from kafkalog.client.partitioner import default_partitioner, murmur2
from kafkalog.client.producer import Producer
from kafkalog.client.producer_batch import RecordMetadata
from kafkalog.client.registry_view import RegistryView, check_connect_string, read_registry
from kafkalog.client.security import ClientSecurity

__all__ = [
    "EARLIEST",
    "LATEST",
    "Admin",
    "Client",
    "ClientSecurity",
    "FetchResult",
    "Producer",
    "RecordMetadata",
    "RegistryView",
    "SimpleConsumer",
    "TopicMetadata",
    "check_connect_string",
    "default_partitioner",
    "murmur2",
    "read_registry",
]
