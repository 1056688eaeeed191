"""Attempt leases as storage holds them: each renewal published whole, and a torn renewal (what a
writer killed mid-write leaves where publishing is not atomic) never stops the next run."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from pipelines.errors import PipelineError
from pipelines.ledger.lease import Leases, own_lease
from pipelines.storage import LocalStorage

NAME = "0000000001-abc123"


def test_a_renewal_is_published_whole_and_replaces_the_older(tmp_path: Path) -> None:
    leases = Leases(LocalStorage(), str(tmp_path / "_pipeline"))
    first, second = own_lease(now_ms=1_000), own_lease(now_ms=2_000)
    leases.write(NAME, first)
    leases.write(NAME, second)
    files = sorted(p.name for p in Path(leases.path(NAME)).iterdir())
    assert len(files) == 1 and files[0].startswith("0000000002000-") and files[0].endswith(".json")
    assert leases.read(NAME) == second


def test_a_torn_newest_renewal_is_passed_over_for_the_one_before(tmp_path: Path) -> None:
    leases = Leases(LocalStorage(), str(tmp_path / "_pipeline"))
    held = own_lease(now_ms=1_000)
    leases.write(NAME, held)
    (Path(leases.path(NAME)) / "0000000002000-dead00.json").write_bytes(b"")  # its writer died
    assert leases.read(NAME) == held
    assert leases.alive(NAME)  # this process holds it


def test_only_torn_renewals_name_every_file_and_what_to_do(tmp_path: Path) -> None:
    leases = Leases(LocalStorage(), str(tmp_path / "_pipeline"))
    directory = Path(leases.path(NAME))
    directory.mkdir(parents=True)
    (directory / "0000000001000-aaaaaa.json").write_bytes(b'{"host": "h"')
    (directory / "0000000002000-bbbbbb.json").write_text(json.dumps({**asdict(own_lease()), "extra": 1}))
    with pytest.raises(PipelineError) as raised:
        leases.read(NAME)
    message = str(raised.value)
    assert message.startswith("unreadable attempt lease: ") and message.count(".json (") == 2
    assert message.endswith(f"delete {leases.path(NAME)} if no run is loading")
