"""Setup shared by the record tests.

kafka-python (the reference client of the interoperability tests) calls a deprecated importlib API
while it is imported; pytest runs with warnings as errors, so it is imported once here with that
one third-party DeprecationWarning silenced. Its modules are then cached for the test modules.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    # importlib.resources.read_text / open_text: "... is deprecated. Use files() instead."
    warnings.filterwarnings("ignore", message=r".* is deprecated\. Use files\(\) instead", category=DeprecationWarning)
    import kafka
    import kafka.codec
    import kafka.record
    import kafka.record.legacy_records
    import kafka.record.memory_records

__all__ = ["kafka"]
