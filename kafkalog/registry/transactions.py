"""Transaction coordinator records in ZooKeeper, shared by every broker of a cluster.

    /kafkalog/transactions/<transactional id in hex>            one transactional id's state (JSON)
    /kafkalog/transaction_offsets/<group in hex>.<producer id>  a transaction's offsets of one group (JSON)

Role: a recipe over a caller's kazoo client: documents written whole (one ``set`` or ``create``),
listed and deleted. The names are hex so that any id is a valid node name. Kafka keeps this state in
its ``__transaction_state`` topic; kafkalog's brokers keep it where they keep group offsets, so the
broker that coordinates an id after a failover finds the id's state.
"""

from __future__ import annotations

import contextlib
from typing import Any

TRANSACTIONS = "/kafkalog/transactions"
TRANSACTION_OFFSETS = "/kafkalog/transaction_offsets"


def put_document(client: Any, path: str, data: bytes) -> None:
    """Store ``data`` at ``path`` (create or overwrite)."""
    from kazoo.exceptions import NodeExistsError, NoNodeError  # noqa: PLC0415

    try:
        client.set(path, data)
    except NoNodeError:
        try:
            client.create(path, data, makepath=True)
        except NodeExistsError:  # a concurrent first write: ours is the later one
            client.set(path, data)


def get_document(client: Any, path: str) -> bytes | None:
    """The document at ``path``, None if there is none."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    try:
        data, _ = client.get(path)
    except NoNodeError:
        return None
    return bytes(data)


def list_documents(client: Any, root: str) -> list[str]:
    """The names of the documents under ``root`` (none if it does not exist)."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    try:
        return sorted(client.get_children(root))
    except NoNodeError:
        return []


def delete_document(client: Any, path: str) -> None:
    """Remove the document at ``path`` if it is there."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    with contextlib.suppress(NoNodeError):
        client.delete(path)
