"""One load of a pipeline, exactly once: recover → plan → load → reconcile → commit → publish.

``plan`` fixes each split's offsets before any task runs; ``stage`` has Spark load them into an
attempt's staging; ``reconcile`` proves every offset of every split was loaded once; ``run`` drives
the stages in that order, storing and committing through the run ledger (pipelines.ledger).
"""
