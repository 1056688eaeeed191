"""One load of a pipeline, exactly once: recover → plan → load → reconcile → commit → publish.

``plan`` fixes each split's offsets before any task runs; ``state`` keeps plans, staged attempts
and the manifests (the commit point and the only offset store) beside the output; ``reconcile``
proves every offset of every split was loaded once; ``run`` drives the stages in that order.
"""
