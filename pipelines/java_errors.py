"""What a Java exception says, read out of py4j's text: the one place that knows that text's shape.

py4j's ``Py4JJavaError`` reads ``An error occurred while calling o12.create.\n: org.apache…Exception:
message`` then the Java stack, with ``Caused by: …`` lines for the causes. The storage layer, the
load stage and the embedded metastore each name the Java line in their errors; they read it here.
"""

from __future__ import annotations

_WRAPPERS = ("org.apache.spark.", "java.util.concurrent.ExecutionException", "py4j.")
"""Exceptions that only wrap another (Spark's task and job failures): never a first cause."""


def lines_of(exc: BaseException) -> list[str]:
    return [line.strip() for line in str(exc).splitlines() if line.strip()]


def java_line(exc: BaseException) -> str:
    """The Java exception's own line (``org.apache…Exception: message``), without py4j's preamble
    and the ``": "`` it puts before it; else the first line that is not the preamble."""
    lines = lines_of(exc)
    line = next((line for line in lines if "Exception" in line or "Error:" in line), "").lstrip(": ").strip()
    return line or next((line for line in lines if not line.startswith("An error occurred")), repr(exc))


def first_cause(lines: list[str]) -> str:
    """The first ``Caused by:`` of a Java stack that is not a wrapper's (a task's failure wraps the
    filesystem's or the broker's error in Spark's): what went wrong, such as HDFS's
    ``SafeModeException: Cannot create file …``; "" if none."""
    causes = [line.removeprefix("Caused by:").strip() for line in lines if line.startswith("Caused by:")]
    return next((cause for cause in causes if not cause.startswith(_WRAPPERS)), "")
