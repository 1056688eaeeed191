"""The client's statement of which record kernels its decoding runs: the C ones or the pure-Python
twins (kafkalog.record.kernels chooses when it is imported).

Applications built on the clients (the pipelines' driver and executors) report it in their logs and
run records; they ask here, not the record layer, which the clients keep behind them. ``KERNELS`` is
"C" or "pure Python"; ``describe_kernels()`` is one line for a log, saying why when not C.
"""

from kafkalog.record.kernels import KERNELS
from kafkalog.record.kernels import describe as describe_kernels

__all__ = ["KERNELS", "describe_kernels"]
