"""The load job on a Spark standalone cluster: executors with the pure-Python kernels vs the C ones.

A kafkalog broker gets topic ``events`` (4 partitions, ``--messages`` events of ~250 bytes, as in
bench/load_bench.py). A real Spark standalone master and worker (2 cores) run on loopback; executors
run a Python that does not have this project installed (tests.support.spark.node_python), so they
use only what the job ships. Two contenders, alternately, ``--runs`` times each, each run a
``spark-submit jobs/load_warehouse.py`` in client mode into a fresh raw directory:

- zip: ``--py-files pipelines.zip`` (pure Python: executors decode with the pure-Python kernels);
- archive: ``--archives pipelines-code.tar.gz#pipelines_code`` with the C kernels
  (pipelines.app.ship), which the manifest confirms (``stats.task_kernels``).

Rows/s is the committed rows over the run's load time as its manifest records it (``stats.seconds``:
the Spark job, reconcile and staging, not the JVM's start); the ratio is of the medians.

    .venv/bin/python -m bench.cluster_load_bench [--messages N] [--runs R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from bench.load_bench import produce, write_spec
from bench.results import print_results, result
from pipelines.app.ship import ARCHIVE_NAME, ZIP_NAME, build_archive, build_zip, submit_options
from pipelines.ledger.state import PipelineState
from pipelines.storage import LocalStorage
from tests.support.kafkalog import BrokerProcess
from tests.support.spark import REPO, explain, node_python, spark_cluster, submit


def one_run(master: str, ship: list[str], python: Path, work: Path, bootstrap: str, name: str) -> tuple[float, str]:
    """One spark-submit load into a fresh raw directory: (rows/s, the kernels its tasks ran)."""
    work.mkdir(parents=True)
    raw = work / "raw"
    pipeline = write_spec(work, bootstrap, raw, "events", name)
    done = submit(master, ship, python, pipeline, work / "submit", timeout=900, driver_path=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: spark-submit exited {done.returncode}\n" + explain(done.stdout, done.stderr))
    manifest = PipelineState(LocalStorage(), str(raw)).manifest(1)
    rows = sum(s.rows for s in manifest.splits)
    return rows / manifest.stats["seconds"], ",".join(manifest.stats.get("task_kernels", [])) or "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=400_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cluster-load-bench-") as tmp:
        base = Path(tmp)
        dist = base / "dist"
        build_zip(dist / ZIP_NAME)
        build_archive(dist / ARCHIVE_NAME)
        contenders = {"zip": submit_options(dist, archive=False), "archive": submit_options(dist, archive=True)}
        with BrokerProcess(base / "broker", default_partitions=4) as broker:
            seconds = produce(broker, "events", args.messages)
            print(f"produced {args.messages:,} events in {seconds:.1f} s", file=sys.stderr)
            python = node_python(base / "node")
            rates: dict[str, list[float]] = {name: [] for name in contenders}
            with spark_cluster(base / "spark", python=str(python)) as master:
                for run in range(args.runs):
                    for name, ship in contenders.items():
                        rate, kernels = one_run(master, ship, python, base / f"{name}-{run}", broker.bootstrap, name)
                        print(f"run {run} {name}: {rate:,.0f} rows/s (task kernels: {kernels})", file=sys.stderr)
                        rates[name].append(rate)
    zipped, archived = statistics.median(rates["zip"]), statistics.median(rates["archive"])
    result("cluster_load_rows_per_s_pure_python_executors", zipped, "rows/s")
    result("cluster_load_rows_per_s_c_kernel_executors", archived, "rows/s")
    result("cluster_load_c_kernels_vs_pure_python", archived / zipped, "x")
    print_results()
    return 0


if __name__ == "__main__":
    sys.exit(main())
