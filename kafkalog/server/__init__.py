"""The broker: network server, request handlers, static cluster view, offset store. Nothing in
kafkalog imports this package except the command line."""

from kafkalog.server.broker import Broker
from kafkalog.server.config import BrokerAddress, BrokerConfig, BrokerConfigError, Limits, TopicSpec, load_config

__all__ = ["Broker", "BrokerAddress", "BrokerConfig", "BrokerConfigError", "Limits", "TopicSpec", "load_config"]
