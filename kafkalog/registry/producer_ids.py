"""Blocks of producer ids handed out through ZooKeeper, unique across the brokers of a cluster.

    /latest_producer_id_block  {"version": 1, "broker": <id>, "block_start": "<n>", "block_end": "<m>"}

(Kafka's own node and layout.) A broker takes the next block by a conditional write on the node's
version: two brokers racing for a block cannot both get it; the loser reads again and takes the next.
"""

from __future__ import annotations

import json
from typing import Any

from kafkalog.errors import RegistryError

PRODUCER_ID_BLOCK = "/latest_producer_id_block"
_VERSION = 1


def allocate_block(client: Any, broker_id: int, size: int) -> tuple[int, int]:
    """Reserve the ids ``[start, end]`` (both included, ``size`` of them) for ``broker_id``."""
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError  # noqa: PLC0415

    for _ in range(100):
        try:
            raw, stat = client.get(PRODUCER_ID_BLOCK)
        except NoNodeError:
            start = 0
            node = {"version": _VERSION, "broker": broker_id, "block_start": "0", "block_end": str(size - 1)}
            try:
                client.create(PRODUCER_ID_BLOCK, json.dumps(node).encode(), makepath=True)
            except NodeExistsError:
                continue
            return start, size - 1
        try:
            last_end = int(json.loads(raw)["block_end"])
        except (ValueError, KeyError, TypeError) as exc:
            raise RegistryError(f"{PRODUCER_ID_BLOCK} is not a producer id block: {raw[:200]!r} ({exc})") from exc
        start, end = last_end + 1, last_end + size
        node = {"version": _VERSION, "broker": broker_id, "block_start": str(start), "block_end": str(end)}
        try:
            client.set(PRODUCER_ID_BLOCK, json.dumps(node).encode(), version=stat.version)
        except BadVersionError:
            continue  # another broker took a block meanwhile: take the next
        return start, end
    raise RegistryError(f"could not reserve a block of producer ids at {PRODUCER_ID_BLOCK}: too much contention")
