"""The ``kafkalog`` command line: broker, clients (topics, produce, consume, offsets), log tools."""

from kafkalog.cli import broker_command, client_commands, log_commands, mirror_command  # noqa: F401 - they register commands
from kafkalog.cli.main import main

__all__ = ["main"]
