"""After a load: the pipeline's transforms in their graph, great-expectations gates, and the
publish of each output's partitions.

``run`` decides which loads and partitions a flow covers and runs the stages in order:
``transforms`` (the Spark SQL steps), ``validation`` (the gates, with ``expect``), ``publish``
(the partitions swapped in, readers kept whole)."""
