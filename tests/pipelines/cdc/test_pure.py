"""pipelines.cdc runs anywhere (the driver, a Spark task, a test): of outside packages it imports
only pyarrow and the standard library; import-linter's contract keeps it off storage and the rest
of pipelines, this keeps it off Spark."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[3] / "pipelines" / "cdc"
ALLOWED = {"pyarrow", "pipelines"}


def test_the_package_imports_no_spark_and_no_storage() -> None:
    imported: set[str] = set()
    for module in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    outside = {name for name in imported if name not in sys.stdlib_module_names and name != "__future__"}
    assert outside <= ALLOWED, f"pipelines.cdc imports {sorted(outside - ALLOWED)}"
