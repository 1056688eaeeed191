"""The metastore's side of a pipeline: its raw layer and outputs as tables readers find by name.

Data flow: the committed manifests and published partitions (the truth) → ``desired`` (what the
metastore should hold) → ``changes`` (what differs from what it holds) → applied through Spark's
catalog (``metastore``). ``connection`` decides which metastore a session talks to. The metastore
is a projection: it is brought to match the manifests, never the reverse (docs/tables.md).
"""
