"""Benchmarks of kafkalog and pipelines (``make bench``); figures go to docs/benchmarks.md."""
