"""The loader's schemas, on the driver: a schema registry's, read once per run and shipped to the tasks.

``registry_client`` reads a registry's REST API; ``resolved`` holds a run's schemas (per topic:
the reader schema and every writer schema by id) as data the tasks receive in their options;
``columns`` maps a schema to the raw layer's Arrow columns. No task ever asks the registry.
"""
