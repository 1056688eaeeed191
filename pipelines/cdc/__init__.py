"""Change data capture: Debezium's change events into typed changes (``events.py``) and the rule
that folds them into a mirrored table and its history (``apply.py``); pure, no Spark, no storage."""
