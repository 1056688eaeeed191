"""The process harness shared by the tests and the benchmarks (docs/testing.md): every real peer
(kafkalog brokers, ZooKeeper, Kafka 0.9, Kafka 4.x, Hadoop's mini clusters, Spark), started on free
loopback ports in temporary directories and stopped with everything it forked; and the session
fixtures that share them (``fixtures``)."""
