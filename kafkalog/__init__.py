"""kafkalog: a Kafka-style broker: segment log, wire protocol, server, clients, mirror-maker."""

__version__ = "0.1.0"
