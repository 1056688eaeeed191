"""pipelines: exactly-once Spark batch loads from kafkalog into a warehouse, defined in YAML."""
