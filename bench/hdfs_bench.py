"""Broker to committed raw layer on a real HDFS vs on the local disk, in one run, same data.

A ``kafkalog broker`` gets topic ``events`` (4 partitions, ``--messages`` JSON events of ~250 bytes,
load_bench's); Hadoop's MiniDFSCluster (one NameNode, one DataNode, on this machine's disk: `make
peers`) runs beside it; one Spark ``local[2]`` session is started before any timing. Three
contenders load exactly those messages, in turn, ``--runs`` times each, each into a fresh raw layer:

- ``local``: the raw layer on the local disk, the default writer there (``tasks``: each task writes
  its split with Arrow);
- ``local-spark``: the local disk with ``raw.writer: spark`` (Spark's partitioned writer), which is
  what HDFS gets: this row separates the writer's cost from the filesystem's;
- ``hdfs``: the raw layer on ``hdfs://`` (Spark's writer on the executors, the commit protocol
  through Hadoop's FileSystem in the driver's JVM).

One untimed run of each comes first (a fresh JVM's first run is slower). Rows/s is committed rows
over the whole run's seconds (plan, load, reconcile, commit, publish); ratios are of the medians.
The cost of the commit itself (the manifest's create-if-absent, then one rename per file, the
staging removed and the run indexed) is timed inside each run around ``PipelineState.commit`` and
``PipelineState.roll_forward``. Ends with ``RESULT <name> <value> <unit>`` lines.

    .venv/bin/python -m bench.hdfs_bench [--messages N] [--runs R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.load_bench import PARTITIONS, TOPIC, produce, write_spec
from bench.results import print_results, result

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CONTENDERS = ("local", "local-spark", "hdfs")


class CommitTimer:
    """Seconds spent in PipelineState.commit and .roll_forward while installed (bench-only wrapping)."""

    def __init__(self) -> None:
        from pipelines.ledger.state import PipelineState

        self.seconds = 0.0
        self._state = PipelineState
        self._originals = {name: getattr(PipelineState, name) for name in ("commit", "roll_forward")}

    def __enter__(self) -> CommitTimer:
        for name, original in self._originals.items():
            setattr(self._state, name, self._timed(original))
        return self

    def _timed(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        return timed

    def __exit__(self, *exc: object) -> None:
        for name, original in self._originals.items():
            setattr(self._state, name, original)


def run_once(spark: Any, spec_path: Path) -> tuple[float, float, int, int]:
    """(seconds, commit seconds, committed rows, files) of one whole run."""
    from pipelines.config.pipeline import load_spec
    from pipelines.ingest.run import PipelineRun

    with CommitTimer() as commit:
        started = time.perf_counter()
        outcome = PipelineRun(load_spec(spec_path), spark).run()
        elapsed = time.perf_counter() - started
    if outcome.status != "committed":
        raise RuntimeError(f"{spec_path}: {outcome.status}")
    manifest = outcome.manifest
    return elapsed, commit.seconds, sum(s.rows for s in manifest.splits), len(manifest.files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)

    from pipelines.app.session import local_session
    from tests.support.hadoop import HadoopCluster
    from tests.support.kafkalog import BrokerProcess

    count = args.messages
    root = Path(tempfile.mkdtemp(prefix="pipelines-hdfs-bench-"))
    print(
        f"# broker -> committed raw layer, local disk vs HDFS (MiniDFSCluster): {count:,} JSON events of ~250 "
        f"bytes, {PARTITIONS} partitions, Spark local[2]; {os.cpu_count()} CPUs; load average "
        f"{os.getloadavg()[0]:.1f} at the start"
    )
    with (
        BrokerProcess(root / "broker", default_partitions=PARTITIONS) as broker,
        HadoopCluster(root / "hadoop", quick_jvm=False) as hadoop,
    ):
        print(f"produced {count:,} events in {produce(broker, TOPIC, count):.1f} s")
        spark = local_session("local[2]")
        places = {
            "local": (lambda n: str(root / f"raw-{n}"), "auto"),
            "local-spark": (lambda n: str(root / f"raw-spark-{n}"), "spark"),
            "hdfs": (lambda n: f"{hadoop.hdfs_url}/bench/raw-{n}", "auto"),
        }
        times: dict[str, list[float]] = {c: [] for c in CONTENDERS}
        commits: dict[str, list[float]] = {c: [] for c in CONTENDERS}
        for rep in range(-1, args.runs):  # -1: the untimed warm-up of each
            for contender in CONTENDERS:
                where, writer = places[contender]
                name = f"{contender.replace('-', '_')}_{rep + 1}"
                seconds, commit, rows, files = run_once(
                    spark, write_spec(root, broker.bootstrap, where(name), TOPIC, name, writer)
                )
                if rows != count:
                    raise RuntimeError(f"{contender}: {rows:,} rows committed, wanted {count:,}")
                label = "warm-up" if rep < 0 else f"run {rep + 1}"
                print(
                    f"{label} {contender:<11}: {seconds:6.2f} s ({count / seconds:>9,.0f} rows/s); commit "
                    f"{commit * 1000:7.1f} ms for {files} files"
                )
                if rep >= 0:
                    times[contender].append(seconds)
                    commits[contender].append(commit)
        spark.stop()
    rates = {c: count / statistics.median(times[c]) for c in CONTENDERS}
    commit_ms = {c: 1000 * statistics.median(commits[c]) for c in CONTENDERS}
    print(
        f"median of {args.runs}: "
        + ", ".join(f"{c} {rates[c]:,.0f} rows/s (commit {commit_ms[c]:.1f} ms)" for c in CONTENDERS)
    )
    for contender in CONTENDERS:
        key = contender.replace("-", "_")
        result(f"hdfs_bench_rows_per_s_{key}", rates[contender], "rows/s")
        result(f"hdfs_bench_commit_ms_{key}", commit_ms[contender], "ms")
    result("hdfs_bench_ratio_hdfs_vs_local", rates["hdfs"] / rates["local"], "x")
    result("hdfs_bench_ratio_hdfs_vs_local_spark_writer", rates["hdfs"] / rates["local-spark"], "x")
    result("hdfs_bench_commit_ratio_hdfs_vs_local", commit_ms["hdfs"] / commit_ms["local"], "x")
    print_results()
    return 0


if __name__ == "__main__":
    sys.exit(main())
