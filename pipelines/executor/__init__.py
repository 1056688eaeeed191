"""The executor side: what runs in Spark's Python workers, and exactly what is shipped to them.

``splits`` (the split a task reads, and the consumer it reads it with), ``source`` (the Spark data
source: one task per split), ``decode`` (a chunk of messages → an Arrow batch of raw rows, with the
record kernels), around it ``rows`` (the raw row's columns), ``arrow_types``, ``payloads`` (one
module per decoder format), ``event_time`` and ``halving`` (bad messages found at chunk speed), and
``sink`` (a task writing its own Parquet files). Nothing here imports the driver's plan, ledger or
flow.
"""
