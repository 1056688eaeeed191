"""``kafkalog registry`` (ours) as a child process on loopback: started, stopped or killed by the test,
its log read for what it says (its URL, who it believes is primary); and what the registry's tests
share: calls of its REST API, everything a client can read of its state, a Protobuf message class
made at run time, the schema id of a framed value."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import descriptor_pool, message_factory

from kafkalog.schemas import protobuf
from tests.support.processes import stop_group

KAFKALOG = Path(sys.executable).with_name("kafkalog")
_LISTENING = re.compile(r"kafkalog registry listening on (?P<url>https?://\S+)")


class RegistryProcess:
    """``kafkalog registry`` in a child process. ``config`` entries go to its YAML config file."""

    def __init__(self, directory: Path, name: str, **config: object) -> None:
        if not KAFKALOG.exists():
            raise RuntimeError(f"the kafkalog console script is not installed next to {sys.executable}")
        directory.mkdir(parents=True, exist_ok=True)
        self.config_path = directory / f"{name}.yaml"
        self.config_path.write_text(yaml.safe_dump({"port": 0, **config}))
        self.log_path = directory / f"{name}.log"
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self, timeout: float = 60) -> RegistryProcess:
        with self.log_path.open("a") as log:
            since = log.tell()
            self.process = subprocess.Popen(
                [str(KAFKALOG), "registry", "--config", str(self.config_path), "--log-level", "INFO"],
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        self._since = since
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = _LISTENING.search(self.log_path.read_text()[since:])
            if match:
                self.url = match["url"]
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"kafkalog registry exited with {self.process.returncode}:\n{self.log_text()}")
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"kafkalog registry did not start within {timeout} s:\n{self.log_text()}")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def believes_primary(self) -> bool | None:
        """What its last election line says: True (it is primary), False (another is), None (none yet)."""
        lines = [line for line in self.log_text()[self._since :].splitlines() if ": primary " in line]
        if not lines:
            return None
        return lines[-1].endswith("(this registry)")

    def stop(self, timeout: float = 30) -> int:
        assert self.process is not None
        self.process.terminate()
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def __enter__(self) -> RegistryProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                self.stop()
            except subprocess.TimeoutExpired:
                stop_group(self.process, grace=0)


PROTO = """syntax = "proto3";
package demo;
import "google/protobuf/timestamp.proto";
message Other { string x = 1; }
message Ev { string id = 1; int64 n = 2; google.protobuf.Timestamp at = 3; map<string, int32> tags = 4; }
"""
"""A schema with two messages (a value of the second carries message indexes) and a well-known import."""


def protobuf_class(text: str, name: str) -> Any:
    """A message class built at run time from ``.proto`` text (as generated code would define it)."""
    pool = descriptor_pool.DescriptorPool()
    for file in protobuf.parse(text).file_descriptor_set().file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def schema_id_of(value: bytes) -> int:
    """The id of a value framed in Confluent's wire format (a zero byte, then the id)."""
    assert value[0] == 0
    return int.from_bytes(value[1:5], "big")


def call(
    url: str, method: str, path: str, body: Any = None, *, auth: str | None = None, context: Any = None
) -> tuple[int, Any]:
    """One request to a registry's REST API: (status, JSON answer)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method)
    request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
    if auth is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def register(url: str, subject: str, schema: Any, **extra: Any) -> tuple[int, Any]:
    return call(url, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(schema), **extra})


def snapshot(url: str) -> dict[str, Any]:
    """Everything a client can read of the registry's state."""
    subjects = call(url, "GET", "/subjects?deleted=true")[1]
    out: dict[str, Any] = {"subjects": subjects, "config": call(url, "GET", "/config")[1]}
    ids = set()
    for subject in subjects:
        versions = call(url, "GET", f"/subjects/{subject}/versions?deleted=true")[1]
        out[f"{subject} live"] = call(url, "GET", f"/subjects/{subject}/versions")
        for version in versions:
            got = call(url, "GET", f"/subjects/{subject}/versions/{version}?deleted=true")[1]
            out[f"{subject} v{version}"] = got
            ids.add(got["id"])
        out[f"{subject} config"] = call(url, "GET", f"/config/{subject}")
    for schema_id in sorted(ids):
        out[f"id {schema_id}"] = call(url, "GET", f"/schemas/ids/{schema_id}")
    return out


def eventually(check: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
    """``check()``'s first true answer, asked every 0.1 s up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.1)
