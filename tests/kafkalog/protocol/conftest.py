"""Setup shared by the protocol tests.

kafka-python (the reference client of the interoperability tests) calls a deprecated importlib API
while it is imported (its JSON message schemas are loaded at import time); pytest runs with warnings
as errors, so every module the tests use is imported once here with that one third-party
DeprecationWarning silenced. Its modules are then cached for the test modules.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    # importlib.resources.read_text / open_text: "... is deprecated. Use files() instead."
    warnings.filterwarnings("ignore", message=r".* is deprecated\. Use files\(\) instead", category=DeprecationWarning)
    import kafka
    import kafka.protocol.admin
    import kafka.protocol.consumer
    import kafka.protocol.metadata
    import kafka.protocol.old.admin
    import kafka.protocol.old.api
    import kafka.protocol.old.api_versions
    import kafka.protocol.old.commit
    import kafka.protocol.old.fetch
    import kafka.protocol.old.find_coordinator
    import kafka.protocol.old.list_offsets
    import kafka.protocol.old.metadata
    import kafka.protocol.old.produce
    import kafka.protocol.producer

__all__ = ["kafka"]
