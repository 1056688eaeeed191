"""docs/architecture.md's module tables match the code: every module a row names exists in its
package, and every module of a package whose row lists its modules is named there. A package
that gains or loses a module fails this until the table says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
ROW = re.compile(r"^\|.*?`(?P<package>(?:kafkalog|pipelines)/[a-z_]+/(?:[a-z_]+/)*)`(?P<rest>.*)\|\s*$", re.M)
NAMED = re.compile(r"`([A-Za-z0-9_]+(?:\.py|\.c|/))`")


def _rows() -> dict[str, set[str]]:
    """Each package's row: the modules it names (empty where the row names none)."""
    rows: dict[str, set[str]] = {}
    for match in ROW.finditer(DOC.read_text()):
        named = set(NAMED.findall(match["rest"]))
        rows.setdefault(match["package"], set()).update(named)
    return rows


def _modules(package: Path) -> set[str]:
    found = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    found |= {p.name for p in package.glob("*.c")}
    found |= {f"{p.name}/" for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    found |= {f"{p.name}/" for p in package.iterdir() if p.is_dir() and p.name == "templates"}
    return found


def test_the_tables_name_every_package_that_exists_and_no_other() -> None:
    rows = _rows()
    missing = [package for package in rows if not (REPO / package).is_dir()]
    assert not missing, f"docs/architecture.md names packages that do not exist: {missing}"
    packages = {
        f"{top}/{p.name}/" for top in ("kafkalog", "pipelines") for p in (REPO / top).iterdir()
        if (p / "__init__.py").exists()
    }  # fmt: skip
    assert packages - set(rows) == set(), (
        f"packages docs/architecture.md has no row for: {sorted(packages - set(rows))}"
    )
    assert all(rows.values()), f"rows that name no modules: {[p for p, named in rows.items() if not named]}"


@pytest.mark.parametrize("package", sorted(_rows()))
def test_a_package_row_names_exactly_its_modules(package: str) -> None:
    named, present = _rows()[package], _modules(REPO / package)
    assert not named - present, (
        f"{package}: docs/architecture.md names modules that do not exist: {sorted(named - present)}"
    )
    assert not present - named, f"{package}: modules docs/architecture.md does not name: {sorted(present - named)}"
