"""Exactly-once Spark batch loads from kafkalog (or Kafka) into a warehouse, and what follows them.

The packages, in the order data flows through them (each imports only those listed before it):

- ``errors``, ``faults``, ``logs``: the exception root, crash points for fault tests, log levels.
- ``config``: the pipeline file: its typed model, the strict loader, the generated reference.
- ``storage``: the file systems the commit protocol runs on, and the one resolver of a path.
- ``layout``: where generations and partitions live under a dataset's root.
- ``executor``: what runs in Spark's Python workers (and all that is shipped to them): a split, the
  Spark source that reads it, the decoders, the task-side Parquet writer.
- ``progress``: the live view of a run for people (bars on a terminal, lines in a log).
- ``ledger``: the run ledger beside the raw layer: stored plans, committed manifests, leases, and
  every path under ``_pipeline/`` (the state every later stage shares).
- ``ingest``: one load, recover → plan → load → reconcile → commit → publish (the exactly-once core).
- ``flow``: after a load: transforms, expectations, publish of the outputs.
- ``replay`` | ``reporting``: rewind-and-replay into a new generation; run reports and summaries.
- ``app``: the runner behind the ``pipelines`` command, the spark-submit job and the Airflow DAGs.
"""
