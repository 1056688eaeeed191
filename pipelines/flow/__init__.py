"""After a load: the pipeline's transforms in their graph, great-expectations gates, and the
publish of each output's partitions (``run``; expectations in ``expect``)."""
