"""The import contracts of pyproject.toml can fail: each one breaks when its forbidden import appears.

A contract that cannot fail is not a contract. The tree is copied, one forbidden import per contract
is added to the copy, and ``lint-imports`` run on it must report every contract broken; a contract
added to pyproject.toml without a forbidden import here fails this test too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # runs lint-imports, a process

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

FORBIDDEN_IMPORT = {
    # contract name (its start) -> (the module that gets the import, the import)
    "kafkalog's layers": ("kafkalog/record/forbidden.py", "import kafkalog.client"),
    "message sets are laid out on their own": (
        "kafkalog/record/legacy_builder.py",
        "import kafkalog.record.batch_format",
    ),
    "record batches are laid out on their own": (
        "kafkalog/record/batch_format.py",
        "import kafkalog.record.legacy_format",
    ),
    "kafkalog.schemas is pure data": ("kafkalog/schemas/forbidden.py", "import kafkalog.client"),
    "kafkalog.client speaks the protocol": ("kafkalog/client/forbidden.py", "import kafkalog.log"),
    "the producer's accumulator, encoder and batches send nothing": (
        "kafkalog/client/accumulator.py",
        "import kafkalog.client.connection",
    ),
    "kafkalog.mirror is a consumer and a producer": ("kafkalog/mirror/forbidden.py", "import kafkalog.protocol"),
    "kafkalog.schema_registry is a client of any cluster": (
        "kafkalog/schema_registry/forbidden.py",
        "import kafkalog.log",
    ),
    "the broker's layers": ("kafkalog/server/fetch.py", "import kafkalog.server.handlers"),
    "the transaction coordinator decides": ("kafkalog/server/transactions/coordinator.py", "import kafkalog.log"),
    "the group coordinator is group state": ("kafkalog/server/groups/forbidden.py", "import kafkalog.server.network"),
    "a consumer's broker-coordinated membership": (
        "kafkalog/client/broker_membership.py",
        "import kafkalog.registry.groups",
    ),
    "pipelines' layers": ("pipelines/executor/forbidden.py", "import pipelines.ledger.records"),
    "pipelines.cdc is a pure rule": ("pipelines/cdc/forbidden.py", "import pipelines.storage"),
    "the catalog is a projection of the ledger": ("pipelines/catalog/forbidden.py", "import pipelines.flow.run"),
    "pipelines use kafkalog only through kafkalog.client": ("pipelines/ingest/forbidden.py", "import kafkalog.mirror"),
    "kafkalog knows nothing of pipelines": ("kafkalog/log/forbidden.py", "import pipelines.errors"),
    "benchmarks and the test harness": ("bench/forbidden.py", "import tests.pipelines.harness"),
    "the applications (demo, jobs, airflow_dags)": ("airflow_dags/page_views.py", "import pipelines.flow.run"),
}


def contract_names() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return [c["name"] for c in config["tool"]["importlinter"]["contracts"]]


def forbidden_import_for(name: str) -> tuple[str, str]:
    found = [value for start, value in FORBIDDEN_IMPORT.items() if name.startswith(start)]
    assert len(found) == 1, (
        f"contract {name!r} has no forbidden import in FORBIDDEN_IMPORT (a contract must be able to fail)"
    )
    return found[0]


def copy_tree(to: Path) -> None:
    for package in ("kafkalog", "pipelines", "tests", "bench", "demo", "jobs", "airflow_dags"):
        shutil.copytree(
            REPO / package, to / package, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c", "templates")
        )
    shutil.copy(REPO / "pyproject.toml", to / "pyproject.toml")


def lint_imports(tree: Path) -> str:
    """lint-imports on ``tree`` (its packages first on the path); its report."""
    assert LINT_IMPORTS.exists(), f"{LINT_IMPORTS} is missing: make install puts import-linter in the venv"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return re.sub(r"\s+", " ", done.stdout + done.stderr)


def test_every_contract_breaks_on_its_forbidden_import(tmp_path: Path) -> None:
    copy_tree(tmp_path)
    names = contract_names()
    assert len(names) >= 10
    clean = lint_imports(tmp_path)
    assert f"Contracts: {len(names)} kept, 0 broken" in clean, clean[-2000:]
    for name in names:
        module, line = forbidden_import_for(name)
        path = tmp_path / module
        text = path.read_text(encoding="utf-8") if path.exists() else '"""A forbidden import."""\n'
        path.write_text(text + f"{line}  # forbidden\n", encoding="utf-8")
    report = lint_imports(tmp_path)
    assert f"Contracts: 0 kept, {len(names)} broken" in report, report[-3000:]
    for name in names:
        assert re.sub(r"\s+", " ", name) + " BROKEN" in report, f"{name!r} was not broken: {report[-3000:]}"
