"""``kafkalog broker`` (ours) as a child process on loopback in a temporary directory, stopped,
killed, paused or resumed by the test; and one raw request/response round trip for protocol tests."""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from kafkalog.protocol import decode_response, encode_request, lookup
from tests.support.processes import stop_group

KAFKALOG = Path(sys.executable).with_name("kafkalog")
_LISTENING = re.compile(r"listening on (?P<host>[\d.]+):(?P<port>\d+)(?P<more>.*)")
_LISTENER = re.compile(r"(?P<host>[\d.]+):(?P<port>\d+) \((?P<name>\w+)\)")


class BrokerProcess:
    """``kafkalog broker`` in a child process. ``config`` entries go to its YAML config file."""

    def __init__(self, data_dir: Path, **config: object) -> None:
        if not KAFKALOG.exists():
            raise RuntimeError(
                f"the kafkalog console script is not installed next to {sys.executable} (run make install)"
            )
        self.data_dir = data_dir
        self.config_path = data_dir.parent / f"{data_dir.name}.yaml"
        settings = {"port": 0, "data_dirs": [str(data_dir)], **config}
        self.config_path.write_text(yaml.safe_dump(settings))
        self.process: subprocess.Popen[str] | None = None
        self.port = 0
        """The first listener's port."""
        self.ports: dict[str, int] = {}
        """Every listener's port, by name."""
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> BrokerProcess:
        with self.log_path.open("a") as log:  # the child keeps its own descriptor
            since = log.tell()  # the file collects every run: read only this one
            self.process = subprocess.Popen(
                [str(KAFKALOG), "broker", "--config", str(self.config_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,  # see tests.support.processes: nothing it forks outlives it
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = _LISTENING.search(self.log_path.read_text()[since:])
            if match:
                self.port = int(match["port"])
                self.ports = {m["name"]: int(m["port"]) for m in _LISTENER.finditer(match[0])}
                return self
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"kafkalog broker exited with {self.process.returncode}:\n{self.log_path.read_text()}"
                )
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"kafkalog broker did not start within {timeout} s:\n{self.log_path.read_text()}")

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP: the process freezes (a long GC pause, a stalled VM) and keeps its sockets."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def rss_bytes(self) -> int:
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                self.stop()
            except subprocess.TimeoutExpired:
                stop_group(self.process, grace=0)


def recv_exact(sock: socket.socket, count: int) -> bytes:
    """Exactly ``count`` bytes (a socket with a timeout is non-blocking underneath, so
    MSG_WAITALL cannot be relied on)."""
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"the broker closed the connection after {len(data)} of {count} bytes")
        data += chunk
    return bytes(data)


def roundtrip(port: int, key: int, version: int, body: dict[str, Any], *, correlation_id: int = 1) -> dict[str, Any]:
    """One request to a broker on loopback and its decoded response."""
    api = lookup(key, version)
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(encode_request(api, correlation_id, "tests", body))
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        answered, response = decode_response(api, recv_exact(sock, size))
    assert answered == correlation_id
    return response
