"""Build the zip that a Spark cluster gets with ``--py-files``: our code, importable on the executors.

    python -m pipelines.app.ship [OUT.zip]          # default: dist/pipelines.zip

    spark-submit --master spark://… --py-files dist/pipelines.zip \\
        jobs/load_warehouse.py --pipeline conf/pipelines/<name>.yaml

The Spark source (``pipelines.executor.source``) runs in Python workers on the executors, which import
``pipelines`` and ``kafkalog`` there; a cluster node does not have this project installed, so the
job ships both packages. The zip holds their ``.py`` files (and ``py.typed`` / ``.pyi`` marks, and the
``.properties`` the code reads: Spark's logging configuration, pipelines.app.session), and nothing
compiled: Python cannot import an extension module (``.so``) from a zip, and
``kafkalog.record.kernels`` falls back to its pure-Python kernels when the C ones are absent.
Third-party dependencies (pyarrow, pyyaml, …) are not shipped: the executors' Python must have them.

The zip is deterministic: the same sources give the same bytes (sorted entries, fixed timestamps
and permissions), so a rebuilt zip can be compared with the deployed one.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.machinery
import importlib.util
import io
import os
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

PACKAGES = ("kafkalog", "pipelines")
"""The top-level packages the executors import."""

DEFAULT_DIR = Path("dist")
ZIP_NAME = "pipelines.zip"
ARCHIVE_NAME = "pipelines-code.tar.gz"
ARCHIVE_ALIAS = "pipelines_code"
"""The directory the archive is unpacked as in each executor's working directory."""

SHIPPED_SUFFIXES = frozenset({".py", ".pyi", ".properties"})
"""Sources, their stubs, and the log4j2 configuration of the sessions (pipelines.app.session reads
it from the zip too: a driver in a cluster gets it from there)."""
EXTENSION_SUFFIXES = frozenset(importlib.machinery.EXTENSION_SUFFIXES)
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


def shipped_files(root: Path, *, compiled: bool = False) -> Iterator[tuple[str, Path]]:
    """(name in the zip, file) for the shippable files of the package at ``root``, sorted by name;
    ``compiled``: the extension modules built for this interpreter too."""
    found: list[tuple[str, Path]] = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith(".")]
        for filename in filenames:
            path = Path(directory, filename)
            native = compiled and any(filename.endswith(s) for s in EXTENSION_SUFFIXES)
            if path.suffix in SHIPPED_SUFFIXES or filename in SHIPPED_NAMES or native:
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

    def write(stream: BinaryIO) -> None:
        with zipfile.ZipFile(stream, "w") as archive:
            for arcname, path in entries:
                info = zipfile.ZipInfo(arcname, date_time=ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.create_system = 3  # Unix, so external_attr holds the mode on every platform
                info.external_attr = ZIP_MODE << 16
                archive.writestr(info, path.read_bytes(), compresslevel=9)

    return _write_atomically(out, write)


def build_archive(out: Path) -> Path:
    """Write the ``--archives`` tarball of ``kafkalog`` and ``pipelines`` with their compiled
    kernels to ``out`` (atomically) and return ``out``; ShipError if the kernels are not built."""
    entries: list[tuple[str, Path]] = []
    for name in PACKAGES:
        entries.extend(shipped_files(package_dir(name), compiled=True))
    entries.sort()
    if not any(any(arcname.endswith(s) for s in EXTENSION_SUFFIXES) for arcname, _ in entries):
        raise ShipError(
            "the C record kernels are not built for this Python (make native, or pip install -e . with a C "
            f"compiler): an archive without them would run the pure-Python kernels; ship {ZIP_NAME} for that"
        )

    def write(stream: BinaryIO) -> None:
        with (
            gzip.GzipFile(fileobj=stream, mode="wb", mtime=0) as packed,
            tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as archive,
        ):
            for arcname, path in entries:
                info = tarfile.TarInfo(arcname)
                data = path.read_bytes()
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                archive.addfile(info, io.BytesIO(data))

    return _write_atomically(out, write)


def _write_atomically(out: Path, write: Callable[[BinaryIO], None]) -> Path:
    """``write`` into a temporary file beside ``out``, then rename it into place (rw-r--r--): a
    reader never sees half a file."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as stream:
            write(stream)
        tmp.chmod(0o644)
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


class ShipError(Exception):
    """What cannot be shipped, and why."""


def submit_options(directory: Path, *, archive: bool) -> list[str]:
    """The spark-submit options that ship the files built in ``directory``."""
    if archive:
        return [
            "--archives", f"{directory / ARCHIVE_NAME}#{ARCHIVE_ALIAS}",
            "--conf", f"spark.executorEnv.PYTHONPATH={ARCHIVE_ALIAS}",
        ]  # fmt: skip
    return ["--py-files", str(directory / ZIP_NAME)]


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.app.ship [DIR]``: build both files and print how to ship them."""
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.app.ship",
        description="Build what executors get: the --archives tarball (with the C kernels) and the --py-files zip.",
    )
    parser.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR, help=f"where to write them ({DEFAULT_DIR})")
    args = parser.parse_args(argv)
    zipped = build_zip(args.dir / ZIP_NAME)
    try:
        archived: Path | None = build_archive(args.dir / ARCHIVE_NAME)
    except ShipError as exc:
        sys.stderr.write(f"warning: {exc}\n")
        archived = None
    if archived is not None:
        sys.stdout.write(f"{archived}: ship with {' '.join(submit_options(args.dir, archive=True))}\n")
    sys.stdout.write(f"{zipped}: pure Python: ship with {' '.join(submit_options(args.dir, archive=False))}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
