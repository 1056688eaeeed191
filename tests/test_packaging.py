"""Packaging: the broker installs without Spark, and every third-party import is declared.

The base dependencies of pyproject.toml are the broker side's (kafkalog); the job framework's are the
``pipelines`` extra. Every module's imports are read (ast, not a guess) and matched to the
distribution that provides them.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

PROVIDED_BY = {
    "kazoo": "kazoo",
    "snappy": "python-snappy",
    "cramjam": "cramjam",
    "lz4": "lz4",
    "xxhash": "xxhash",
    "crc32c": "crc32c",
    "yaml": "pyyaml",
    "click": "click",
    "rich": "rich",
    "pyspark": "pyspark",
    "pyarrow": "pyarrow",
    "pandas": "pandas",
    "numpy": "numpy",
    "hdfs": "hdfs",
    "great_expectations": "great-expectations",
    "jinja2": "jinja2",
    "markupsafe": "markupsafe",
    "sqlglot": "sqlglot",
    "fastavro": "fastavro",
}
HOSTED = {"airflow"}
"""Imported only inside the host that runs the module (pipelines.app.airflow runs in Airflow)."""


def declared(group: str | None) -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    entries = project["dependencies"] if group is None else project["optional-dependencies"][group]
    return {re.split(r"[\[<>=!~ ;]", entry, maxsplit=1)[0].lower() for entry in entries}


def third_party_imports(package: str) -> dict[str, str]:
    """Top-level module → the first file of ``package`` that imports it."""
    found: dict[str, str] = {}
    for path in sorted((REPO / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("kafkalog", "pipelines"):
                    found.setdefault(top, str(path.relative_to(REPO)))
    return found


@pytest.mark.unit
def test_the_broker_side_installs_without_the_job_frameworks_dependencies() -> None:
    base = declared(None)
    assert not base & {"pyspark", "great-expectations", "pyarrow", "pandas", "hdfs", "jinja2", "apache-airflow"}
    for module, where in third_party_imports("kafkalog").items():
        assert module in PROVIDED_BY, f"{where} imports {module}: which distribution provides it?"
        assert PROVIDED_BY[module] in base, f"{where} imports {module}, not in the base dependencies"


@pytest.mark.unit
def test_every_import_of_pipelines_is_declared() -> None:
    available = declared(None) | declared("pipelines")
    for module, where in third_party_imports("pipelines").items():
        if module in HOSTED:
            continue
        assert module in PROVIDED_BY, f"{where} imports {module}: which distribution provides it?"
        assert PROVIDED_BY[module] in available, f"{where} imports {module}, not declared for pipelines"


@pytest.mark.integration
def test_the_expectations_library_imports_in_a_program_run_as_python_c() -> None:
    # pyspark.sql.connect (which great-expectations imports) exits 0 in a `python -c` program, and in
    # a pytest-xdist worker, unless its own packages are installed: the run would end, "successful"
    import subprocess

    program = "from pipelines.flow.expect import _import_gx; _import_gx(); print('imported')"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout) == (0, "imported\n"), done.stderr[-2000:]


@pytest.mark.integration
def test_a_program_that_will_validate_imports_the_expectations_library_while_spark_starts() -> None:
    import subprocess

    program = """
import sys, threading
from pipelines.config.pipeline import load_spec
from pipelines.app import runner
from pipelines.flow import expect
spec = load_spec("conf/pipelines/page_views.yaml")
runner.import_ahead(spec, "load")  # a load alone checks nothing: no import
print(expect._background_import is None, "great_expectations" in sys.modules)
runner.import_ahead(spec, "all")
started = expect._background_import
print(started is not None and started.name, threading.current_thread() is not started)
gx, _ = expect._import_gx()  # waits for the thread: afterwards the library is there, imported once
print(started.is_alive(), sys.modules["great_expectations"] is gx)
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["True False", "import great-expectations True", "False True"]
