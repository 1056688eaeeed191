"""``make demo-avro`` (``python -m demo.avro_orders``): an Avro topic through ``kafkalog registry``.

1. Starts a kafkalog broker and a schema registry keeping its state in the broker's ``_schemas``
   topic, on free loopback ports.
2. A shop writes 500 orders with confluent-kafka's AvroSerializer (schema v1: id, customer, amount
   as a decimal, placed_at as a timestamp): the serializer registers v1 and frames each value with
   its id.
3. ``pipelines run`` loads them with conf/pipelines/shop_orders_avro.yaml (its broker and registry
   pointed at this demo's in a copy under .cache/demo-avro/conf): the raw layer's columns come from
   the subject's schema; the table ``shop_orders_raw`` is registered in the embedded metastore.
4. The shop evolves its schema (v2 adds ``channel`` with a default) and writes 300 orders with it,
   while a till not updated yet writes 100 more with v1; the next run reads both into v2's columns
   (the v1 values get the default); the table gains the column.
5. ``pipelines sql`` reads the table by name; the counts by channel must equal what was written
   (checked): run 1's rows null (their files predate the column), run 2's v1 rows the default.

Everything lives under .cache/demo-avro/, cleared at the start; every process started is stopped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import click
import confluent_kafka
import yaml
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from demo.processes import DemoError, Supervisor, free_port, port_is_free
from kafkalog.client import Admin

HOME = Path(".cache/demo-avro")
PIPELINE = Path("conf/pipelines/shop_orders_avro.yaml")
TOPIC = "shop.orders"
START = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "channel", "type": "string", "default": "store"}]}


def _tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _registry_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/subjects", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _orders(version: int, first: int, count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(first, first + count):
        order: dict[str, Any] = {
            "id": i,
            "customer": f"c{i % 37:03d}",
            "amount": Decimal(i % 5000) / 100 + Decimal("1.99"),
            "placed_at": START + timedelta(minutes=3 * i),
        }
        if version == 2:
            order["channel"] = "web" if i % 3 else "app"
        out.append(order)
    return out


def _produce(bootstrap: str, registry: str, schema: dict[str, Any], orders: list[dict[str, Any]]) -> None:
    with SchemaRegistryClient({"url": registry}) as client:
        serialize = AvroSerializer(client, json.dumps(schema))
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 10})
        context = SerializationContext(TOPIC, MessageField.VALUE)
        for order in orders:
            producer.produce(TOPIC, key=str(order["id"]).encode(), value=serialize(order, context))
        if producer.flush(30):
            raise DemoError(f"orders were still unsent to {bootstrap} after 30 s")


def _pipelines(*args: str) -> str:
    done = subprocess.run([_tool("pipelines"), *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise DemoError(f"pipelines {' '.join(args)} exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def _summary(output: str) -> str:
    """The last line ``pipelines run`` printed (its outcome), indented."""
    noise = ("WARN", "Using Spark", "Setting default", "To adjust")
    lines = [line for line in output.splitlines() if line.strip() and not line.startswith(noise)]
    return "  " + (lines[-1] if lines else "(nothing printed)")


def _rows(spec: Path, query: str) -> list[dict[str, Any]]:
    output = _pipelines("sql", str(spec), query, "--json")
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def run() -> dict[str, Any]:
    """The demo's steps (module doc); returns what it checked."""
    if HOME.exists():
        shutil.rmtree(HOME)
    (HOME / "conf").mkdir(parents=True)
    broker_port, registry_port = free_port(), free_port()
    bootstrap, registry = f"127.0.0.1:{broker_port}", f"http://127.0.0.1:{registry_port}"
    with Supervisor(HOME / "logs") as supervisor:
        argv = [_tool("kafkalog"), "broker", "--port", str(broker_port), "--data-dir", str(HOME / "data")]
        supervisor.start("broker", argv, lambda: not port_is_free(broker_port))
        argv = [_tool("kafkalog"), "registry", "--bootstrap", bootstrap, "--port", str(registry_port)]
        supervisor.start("registry", argv, lambda: _registry_ready(registry))
        click.echo(f"kafkalog broker on {bootstrap}; kafkalog registry on {registry} (its state: topic _schemas)")
        with Admin(bootstrap) as admin:
            admin.create_topic(TOPIC, 2)

        spec = yaml.safe_load(PIPELINE.read_text())
        spec["source"]["bootstrap"] = bootstrap
        spec["decoder"]["registry"]["urls"] = [registry]
        spec["raw"]["path"] = str((HOME / "raw").resolve())
        path = HOME / "conf" / PIPELINE.name
        path.write_text(yaml.safe_dump(spec, sort_keys=False))

        _produce(bootstrap, registry, V1, _orders(1, 0, 500))
        click.echo("500 orders written with schema v1 (id, customer, amount, placed_at)")
        started = time.monotonic()
        click.echo(_summary(_pipelines("run", str(path))))
        click.echo(f"run 1 took {time.monotonic() - started:.1f} s")

        _produce(bootstrap, registry, V1, _orders(1, 500, 100))
        _produce(bootstrap, registry, V2, _orders(2, 600, 300))
        click.echo("100 more orders written with v1 (a till not updated), 300 with v2 (adds channel, default 'store')")
        click.echo(_summary(_pipelines("run", str(path))))

        rows = _rows(
            path,
            "SELECT channel, count(*) AS orders, sum(amount) AS amount FROM shop_orders_raw "
            "GROUP BY channel ORDER BY channel",
        )
        click.echo("shop_orders_raw by channel:")
        for row in rows:
            click.echo(f"  {row['channel'] or '(null)':<6} {row['orders']:>4} orders  {row['amount']}")
        by_channel = {row["channel"]: row["orders"] for row in rows}
        # run 1's files were written before the column existed: their rows read null; the v1 values
        # of run 2 were read into v2's columns, so they carry v2's default
        expected = {None: 500, "store": 100, "web": 200, "app": 100}
        if by_channel != expected:
            raise DemoError(f"the table holds {by_channel} orders by channel, {expected} were written")
        columns = [row["col_name"] for row in _rows(path, "DESCRIBE shop_orders_raw")]
        if "channel" not in columns:
            raise DemoError(f"the table shop_orders_raw lacks the column v2 added: {columns}")
        click.echo("every order once, the v1 orders read with v2's default; the table has v2's column")
        return {"orders": by_channel, "columns": columns}


@click.command()
def main() -> None:
    """The Avro demo (module doc)."""
    try:
        run()
    except DemoError as e:
        raise click.ClickException(str(e)) from e


if __name__ == "__main__":
    main()
