"""spark-submit entry point: load one pipeline's new messages into its raw layer, exactly once,
then (if the pipeline has outputs) run its transforms, validate and publish.

    spark-submit [--master local[*] | yarn | k8s://… | spark://…] [--py-files pipelines.zip] \
        jobs/load_warehouse.py --pipeline conf/pipelines/<name>.yaml [--run-id ID] [--replan] \
        [--stage all|load|transforms|validate|publish] [--step NAME]
    spark-submit jobs/load_warehouse.py --pipeline conf/pipelines/<name>.yaml --rewind-to 2026-05-04T21:00Z

``--rewind-to T`` replays instead of loading: every message from time T on is loaded again into a
new generation, the outputs are recomputed, and readers switch to it in one step (docs/replay.md).

Exit code 0 only when the run committed (or there was nothing new, or the run id was committed
before); see ``pipelines run --help`` for the same job with a local Spark session.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipelines.spec import PipelineSpec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="load_warehouse.py", description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", required=True, help="the pipeline YAML file")
    parser.add_argument("--run-id", default=None, help="name of this run; a committed run id is a no-op")
    parser.add_argument("--replan", action="store_true", help="discard an uncommitted stored plan first")
    parser.add_argument("--quiet", action="store_true", help="errors only")
    parser.add_argument(
        "--stage",
        default="all",
        choices=("all", "load", "transforms", "validate", "publish"),
        help="one stage alone (Airflow runs one per task); all: every stage the pipeline has",
    )
    parser.add_argument("--step", default=None, help="with --stage transforms: only this step")
    parser.add_argument(
        "--rewind-to", default=None, metavar="TIME", help="replay from this time (ISO 8601, UTC unless it says)"
    )
    parser.add_argument("--dry-run", action="store_true", help="with --rewind-to: print the replay's plan only")
    args = parser.parse_args(argv)

    from pipelines.cli import EXIT_BAD_SPEC, run_stage  # noqa: PLC0415 - after argparse: --help stays fast
    from pipelines.errors import SpecError  # noqa: PLC0415
    from pipelines.spec import load_spec  # noqa: PLC0415

    try:
        spec = load_spec(args.pipeline)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_SPEC
    from pipelines.cli import done_already  # noqa: PLC0415

    if args.rewind_to is not None:
        return _replay(spec, args.rewind_to, args.quiet, dry_run=args.dry_run)
    reason = done_already(spec, args.stage, args.run_id)
    if reason is not None:  # said even with --quiet: one line that explains a task taking no time
        print(f"nothing to do: {reason}", file=sys.stderr)
        return 0
    from pyspark.sql import SparkSession  # noqa: PLC0415

    spark = SparkSession.builder.appName(f"load_warehouse-{spec.name}").getOrCreate()
    try:
        return run_stage(
            spec, spark, args.stage, run_id=args.run_id, step=args.step, replan=args.replan, quiet=args.quiet
        )
    finally:
        spark.stop()


def _replay(spec: PipelineSpec, when: str, quiet: bool, *, dry_run: bool) -> int:
    from pipelines.cli import EXIT_FAILED, replay_job  # noqa: PLC0415
    from pipelines.errors import PipelineError  # noqa: PLC0415
    from pipelines.replay import Replay, RewindTarget, parse_time, render  # noqa: PLC0415

    try:
        target = RewindTarget(time_ms=parse_time(when))
        if dry_run:
            from rich.console import Console  # noqa: PLC0415

            plan = Replay(spec).plan(target)
            render(plan, Console())
            return EXIT_FAILED if plan.failing else 0
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    from pyspark.sql import SparkSession  # noqa: PLC0415

    spark = SparkSession.builder.appName(f"replay-{spec.name}").getOrCreate()
    try:
        return replay_job(spec, spark, target, quiet=quiet)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
