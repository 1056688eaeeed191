"""``make demo``: the whole deployment on one machine, end to end (``python -m demo``).

Two data-center clusters and an aggregate one (kafkalog brokers; ``--zookeeper``: registered in a
ZooKeeper the demo starts), a mirror-maker between them, realistic web activity produced in both
data centers, the page_views pipeline (load, transforms, expectations, publish) on local Spark, an
incremental run, a rewind-and-replay, a short report; every process it started is stopped at the
end, whatever happens.

Modules: ``processes`` starts and always stops the child processes; ``results`` keeps the last
demo's results until a new demo's servers run; ``activity`` generates the events; ``__main__``
tells the story.
"""
