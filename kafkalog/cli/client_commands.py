"""``kafkalog topics|produce|consume|offsets``: the clients from the command line, for any Kafka-protocol
broker (kafkalog or Kafka). Data goes to stdout, progress and rates to stderr."""

from __future__ import annotations

import functools
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import click

from kafkalog.cli.main import main
from kafkalog.cli.output import plural
from kafkalog.client import Admin, Producer, SimpleConsumer
from kafkalog.client.committed import Isolation
from kafkalog.errors import KafkalogError
from kafkalog.record import Message

_DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def BOOTSTRAP(command: Callable[..., None]) -> Callable[..., None]:
    """``-b/--bootstrap`` or ``--zookeeper``, handed to the command as one ``cluster`` mapping of
    the keyword arguments the clients take (``bootstrap=…`` or ``zookeeper=…``)."""

    @functools.wraps(command)
    def wrapper(*args: Any, bootstrap: str | None, zookeeper: str | None, **kwargs: Any) -> None:
        if bootstrap is not None and zookeeper is not None:
            raise click.UsageError("give --bootstrap or --zookeeper, not both")
        cluster = {"zookeeper": zookeeper} if zookeeper is not None else {"bootstrap": bootstrap or _DEFAULT_BOOTSTRAP}
        command(*args, cluster=cluster, **kwargs)

    wrapper = click.option(
        "--zookeeper",
        default=None,
        metavar="HOST:PORT[/CHROOT]",
        help="Find the brokers in this ZooKeeper instead (host:port[,host:port...][/chroot]).",
    )(wrapper)
    return click.option(
        "-b", "--bootstrap", default=None, help=f"Brokers, host:port[,host:port...] (default {_DEFAULT_BOOTSTRAP})."
    )(wrapper)


class _Rate:
    """Prints ``<verb> <count> messages, <rate>/s`` (``sent 1 message, ...`` for one) to stderr at most
    every second, and once at the end."""

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
        counted = f"{self.count:,} {plural(self.count, 'message')}"
        click.echo(f"{self.verb} {counted}, {self.count / elapsed:,.0f}/s", err=True, nl=False)
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
def topics_create(cluster: dict[str, Any], name: str, partitions: int, configs: tuple[str, ...]) -> None:
    """Create topic NAME."""
    pairs = {}
    for item in configs:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not name=value", param_hint="--config")
        pairs[key] = value
    try:
        with Admin(**cluster) as admin:
            admin.create_topic(name, partitions, pairs)
    except KafkalogError as exc:
        raise _fail(exc) from exc
    click.echo(f"created {name} with {partitions} {plural(partitions, 'partition')}")


@topics.command("list")
@BOOTSTRAP
def topics_list(cluster: dict[str, Any]) -> None:
    """Every topic and its partition count."""
    try:
        with Admin(**cluster) as admin:
            for name, count in admin.list_topics().items():
                click.echo(f"{name}\t{count}")
    except KafkalogError as exc:
        raise _fail(exc) from exc


@topics.command("describe")
@BOOTSTRAP
@click.argument("name")
def topics_describe(cluster: dict[str, Any], name: str) -> None:
    """Topic NAME's partitions, their leaders and offsets."""
    try:
        with Admin(**cluster) as admin, SimpleConsumer(client=admin.client) as consumer:
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
    cluster: dict[str, Any],
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
        with Producer(**cluster, compression=compression, acks=int(acks), linger_ms=20) as producer:
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
        lost = len(failures)
        raise click.ClickException(
            f"{lost} {plural(lost, 'message was', 'messages were')} not delivered: {failures[0]}"
        )


def _start_offset(consumer: SimpleConsumer, topic: str, partition: int, offset: str) -> int:
    if offset == "beginning":
        return consumer.earliest_offset(topic, partition)
    if offset == "end":
        return consumer.latest_offset(topic, partition)
    if offset.startswith("@"):  # a time in milliseconds since the epoch
        found = consumer.offset_for_timestamp(topic, partition, _number(offset[1:], offset))
        return consumer.latest_offset(topic, partition) if found is None else found[0]
    return _number(offset, offset)


def _number(text: str, given: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise click.BadParameter(
            f"{given!r} is not beginning, end, an offset or @<ms since epoch>", param_hint="'-o' / '--offset'"
        ) from None


@main.command("consume")
@BOOTSTRAP
@click.argument("topic", required=False)
@click.option("-p", "--partition", "partitions", type=int, multiple=True, help="Partition(s) to read (default: all).")
@click.option(
    "-o", "--offset", default="beginning", show_default=True,
    help="beginning, end, an offset, or @<ms since epoch> for the first message at or after that time.",
)  # fmt: skip
@click.option("-n", "--max-messages", type=click.IntRange(min=1), default=None, help="Stop after this many.")
@click.option("--print-offsets", is_flag=True, help="Prefix lines with partition, offset (group: topic too).")
@click.option("--print-keys", is_flag=True, help="Prefix each line with the key.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option(
    "-g", "--group", default=None,
    help="Consume as a member of this group: coordinated by the brokers (-b), or through --zookeeper.",
)  # fmt: skip
@click.option("--topic", "topic_option", default=None, help="In a group: the topic (or give TOPIC).")
@click.option("--whitelist", default=None, metavar="REGEX", help="In a group: topics matching REGEX, new ones too.")
@click.option("--blacklist", default=None, metavar="REGEX", help="In a group: every topic not matching REGEX.")
@click.option(
    "--offset-reset", type=click.Choice(["smallest", "largest"]), default="largest", show_default=True,
    help="In a group: where a partition starts when the group never committed an offset for it.",
)  # fmt: skip
@click.option(
    "--idle-timeout", type=click.FloatRange(min=0), default=None,
    help="In a group: stop after this many seconds without a message (default: run until SIGINT/SIGTERM).",
)  # fmt: skip
@click.option(
    "--commit-interval", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
    help="In a group: seconds between automatic offset commits (and one at the end).",
)  # fmt: skip
@click.option("--consumer-id", default=None, help="In a group: this member's id (default: group_host-time-random).")
@click.option(
    "--session-timeout", type=click.FloatRange(min=1), default=6.0, show_default=True,
    help="In a group: seconds without a heartbeat before this member's membership expires.",
)  # fmt: skip
@click.option(
    "--isolation", type=click.Choice(["read_uncommitted", "read_committed"]), default="read_uncommitted",
    show_default=True,
    help="read_committed: leave out aborted transactions and stop at the last stable offset (an open "
    "transaction's first message).",
)  # fmt: skip
def consume(
    cluster: dict[str, Any], topic: str | None, partitions: tuple[int, ...], offset: str, max_messages: int | None,
    print_offsets: bool, print_keys: bool, quiet: bool, group: str | None, topic_option: str | None,
    whitelist: str | None, blacklist: str | None, offset_reset: str, idle_timeout: float | None,
    commit_interval: float, consumer_id: str | None, session_timeout: float, isolation: Isolation,
) -> None:  # fmt: skip
    """Print TOPIC's messages to stdout, one per line, up to the current end of each partition; or,
    with --group, share the topics' partitions with the group's other members and keep consuming
    (the group coordinated by the brokers, or with --zookeeper through ZooKeeper, where the offsets
    are then committed; SIGINT/SIGTERM commit and leave the group).

    \b
    kafkalog consume numbers --max-messages 10
    kafkalog consume events -p 0 -o @1700000000000 --print-offsets --print-keys
    kafkalog consume -b 127.0.0.1:9092 --group loaders --topic events --offset-reset smallest
    kafkalog consume --zookeeper 127.0.0.1:2181 --group loaders --whitelist 'dc\\..*' --print-offsets
    """
    rate = _Rate("read", quiet)
    out = sys.stdout.buffer
    if group is not None:
        chosen = [x for x in (topic, topic_option, whitelist, blacklist) if x is not None]
        if len(chosen) != 1:
            raise click.UsageError("in a group give exactly one of TOPIC, --topic, --whitelist, --blacklist")
        if partitions:
            raise click.UsageError("--partition does not go with --group: the group assigns partitions")
        try:
            _consume_in_group(
                cluster, group, consumer_id, topic or topic_option, whitelist, blacklist, offset_reset,
                idle_timeout, (commit_interval, session_timeout), max_messages, (print_offsets, print_keys), rate, out,
                isolation,
            )  # fmt: skip
        except KafkalogError as exc:
            raise _fail(exc) from exc
        finally:
            out.flush()
        rate.done()
        return
    if topic is None:
        raise click.UsageError("give TOPIC (or --group with --topic/--whitelist/--blacklist)")
    if offset not in ("beginning", "end"):
        _number(offset.removeprefix("@"), offset)  # a bad --offset is a usage error, before connecting
    try:
        with SimpleConsumer(**cluster, isolation=isolation) as consumer:
            wanted = list(partitions) or sorted(Admin(client=consumer.client).describe_topic(topic).leaders)
            for message_partition, message in _read(consumer, topic, wanted, offset):
                position = f"{message_partition}\t{message.offset}" if print_offsets else None
                _write_line(out, position, message.key if print_keys else None, message.value, print_keys)
                rate.add()
                if max_messages is not None and rate.count >= max_messages:
                    break
    except KafkalogError as exc:
        raise _fail(exc) from exc
    finally:
        out.flush()
    rate.done()


def _write_line(out: BinaryIO, position: str | None, key: bytes | None, value: bytes | None, with_key: bool) -> None:
    """One consumed message as a tab-separated line: [position] [key] value."""
    fields = [] if position is None else [position.encode()]
    if with_key:
        fields.append(key or b"")
    fields.append(value or b"")
    out.write(b"\t".join(fields) + b"\n")


def _consume_in_group(
    cluster: dict[str, str], group: str, consumer_id: str | None, topic: str | None, whitelist: str | None,
    blacklist: str | None, reset: str,
    idle_timeout: float | None, intervals: tuple[float, float], max_messages: int | None, prefixes: tuple[bool, bool],
    rate: _Rate, out: BinaryIO, isolation: Isolation = "read_uncommitted",
) -> None:  # fmt: skip
    """One stream of a GroupConsumer to ``out`` (a member coordinated by the brokers, or through
    ZooKeeper: ``cluster`` has ``bootstrap`` or ``zookeeper``). A signal only sets a flag: the line
    being written is finished before the consumer commits and leaves, so a committed offset was
    always printed."""
    from kafkalog.client.group_consumer import GroupConsumer  # noqa: PLC0415 - kazoo only in group mode

    print_offsets, print_keys = prefixes
    commit_interval, session_timeout = intervals
    stopping: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda number, _: stopping.append(number))
    consumer = GroupConsumer(
        cluster.get("zookeeper"), group, bootstrap=cluster.get("bootstrap"), consumer_id=consumer_id,
        auto_offset_reset=reset, auto_commit_interval_s=commit_interval, stream_timeout_s=0.2,
        session_timeout_s=session_timeout, isolation=isolation,
    )  # fmt: skip
    shown_error: str | None = None
    try:
        if topic is not None:
            (stream,) = consumer.create_message_streams({topic: 1})[topic]
        else:
            (stream,) = consumer.create_message_streams_by_filter(whitelist, blacklist, 1)
        last_message = time.monotonic()
        while not stopping:
            for item in stream:  # returns after 0.2 s without a message, to look at the flags
                position = f"{item.topic}\t{item.partition}\t{item.offset}" if print_offsets else None
                _write_line(out, position, item.key if print_keys else None, item.value, print_keys)
                rate.add()
                last_message = time.monotonic()
                if stopping or (max_messages is not None and rate.count >= max_messages):
                    break
            if max_messages is not None and rate.count >= max_messages:
                break
            if consumer.last_error != shown_error:  # e.g. a round-robin group whose members disagree
                shown_error = consumer.last_error
                if shown_error is not None:
                    click.echo(f"group {group}: {shown_error}", err=True)
            if idle_timeout is not None and time.monotonic() - last_message >= idle_timeout:
                break
        out.flush()  # what is committed below has reached stdout
    finally:
        consumer.close()


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
def offsets(cluster: dict[str, Any], topic: str, at: int | None) -> None:
    """TOPIC's earliest and latest offset per partition (and by time with --time).

    \b
    kafkalog offsets page_views --time 1700000000000
    """
    try:
        with SimpleConsumer(**cluster) as consumer:
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
