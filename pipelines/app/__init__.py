"""The application layer: ``runner`` (the operations and exit codes every entry point shares),
``cli`` (the ``pipelines`` command and the spark-submit job's options), ``airflow`` (DAGs whose
tasks call that job), ``session`` (a local SparkSession), ``ship`` (what executors get)."""
