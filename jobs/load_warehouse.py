"""spark-submit entry point: load one pipeline's new messages into its raw layer, exactly once,
then (if the pipeline has outputs) run its transforms, validate and publish; or replay it.

    spark-submit [--master local[*] | yarn | k8s://… | spark://…] [--archives …] \
        jobs/load_warehouse.py --pipeline conf/pipelines/<name>.yaml [--run-id ID] [--replan] \
        [--stage all|load|transforms|validate|publish] [--step NAME] [--log-level INFO]
    spark-submit jobs/load_warehouse.py --pipeline conf/pipelines/<name>.yaml --to-time 2026-05-04T21:00Z [--dry-run]

The options are ``pipelines run``'s and ``pipelines rewind``'s (one runner serves both: see
``pipelines.app.cli.spark_submit_main``), on the session spark-submit makes. Exit code 0 only when
the run committed (or there was nothing new, or the run id was committed before).
"""

from __future__ import annotations

import sys

from pipelines.app.cli import spark_submit_main

if __name__ == "__main__":
    sys.exit(spark_submit_main(prog_name="load_warehouse.py"))
