"""The ``kafkalog`` command line: broker, clients (topics, produce, consume, offsets), log tools,
the schema registry."""

from kafkalog.cli import (  # noqa: F401 - they register commands
    broker_command,
    client_commands,
    log_commands,
    mirror_command,
    registry_command,
    users_command,
)
from kafkalog.cli.main import main

__all__ = ["main"]
