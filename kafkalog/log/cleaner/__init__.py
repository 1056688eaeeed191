"""The log cleaner: compaction of logs whose cleanup.policy includes compact (Kafka's LogCleaner).

See kafkalog.log.cleaner.cleaner for the thread that picks the dirtiest log and cleans it, and
docs/broker.md ("Compaction") for what it keeps.
"""
