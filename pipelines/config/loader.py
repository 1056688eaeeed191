"""How pipeline files are read: kafkalog.configfile's typed loader, raising SpecError.

The broker's and the mirror-maker's files are read by the same loader, so the three refuse the same
mistakes in the same words: duplicate, unknown (with the closest known key) and missing keys, wrong
types, ``${env:NAME}`` references (an unset one names the key; values read from the environment are
never echoed, and a password written into a URL in clear is refused). Errors name
``file:key.path``. The config classes (pipelines.config.pipeline, .steps) raise SpecError with a
message that starts with their key; the loader puts the path and the file in front.
"""

from __future__ import annotations

from kafkalog.configfile import TypedLoader
from kafkalog.errors import ClientError
from pipelines.errors import SpecError

LOADER = TypedLoader(SpecError, invalid=(ClientError,), what="pipeline file")
"""(ClientError: a source's ``security`` mapping is kafkalog.client's ClientSecurity, checked by it.)"""
