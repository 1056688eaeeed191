"""``kafkalog topics|produce|consume|offsets``: the clients from the command line, for any Kafka-protocol
broker (kafkalog or Kafka). Data goes to stdout, progress and rates to stderr."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import click

from kafkalog.cli.main import main
from kafkalog.client import Admin, Producer, SimpleConsumer
from kafkalog.errors import KafkalogError
from kafkalog.record import Message

BOOTSTRAP = click.option(
    "-b", "--bootstrap", default="127.0.0.1:9092", show_default=True, help="Brokers, host:port[,host:port...]."
)


class _Rate:
    """Prints ``<count> messages, <rate>/s`` to stderr at most every second, and once at the end."""

    def __init__(self, verb: str, quiet: bool) -> None:
        self.verb = verb
        self.quiet = quiet
        self.count = 0
        self.start = self.last = time.monotonic()

    def add(self, n: int = 1) -> None:
        self.count += n
        now = time.monotonic()
        if not self.quiet and now - self.last >= 1.0:
            self.last = now
            self._print(now, end="\r")

    def done(self) -> None:
        if not self.quiet:
            self._print(time.monotonic(), end="\n")

    def _print(self, now: float, end: str) -> None:
        elapsed = max(now - self.start, 1e-9)
        click.echo(f"{self.verb} {self.count:,} messages, {self.count / elapsed:,.0f}/s", err=True, nl=False)
        click.echo(end, err=True, nl=False)


def _fail(exc: KafkalogError) -> click.ClickException:
    return click.ClickException(str(exc))


@main.group("topics")
def topics() -> None:
    """Create, list and describe topics.

    \b
    kafkalog topics create page_views --partitions 6 --config retention.ms=86400000
    kafkalog topics list
    kafkalog topics describe page_views
    """


@topics.command("create")
@BOOTSTRAP
@click.argument("name")
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--config", "configs", multiple=True, help="Topic config name=value (repeatable).")
def topics_create(bootstrap: str, name: str, partitions: int, configs: tuple[str, ...]) -> None:
    """Create topic NAME."""
    pairs = {}
    for item in configs:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not name=value", param_hint="--config")
        pairs[key] = value
    try:
        with Admin(bootstrap) as admin:
            admin.create_topic(name, partitions, pairs)
    except KafkalogError as exc:
        raise _fail(exc) from exc
    click.echo(f"created {name} with {partitions} partition(s)")


@topics.command("list")
@BOOTSTRAP
def topics_list(bootstrap: str) -> None:
    """Every topic and its partition count."""
    try:
        with Admin(bootstrap) as admin:
            for name, count in admin.list_topics().items():
                click.echo(f"{name}\t{count}")
    except KafkalogError as exc:
        raise _fail(exc) from exc


@topics.command("describe")
@BOOTSTRAP
@click.argument("name")
def topics_describe(bootstrap: str, name: str) -> None:
    """Topic NAME's partitions, their leaders and offsets."""
    try:
        with Admin(bootstrap) as admin, SimpleConsumer(client=admin.client) as consumer:
            described = admin.describe_topic(name)
            click.echo("partition\tleader\tearliest\tlatest")
            for partition, leader in sorted(described.leaders.items()):
                earliest, latest = consumer.earliest_offset(name, partition), consumer.latest_offset(name, partition)
                click.echo(f"{partition}\t{leader}\t{earliest}\t{latest}")
    except KafkalogError as exc:
        raise _fail(exc) from exc


@main.command("produce")
@BOOTSTRAP
@click.argument("topic")
@click.option("-K", "--key-separator", default=None, help="Split each line into key SEP value at the first SEP.")
@click.option("-p", "--partition", type=int, default=None, help="Send everything to this partition.")
@click.option("-z", "--compression", type=click.Choice(["none", "gzip", "snappy", "lz4"]), default="none")
@click.option("--acks", type=click.Choice(["0", "1", "-1"]), default="1", show_default=True)
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def produce(
    bootstrap: str,
    topic: str,
    key_separator: str | None,
    partition: int | None,
    compression: str,
    acks: str,
    quiet: bool,
) -> None:
    """Send stdin to TOPIC, one message per line.

    \b
    seq 1000 | kafkalog produce numbers
    printf 'user-1\\tclicked\\n' | kafkalog produce events -K $'\\t' -z snappy
    """
    rate = _Rate("sent", quiet)
    failures: list[BaseException] = []
    try:
        with Producer(bootstrap, compression=compression, acks=int(acks), linger_ms=20) as producer:
            for line in sys.stdin.buffer:
                value = line.rstrip(b"\n")
                key = None
                if key_separator is not None:
                    key, sep, rest = value.partition(key_separator.encode())
                    if sep:
                        value = rest
                    else:
                        key = None
                future = producer.send(topic, value, key, partition=partition)
                future.add_done_callback(lambda f: failures.append(f.exception()) if f.exception() else None)  # type: ignore[arg-type]
                rate.add()
    except KafkalogError as exc:
        raise _fail(exc) from exc
    rate.done()
    if failures:
        raise click.ClickException(f"{len(failures)} message(s) were not delivered: {failures[0]}")


def _start_offset(consumer: SimpleConsumer, topic: str, partition: int, offset: str) -> int:
    if offset == "beginning":
        return consumer.earliest_offset(topic, partition)
    if offset == "end":
        return consumer.latest_offset(topic, partition)
    if offset.startswith("@"):  # a time in milliseconds since the epoch
        found = consumer.offset_for_timestamp(topic, partition, int(offset[1:]))
        return consumer.latest_offset(topic, partition) if found is None else found[0]
    return int(offset)


@main.command("consume")
@BOOTSTRAP
@click.argument("topic")
@click.option("-p", "--partition", "partitions", type=int, multiple=True, help="Partition(s) to read (default: all).")
@click.option(
    "-o", "--offset", default="beginning", show_default=True,
    help="beginning, end, an offset, or @<ms since epoch> for the first message at or after that time.",
)  # fmt: skip
@click.option("-n", "--max-messages", type=click.IntRange(min=1), default=None, help="Stop after this many.")
@click.option("--print-offsets", is_flag=True, help="Prefix each line with partition and offset.")
@click.option("--print-keys", is_flag=True, help="Prefix each line with the key.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def consume(
    bootstrap: str, topic: str, partitions: tuple[int, ...], offset: str, max_messages: int | None,
    print_offsets: bool, print_keys: bool, quiet: bool,
) -> None:  # fmt: skip
    """Print TOPIC's messages to stdout, one per line, up to the current end of each partition.

    \b
    kafkalog consume numbers --max-messages 10
    kafkalog consume events -p 0 -o @1700000000000 --print-offsets --print-keys
    """
    rate = _Rate("read", quiet)
    out = sys.stdout.buffer
    try:
        with SimpleConsumer(bootstrap) as consumer:
            wanted = list(partitions) or sorted(Admin(client=consumer.client).describe_topic(topic).leaders)
            for message_partition, message in _read(consumer, topic, wanted, offset):
                fields = []
                if print_offsets:
                    fields.append(f"{message_partition}\t{message.offset}".encode())
                if print_keys:
                    fields.append(message.key or b"")
                fields.append(message.value or b"")
                out.write(b"\t".join(fields) + b"\n")
                rate.add()
                if max_messages is not None and rate.count >= max_messages:
                    break
    except KafkalogError as exc:
        raise _fail(exc) from exc
    finally:
        out.flush()
    rate.done()


def _read(consumer: SimpleConsumer, topic: str, partitions: list[int], offset: str) -> Iterator[tuple[int, Message]]:
    for partition in partitions:
        start = _start_offset(consumer, topic, partition, offset)
        end = consumer.latest_offset(topic, partition)
        for message in consumer.messages(topic, partition, start, end):
            yield partition, message


@main.command("offsets")
@BOOTSTRAP
@click.argument("topic")
@click.option("--time", "at", type=int, default=None, help="Also the first offset at or after this time (ms).")
def offsets(bootstrap: str, topic: str, at: int | None) -> None:
    """TOPIC's earliest and latest offset per partition (and by time with --time).

    \b
    kafkalog offsets page_views --time 1700000000000
    """
    try:
        with SimpleConsumer(bootstrap) as consumer:
            leaders = Admin(client=consumer.client).describe_topic(topic).leaders
            click.echo("partition\tearliest\tlatest" + ("\tat_time" if at is not None else ""))
            for partition in sorted(leaders):
                earliest, latest = consumer.earliest_offset(topic, partition), consumer.latest_offset(topic, partition)
                line = f"{partition}\t{earliest}\t{latest}"
                if at is not None:
                    found = consumer.offset_for_timestamp(topic, partition, at)
                    line += f"\t{found[0] if found else -1}"
                click.echo(line)
    except KafkalogError as exc:
        raise _fail(exc) from exc
