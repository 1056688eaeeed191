"""The run ledger: what a pipeline has planned, committed and published, kept beside its raw layer.

``paths`` names every file and directory under ``<raw>/_pipeline/``; ``records`` are the stored
plans and manifests; ``state`` stores, commits, publishes and recovers them (the commit protocol);
``lease`` tells which staged attempts still belong to a live run; ``partitions`` lists the
partitions a dataset directory holds. Every stage reads and writes the ledger only through these.
"""
