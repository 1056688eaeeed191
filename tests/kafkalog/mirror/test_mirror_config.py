"""The mirror's configuration errors: each names the file and the key (``sources[0].bootstrap``,
``producer.linger``), and a cluster the mirror cannot reach is named as the source or the target it
is. Real files, and ``kafkalog mirror`` run as a user runs it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kafkalog.mirror.config import MirrorConfigError, load_mirror_config
from tests.support.kafkalog import KAFKALOG
from tests.support.ports import free_port

VALID = "sources: [h1:9092]\ntarget: h9:9092\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (VALID + "streams: many\n", "streams: expected an integer, got 'many'"),
        (VALID + "create_topics: maybe\n", "create_topics: expected true or false, got 'maybe'"),
        (VALID + "whitelist: 5\n", "whitelist: expected a string, got 5"),
        (VALID + "gap_file: [a]\n", "gap_file: expected a path, got ['a']"),
        (VALID + "producer: {linger: 5}\n", "producer.linger: unknown key (did you mean 'linger_ms'? known: batch_"),
        (VALID + "producer: {linger_ms: soon}\n", "producer.linger_ms: expected an integer, got 'soon'"),
        ("sources: [{bootstrap: 9092}]\ntarget: h9:9092\n", "sources[0].bootstrap: expected a string, got 9092"),
        ("sources: [h1:9092, {bootstrap: h2:1, port: 2}]\ntarget: h9:9092\n", "sources[1].port: unknown key"),
        # a setting written twice is refused (the last one silently won before), as in every config file
        (VALID + "group: a\ngroup: b\n", "line 4: duplicate key 'group'"),
        (VALID + "producer: {linger_ms: 5, linger_ms: 50}\n", "line 3: duplicate key 'linger_ms'"),
    ],
)
def test_a_bad_value_names_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "mirror.yaml"
    path.write_text(text)
    with pytest.raises(MirrorConfigError, match=rf"^{re.escape(f'{path}:{message}')}"):
        load_mirror_config(path, {})


def test_invalid_yaml_names_the_file_where_it_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "mirror.yaml"
    path.write_text("sources: [h1:9092\n")
    with pytest.raises(MirrorConfigError) as info:
        load_mirror_config(path, {})
    expected = f'{path}: not valid YAML: while parsing a flow sequence\n  in "{path}", line 1'
    assert str(info.value).startswith(expected), info.value


def test_the_defaults_of_the_sources_names_stay_source_i(tmp_path: Path) -> None:
    path = tmp_path / "mirror.yaml"
    path.write_text("sources: [h1:9092, {bootstrap: h2:9092}]\ntarget: h9:9092\nproducer: {linger_ms: 5}\n")
    config = load_mirror_config(path, {})
    assert [s.name for s in config.sources] == ["source0", "source1"]
    assert config.producer == {"linger_ms": 5}


@pytest.mark.integration
def test_an_unreachable_source_is_named(tmp_path: Path) -> None:
    source, target = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"  # nobody listens there
    done = subprocess.run(
        [str(KAFKALOG), "mirror", "--source", source, "--target", target],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert f"error: source source0: no broker is reachable: cannot connect to {source}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
