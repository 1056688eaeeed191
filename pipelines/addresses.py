"""Addresses written in pipeline files and given to the storages: one rule for both.

Role: ``raw.webhdfs_url`` is checked when the pipeline file loads (pipelines.config) and again when a
WebHDFS storage is made from any address (pipelines.storage, which also serves callers without a
pipeline file); both ask this module, so the two checks cannot drift apart.
"""

from __future__ import annotations

from urllib.parse import urlsplit


def is_http_address(address: str) -> bool:
    """``address`` is http(s)://host[:port]: a request to it could reach a server (a missing host, or
    a port that is not a number below 65536, would only fail at the first request)."""
    try:
        parts = urlsplit(address)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # urlsplit's port: not a number, or out of range
        return False
