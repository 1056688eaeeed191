"""The decoder fuzz benchmark (bench/protocol_fuzz.py) runs, and a short run finds nothing unexpected."""

from __future__ import annotations

import random

import pytest

from bench import protocol_fuzz
from kafkalog.protocol import REGISTRY, decode_request


def test_a_short_fuzz_run_finds_no_unexpected_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert protocol_fuzz.main(["--inputs", "2000", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert "UNEXPECTED" not in out
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert lines[0] == "RESULT protocol_fuzz_inputs 2000 inputs"
    name, rate, unit = lines[1].split()[1:]
    assert (name, unit) == ("protocol_fuzz_rate", "inputs/s")
    assert float(rate) > 0
    assert lines[2] == "RESULT protocol_fuzz_unexpected_errors 0 errors"
    counts = out.split("done in ")[1]
    assert " ok, " in counts  # both outcomes are reached
    assert "ProtocolError" in counts


def test_the_corpus_is_valid_and_covers_every_api() -> None:
    frames = protocol_fuzz.corpus(random.Random(1))
    seen = set()
    for frame in frames:
        header, _, _ = decode_request(frame)
        seen.add((header.api_key, header.api_version))
    assert seen == set(REGISTRY)


def test_an_unexpected_error_fails_the_run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Anything but ProtocolError is reported with the input in hex and its traceback, and exits 1."""

    def broken(frame: bytes) -> object:
        if len(frame) % 2:
            raise IndexError("planted")
        return decode_request(frame)

    monkeypatch.setattr(protocol_fuzz, "decode_request", broken)
    assert protocol_fuzz.main(["--inputs", "200"]) == 1
    out = capsys.readouterr().out
    assert "UNEXPECTED ERROR on input #" in out
    assert "IndexError: planted" in out
    assert "RESULT protocol_fuzz_unexpected_errors 0 errors" not in out
