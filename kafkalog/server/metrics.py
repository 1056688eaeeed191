"""Broker metrics: requests and latency per API, bytes in and out, connections, protocol errors,
and each partition's log end offset; rendered in the Prometheus text format for scraping."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Metrics:
    """Counters updated by the network threads. Single integer updates are atomic enough under the
    GIL for counters; per-API latency sums are guarded by a lock."""

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0
        self.connections_accepted = 0
        self.connections_closed = 0
        self.connections_rejected = 0
        self.protocol_errors = 0
        self.authentication_failures = 0
        """Logins refused (SASL) and TLS handshakes failed (an untrusted or expired certificate)."""
        self.authentications = 0
        self._lock = threading.Lock()
        self._requests: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])  # count, seconds, max

    def record_request(self, api: str, seconds: float) -> None:
        with self._lock:
            entry = self._requests[api]
            entry[0] += 1
            entry[1] += seconds
            entry[2] = max(entry[2], seconds)

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            requests = {
                api: {"count": int(c), "seconds": s, "max_seconds": m} for api, (c, s, m) in self._requests.items()
            }
        return {
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "connections_accepted": self.connections_accepted,
            "connections_closed": self.connections_closed,
            "connections_rejected": self.connections_rejected,
            "protocol_errors": self.protocol_errors,
            "authentication_failures": self.authentication_failures,
            "authentications": self.authentications,
            "requests": requests,
        }


def render_prometheus(
    metrics: Metrics, log_end_offsets: dict[tuple[str, int], int], cleaner: dict[str, float] | None = None
) -> str:
    snap = metrics.snapshot()
    lines = []
    for name in (
        "bytes_in",
        "bytes_out",
        "connections_accepted",
        "connections_closed",
        "connections_rejected",
        "protocol_errors",
        "authentication_failures",
        "authentications",
    ):
        lines.append(f"# TYPE kafkalog_{name}_total counter")
        lines.append(f"kafkalog_{name}_total {snap[name]}")
    lines.append("# TYPE kafkalog_requests_total counter")
    lines.append("# TYPE kafkalog_request_seconds_total counter")
    lines.append("# TYPE kafkalog_request_seconds_max gauge")
    requests = snap["requests"]
    assert isinstance(requests, dict)
    for api, entry in sorted(requests.items()):
        lines.append(f'kafkalog_requests_total{{api="{api}"}} {entry["count"]}')
        lines.append(f'kafkalog_request_seconds_total{{api="{api}"}} {entry["seconds"]:.6f}')
        lines.append(f'kafkalog_request_seconds_max{{api="{api}"}} {entry["max_seconds"]:.6f}')
    lines.append("# TYPE kafkalog_log_end_offset gauge")
    for (topic, partition), offset in sorted(log_end_offsets.items()):
        lines.append(f'kafkalog_log_end_offset{{topic="{topic}",partition="{partition}"}} {offset}')
    for name, value in sorted((cleaner or {}).items()):  # kafkalog.log.cleaner.cleaner.LogCleaner.metrics
        kind = "counter" if name.endswith("_total") else "gauge"
        lines.append(f"# TYPE kafkalog_cleaner_{name} {kind}")
        lines.append(f"kafkalog_cleaner_{name} {int(value) if float(value).is_integer() else round(value, 6)}")
    return "\n".join(lines) + "\n"


class MetricsHttpServer:
    """Serves ``GET /metrics`` on loopback or the configured host, in a background thread."""

    def __init__(self, host: str, port: int, render: Callable[[], str]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="kafkalog-metrics", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
