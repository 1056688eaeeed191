"""``make demo``: the main job on the embedded default, end to end, on this machine.

Starts a kafkalog broker on 127.0.0.1:29092 (data in .cache/demo/broker), produces click events
(a few of them malformed, to show the quarantine), runs ``spark-submit jobs/load_warehouse.py
--pipeline conf/pipelines/demo_events.yaml --master local[*]``, then runs it again (nothing new: a
no-op), and shows ``pipelines status`` and a sample of the loaded rows. Then the page_views example
(conf/pipelines/page_views.yaml): page views loaded, sessions and hourly page counts computed,
checked by expectations (one bad page quarantined) and published. Stops the broker at the end.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from kafkalog.client import Admin, Producer
from kafkalog.errors import KafkalogError
from pipelines.examples import encode, page_views
from pipelines.spec import load_spec

PIPELINE = Path("conf/pipelines/demo_events.yaml")
PAGE_VIEWS = Path("conf/pipelines/page_views.yaml")
BROKER_DIR = Path(".cache/demo/broker")
COUNTRIES = ("DE", "FR", "US", "JP", "BR", "IN", "NG", "CA")
EVENTS = ("view", "click", "add_to_cart", "purchase")


def _tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _start_broker(port: int) -> subprocess.Popen[bytes]:
    BROKER_DIR.mkdir(parents=True, exist_ok=True)
    log = (BROKER_DIR.parent / "broker.log").open("ab")
    process = subprocess.Popen(
        [_tool("kafkalog"), "broker", "--port", str(port), "--data-dir", str(BROKER_DIR)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise click.ClickException(f"the broker exited with {process.returncode}; see {log.name}")
        try:
            with Admin(f"127.0.0.1:{port}") as admin:
                admin.list_topics()
        except KafkalogError:  # not up yet: keep waiting until the deadline
            time.sleep(0.2)
        else:
            return process
    process.kill()
    raise click.ClickException(f"the broker did not answer on 127.0.0.1:{port} within 30 s; see {log.name}")


def _produce(bootstrap: str, topic: str, count: int) -> None:
    with Admin(bootstrap) as admin:
        if topic not in admin.list_topics():
            admin.create_topic(topic, 4)
    rng = random.Random(7)
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    with Producer(bootstrap) as producer:
        for i in range(count):
            if i % 5000 == 4999:
                value = b'{"user_id": "not a number", "event": "click"}'  # lands in the quarantine
            else:
                value = json.dumps(
                    {
                        "user_id": rng.randrange(1, 50_000),
                        "session": f"s{rng.randrange(1 << 32):08x}",
                        "event": rng.choice(EVENTS),
                        "amount": round(rng.random() * 100, 2),
                        "country": rng.choice(COUNTRIES),
                        "ts": (start + timedelta(seconds=i * 3 * 3600 / count)).isoformat(),
                    }
                ).encode()
            producer.send(topic, value, key=str(i).encode())
        producer.flush()


def _page_views_flow(bootstrap: str, submit: list[str], env: dict[str, str]) -> None:
    """The page_views example: load, transforms, expectations (one bad page quarantined), publish."""
    flow_spec = load_spec(PAGE_VIEWS)
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=20)
    events = list(page_views(start, 600, bad_page_every=599))  # about 16 hours of views
    with Admin(bootstrap) as admin:
        if flow_spec.topics[0] not in admin.list_topics():
            admin.create_topic(flow_spec.topics[0], 2)
    with Producer(bootstrap) as producer:
        for value in encode(iter(events)):
            producer.send(flow_spec.topics[0], value)
        producer.flush()
    command = [*submit, "jobs/load_warehouse.py", "--pipeline", str(PAGE_VIEWS)]
    click.echo(f"\n{len(events):,} page views produced\n$ {' '.join(command)}    # load, transforms, validate, publish")
    code = subprocess.call(command, env=env)
    if code != 0:
        raise click.ClickException(f"the page_views pipeline exited with {code}")
    for output in flow_spec.outputs:
        files = sorted(Path(output.path).glob("dt=*/**/*.parquet"))
        click.echo(f"warehouse table {output.name}: {len(files)} Parquet files under {output.path}/")


@click.command()
@click.option("--messages", default=200_000, show_default=True, help="Events to produce before the load.")
@click.option("--port", default=29092, show_default=True)
def main(messages: int, port: int) -> None:
    """Run the demo pipeline on an embedded broker and a local Spark."""
    spec = load_spec(PIPELINE)
    broker = _start_broker(port)
    try:
        bootstrap = f"127.0.0.1:{port}"
        click.echo(f"broker up on {bootstrap}; producing {messages:,} events to {spec.topics[0]} ...")
        _produce(bootstrap, spec.topics[0], messages)
        submit = [_tool("spark-submit"), "--master", "local[*]", "--conf", "spark.ui.enabled=false"]
        submit += ["--conf", "spark.log.level=WARN", "--conf", "spark.ui.showConsoleProgress=false"]
        submit += ["jobs/load_warehouse.py", "--pipeline", str(PIPELINE)]
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        for attempt in ("load", "the same load again (nothing new: a no-op)"):
            click.echo(f"\n$ {' '.join(submit)}    # {attempt}")
            code = subprocess.call(submit, env=env)
            if code != 0:
                raise click.ClickException(f"the load exited with {code}")
        subprocess.call([_tool("pipelines"), "status", str(PIPELINE)])
        subprocess.call([_tool("pipelines"), "offsets", str(PIPELINE), "--lag"])
        rows = sorted(Path(spec.raw.path).glob("dt=*/hour=*/*.parquet"))
        click.echo(f"\nraw layer: {len(rows)} Parquet files under {spec.raw.path}/dt=*/hour=*/")
        _page_views_flow(bootstrap, submit[:-3], env)
    finally:
        broker.terminate()
        broker.wait(30)


if __name__ == "__main__":
    main()
