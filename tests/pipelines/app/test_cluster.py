"""The load job as a cluster runs it: spark-submit of jobs/load_warehouse.py to a real Spark standalone
master and worker on loopback, with our code shipped by ``pipelines.app.ship``: the ``--py-files`` zip
(pure Python: the run records and warns that its tasks ran the slow kernels), then the ``--archives``
tarball (the executors load the C kernels from it, and the manifest records it).

The venv has this project installed (editable), so a job could pass by importing it from there. The
executors here run the venv's interpreter and libraries WITHOUT the install: ``python -S`` (no site
hooks, so no editable finder) with a copy of site-packages that leaves the project's entries out. A
cluster node that has never seen this project looks like that. Their Python also runs verbose (``-v``),
so each executor's log says where every module came from, and the test reads it: every ``pipelines``
and ``kafkalog`` module the executors imported came from the shipped zip, and the C kernels did not
load (an extension module cannot be imported from a zip; the pure-Python twin ran).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pipelines.app.ship import ARCHIVE_NAME, build_archive, build_zip, submit_options
from pipelines.ledger.state import PipelineState
from pipelines.storage import LocalStorage
from tests.pipelines.harness import REPO, oracle, produce, write_spec
from tests.support.kafkalog import BrokerProcess
from tests.support.spark import (
    executor_imports,
    explain,
    imports_dir,
    node_libraries,
    node_python,
    spark_cluster,
    submit,
    worker_dir,
)

EVENTS = 20_000
SUBMIT_TIMEOUT = 180.0
ZIP_IN_LOADER = re.compile(r'^<zipimporter object "(.+?\.zip)/')


@pytest.mark.integration
def test_the_zip_is_deterministic_and_self_sufficient(tmp_path: Path) -> None:
    first = build_zip(tmp_path / "a" / "pipelines.zip")
    second = build_zip(tmp_path / "b" / "pipelines.zip")
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as archive:
        names = archive.namelist()
        assert names == sorted(names)
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert "pipelines/executor/source.py" in names
    assert "kafkalog/client/__init__.py" in names
    assert "kafkalog/record/_speedups.pyi" in names
    assert "kafkalog/py.typed" in names
    assert not [n for n in names if n.endswith((".so", ".pyc", ".c")) or "__pycache__" in n]
    # every shipped module imports from the zip alone (plus third-party libraries), C kernels absent
    modules = sorted(
        n.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for n in names if n.endswith(".py")
    )
    libraries = node_libraries(tmp_path / "node")
    check = (
        "import importlib, importlib.util, sys\n"
        "assert importlib.util.find_spec('pipelines') is None, 'the installed copy is visible'\n"
        f"sys.path.insert(0, {str(first)!r})\n"
        f"for name in {modules!r}:\n"
        # the command lines ask importlib.metadata for the installed distribution's version at import
        "    if name.split('.')[:2] not in (['pipelines', 'cli'], ['kafkalog', 'cli']):\n"
        "        module = importlib.import_module(name)\n"
        f"        assert module.__file__.startswith({str(first)!r}), module.__file__\n"
        "import kafkalog.record.kernels as kernels\n"
        "assert not kernels.NATIVE\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", check],  # -S: no editable finder; PYTHONPATH: the libraries but not us
        env={**os.environ, "PYTHONPATH": str(libraries)},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n" + explain(result.stdout, result.stderr)


@pytest.mark.slow
def test_spark_submit_to_a_standalone_cluster_loads_exactly_once_with_the_zip_then_the_archive(
    tmp_path: Path, broker: BrokerProcess
) -> None:
    produce(broker.bootstrap, "events", EVENTS, partitions=4)
    raw = tmp_path / "raw"
    pipeline = write_spec(tmp_path, broker.bootstrap, raw)
    py_files = build_zip(tmp_path / "dist" / "pipelines.zip")
    python = node_python(tmp_path / "node")
    spark_base = tmp_path / "spark"
    with spark_cluster(spark_base, python=str(python)) as master:
        first = submit(master, ["--py-files", str(py_files)], python, pipeline, tmp_path / "submit")
        assert first.returncode == 0, f"exit {first.returncode}\n" + explain(first.stdout, first.stderr)
        totals = oracle(raw, broker.bootstrap)
        assert totals["rows"] == EVENTS
        assert totals["quarantined"] == 0
        assert len(totals["seqs"]) == 1
        state = PipelineState(LocalStorage(), str(raw))
        assert state.manifest(1).stats["task_kernels"] == ["pure Python"]
        # (spark-submit merges the Python driver's stderr into its stdout)
        assert "pure-Python record kernels" in first.stdout, "a run whose tasks ran slow kernels must say so"

        # where the executors' code came from (read before the second run adds its own logs)
        imports = executor_imports(tmp_path / "node", spark_base)
        imported = {name for name, _, _ in imports}
        assert {
            "pipelines.executor.source",
            "pipelines.executor.decode",
            "kafkalog.client",
            "kafkalog.record.kernels",
        } <= imported, f"executors' imports of ours: {sorted(imported)} (logs in {imports_dir(tmp_path / 'node')})"
        elsewhere = [(name, loader) for name, loader, _ in imports if not loader.startswith("<zipimporter object")]
        assert not elsewhere, f"executors imported our modules from outside a zip: {elsewhere[:5]}"
        zips = {(cwd / m.group(1)).resolve() for _, loader, cwd in imports if (m := ZIP_IN_LOADER.search(loader))}
        assert zips, imports[:5]
        for shipped in zips:  # the executor's copy of the --py-files zip, byte for byte
            assert shipped.is_relative_to(worker_dir(spark_base).resolve()), shipped
            assert shipped.read_bytes() == py_files.read_bytes(), shipped

        # the archive: the same code with the C kernels, unpacked on the executors
        produce(broker.bootstrap, "events", EVENTS // 4, first=EVENTS)
        dist = tmp_path / "dist"
        build_archive(dist / ARCHIVE_NAME)
        ship = submit_options(dist, archive=True)
        second = submit(master, ship, python, pipeline, tmp_path / "submit2", driver_path=REPO)
        assert second.returncode == 0, f"exit {second.returncode}\n" + explain(second.stdout, second.stderr)
        again = oracle(raw, broker.bootstrap)
        assert again["rows"] == EVENTS + EVENTS // 4 and again["seqs"] == [1, 2]
        assert state.manifest(2).stats["task_kernels"] == ["C"]
        assert "pure-Python" not in second.stdout
        loaded = [
            Path(loader.removeprefix("extension module "))
            for name, loader, _ in executor_imports(tmp_path / "node", spark_base)
            if loader.startswith("extension module") and name == "kafkalog.record._speedups"
        ]
        assert loaded, "no executor loaded the C kernels"
        for path in loaded:  # from the archive Spark unpacked for the executor, not from this checkout
            assert path.resolve().is_relative_to(worker_dir(spark_base).resolve()), path
            assert "pipelines_code" in path.parts, path
