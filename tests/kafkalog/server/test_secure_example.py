"""docs/security.md's recipe and conf/broker-secure.yaml, as an operator follows them: the
documented openssl commands run exactly as written (the broker key's password typed at their
prompt), a user added with the documented command, and the locked-down example started with only
its machine's paths and addresses changed. A client then logs in over TLS with SCRAM, checking the
broker's certificate against the recipe's authority by the name the certificate was made for."""

from __future__ import annotations

import os
import re
import socket
import ssl
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafkalog.protocol import ApiKey, ErrorCode, decode_response, encode_request, lookup
from kafkalog.sasl import ScramClient
from tests.support.kafkalog import KAFKALOG, BrokerProcess, recv_exact

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
KEY_PASSWORD = "typed at the prompt"
USER_PASSWORD = "svc-loader's password"


def _block_after(document: str, heading: str, language: str = "sh") -> str:
    section = document[document.index(heading) :]
    found = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert found is not None, f"no {language} block under {heading}"
    return found.group(1)


def _request(sock: socket.socket, key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    api = lookup(key, version)
    sock.sendall(encode_request(api, 9, "probe", body))
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return decode_response(api, recv_exact(sock, size))[1]


def test_the_documented_recipe_and_the_locked_down_example_start_a_broker_clients_log_in_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = (REPO / "docs" / "security.md").read_text()
    made = subprocess.run(
        ["bash", "-e", "-c", _block_after(docs, "## TLS")], cwd=tmp_path, input=f"{KEY_PASSWORD}\n",
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "ENCRYPTED PRIVATE KEY" in (tmp_path / "broker.key").read_text()  # what the example's key_password needs

    users = tmp_path / "users.json"
    add = next(line for line in _block_after(docs, "## Users").splitlines() if "--password-stdin" in line)
    added = subprocess.run(
        ["bash", "-e", "-c", add.replace("/etc/kafkalog/users.json", str(users))],
        env={**os.environ, "PASSWORD": USER_PASSWORD, "PATH": f"{KAFKALOG.parent}:{os.environ['PATH']}"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr

    example = (REPO / "conf" / "broker-secure.yaml").read_text()
    for machine, here in (
        ("/etc/kafkalog/tls/", f"{tmp_path}/"),
        ("/etc/kafkalog/users.json", str(users)),
        ("0.0.0.0:9093", "127.0.0.1:0"),
        ("127.0.0.1:9092", "127.0.0.1:0"),
    ):
        assert machine in example, machine
        example = example.replace(machine, here)
    config = yaml.safe_load(example)
    config.pop("data_dirs")  # the test's own directory
    monkeypatch.setenv("KAFKALOG_KEY_PASSWORD", KEY_PASSWORD)  # as the recipe's shell exported it
    with BrokerProcess(tmp_path / "data", **config) as broker:
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        raw = socket.create_connection(("127.0.0.1", broker.ports["SASL_SSL"]), timeout=10)
        with context.wrap_socket(raw, server_hostname="kafka1.example.com") as sock:
            assert _request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})["error_code"] == 0
            client = ScramClient("SCRAM-SHA-512", "svc-loader", USER_PASSWORD)
            first = _request(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.first()})
            final = _request(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.final(first["auth_bytes"])})
            assert final["error_code"] == ErrorCode.NONE, final
            client.verify(final["auth_bytes"])
        with socket.create_connection(("127.0.0.1", broker.ports["LOCAL"]), timeout=10) as local:
            offered = _request(local, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            assert offered["mechanisms"] == ["SCRAM-SHA-512", "SCRAM-SHA-256"]  # no PLAIN, here or in clear
