"""The executor side: what runs in Spark's Python workers, and exactly what is shipped to them.

``splits`` (the split a task reads, and the consumer it reads it with), ``source`` (the Spark data
source: one task per split), ``decode`` (messages → Arrow batches, with the record kernels), ``sink``
(a task writing its own Parquet files). Nothing here imports the driver's plan, state or flow.
"""
