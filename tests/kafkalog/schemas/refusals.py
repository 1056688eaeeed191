"""What the schema parsers' hostile-input tests share: a refusal that is quick and of the one type."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from kafkalog.schemas.errors import InvalidSchemaError

QUICK = 1.0  # seconds: a refusal takes less, on any input the bounds admit


def refused(call: Callable[[], Any], match: str, within: float = QUICK) -> InvalidSchemaError:
    """The InvalidSchemaError ``call`` raises, its message matching ``match``, within ``within`` seconds."""
    started = time.perf_counter()
    with pytest.raises(InvalidSchemaError) as caught:
        call()
    elapsed = time.perf_counter() - started
    assert re.search(match, str(caught.value)), str(caught.value)
    assert elapsed < within, f"refused after {elapsed:.2f}s"
    return caught.value


def quick(call: Callable[[], Any], within: float = QUICK) -> Any:
    """What ``call`` returns, within ``within`` seconds."""
    started = time.perf_counter()
    result = call()
    elapsed = time.perf_counter() - started
    assert elapsed < within, f"took {elapsed:.2f}s"
    return result
