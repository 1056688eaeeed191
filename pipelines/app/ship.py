"""Build the zip that a Spark cluster gets with ``--py-files``: our code, importable on the executors.

    python -m pipelines.app.ship [OUT.zip]          # default: dist/pipelines.zip

    spark-submit --master spark://… --py-files dist/pipelines.zip \\
        jobs/load_warehouse.py --pipeline conf/pipelines/<name>.yaml

The Spark source (``pipelines.executor.source``) runs in Python workers on the executors, which import
``pipelines`` and ``kafkalog`` there; a cluster node does not have this project installed, so the
job ships both packages. The zip holds their ``.py`` files (and ``py.typed`` / ``.pyi`` marks), and
nothing compiled: Python cannot import an extension module (``.so``) from a zip, and
``kafkalog.record.kernels`` falls back to its pure-Python kernels when the C ones are absent.
Third-party dependencies (pyarrow, pyyaml, …) are not shipped: the executors' Python must have them.

The zip is deterministic: the same sources give the same bytes (sorted entries, fixed timestamps
and permissions), so a rebuilt zip can be compared with the deployed one.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

PACKAGES = ("kafkalog", "pipelines")
"""The top-level packages the executors import."""

DEFAULT_OUT = Path("dist/pipelines.zip")

SHIPPED_SUFFIXES = frozenset({".py", ".pyi"})
SHIPPED_NAMES = frozenset({"py.typed"})
SKIPPED_DIRS = frozenset({"__pycache__"})

ZIP_TIME = (1980, 1, 1, 0, 0, 0)
"""Every entry's timestamp: the earliest a zip can hold, so builds do not differ by their date."""
ZIP_MODE = 0o100644
"""Every entry's Unix mode: a regular file, rw-r--r--."""


def package_dir(name: str) -> Path:
    """The directory of the importable package ``name`` (the sources an editable install maps)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise LookupError(f"{name} is not an importable package")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def shipped_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(name in the zip, file) for the shippable files of the package at ``root``, sorted by name."""
    found: list[tuple[str, Path]] = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith(".")]
        for filename in filenames:
            path = Path(directory, filename)
            if path.suffix in SHIPPED_SUFFIXES or filename in SHIPPED_NAMES:
                arcname = Path(root.name, path.relative_to(root)).as_posix()
                found.append((arcname, path))
    yield from sorted(found)


def build_zip(out: Path) -> Path:
    """Write the ``--py-files`` zip of ``kafkalog`` and ``pipelines`` to ``out`` (atomically: a
    reader never sees half a zip) and return ``out``."""
    entries: list[tuple[str, Path]] = []
    for name in PACKAGES:
        entries.extend(shipped_files(package_dir(name)))
    entries.sort()
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as stream, zipfile.ZipFile(stream, "w") as archive:
            for arcname, path in entries:
                info = zipfile.ZipInfo(arcname, date_time=ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.create_system = 3  # Unix, so external_attr holds the mode on every platform
                info.external_attr = ZIP_MODE << 16
                archive.writestr(info, path.read_bytes(), compresslevel=9)
        tmp.chmod(0o644)
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.app.ship [OUT.zip]``: build the zip and print its path."""
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.app.ship", description="Build the --py-files zip of kafkalog and pipelines."
    )
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT, help=f"the zip to write ({DEFAULT_OUT})")
    args = parser.parse_args(argv)
    out = build_zip(args.out)
    sys.stdout.write(f"{out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
