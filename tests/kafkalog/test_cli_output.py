"""What every kafkalog command prints the same way (kafkalog.cli.output), run in-process with
click's runner, whose streams are not terminals: counts that agree with their noun, click's errors
ending with ``error: <message>``, rich's lines not cut at 80 columns; and what ``log check`` counts
as a partition in a data directory laid out as a broker leaves it."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner, Result

from kafkalog.cli import main
from kafkalog.log import LogConfig, LogManager
from kafkalog.mirror.mirror import status_line, stopped_line
from kafkalog.server.cluster.offsets import OffsetStore
from kafkalog.server.cluster.topic_config import TopicConfigFiles
from tests.kafkalog.log.helpers import fill, message_set

CONFIG = LogConfig(segment_bytes=2048, retention_ms=None)


def kafkalog(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=stdin, prog_name="kafkalog")


def test_counts_agree_with_their_nouns(tmp_path: Path) -> None:
    one, many = tmp_path / "one", tmp_path / "many"
    with LogManager([one], CONFIG) as manager:
        log = manager.get_or_create_log("t", 0)
        log.append(message_set([b"only"]))
        segment = log.active_segment.log_path
    with LogManager([many], CONFIG) as manager:
        for partition in range(2):
            fill(manager.get_or_create_log("t", partition), 80)  # several segments each
    assert kafkalog("log", "check", str(one)).stdout.splitlines()[-1] == "checked 1 segment in 1 partition: 0 corrupt"
    last = kafkalog("log", "check", str(many)).stdout.splitlines()[-1]
    assert last.endswith(" segments in 2 partitions: 0 corrupt"), last
    with segment.open("ab") as file:
        file.write(b"\0")  # a torn write of one byte
    assert f"torn write: {segment} has 1 byte after its last message" in kafkalog("log", "check", str(one)).stdout
    assert (
        "# 1 trailing byte does not form a whole message (a torn write)" in kafkalog("log", "dump", str(segment)).stdout
    )
    declined = kafkalog("log", "truncate", str(one / "t-0"), "--to", "0", stdin="n\n")
    assert declined.exit_code == 1 and declined.stderr == "Aborted!\n"
    assert f"Remove 1 message from offset 0 of {one / 't-0'}?" in declined.stdout
    assert status_line(1, 2.0, 0, 0, 1) == "mirrored 1 message (2/s), in flight 0, lag 0 over 1 partition"
    assert status_line(2500, 1e4, 3, 7, 4) == "mirrored 2,500 messages (10,000/s), in flight 3, lag 7 over 4 partitions"
    assert stopped_line(1, 0.5) == "mirror stopped: 1 message acknowledged by the target in 0.5 s"


def test_click_errors_end_with_a_lowercase_error_line(tmp_path: Path) -> None:
    usage = kafkalog("consume", "nums", "-o", "foo")
    assert usage.exit_code == 2
    lines = usage.stderr.splitlines()
    assert lines[0] == "Usage: kafkalog consume [OPTIONS] [TOPIC]"  # click's usage lines stay
    assert lines[1] == "Try 'kafkalog consume --help' for help."
    assert lines[-1] == (
        "error: Invalid value for '-o' / '--offset': 'foo' is not beginning, end, an offset or @<ms since epoch>"
    )
    assert "Error" not in usage.stderr
    unknown = kafkalog("nosuch")
    assert unknown.exit_code == 2 and unknown.stderr.splitlines()[-1] == "error: No such command 'nosuch'."
    with LogManager([tmp_path], CONFIG):  # a ClickException raised by a command
        in_use = kafkalog("log", "check", str(tmp_path))
    assert in_use.exit_code == 1
    assert in_use.stderr == f"error: {tmp_path} is in use by a running broker: stop it first\n"
    bare = kafkalog("log")  # a group without a command shows its help, as click does
    assert bare.exit_code == 2 and "Commands:" in bare.stderr and "error" not in bare.stderr
    assert kafkalog("--version").exit_code == 0


def test_log_check_counts_partition_directories_only(tmp_path: Path) -> None:
    data = tmp_path / "kafka-1"  # a data directory may be named like a partition directory
    with LogManager([data], CONFIG) as manager:
        fill(manager.get_or_create_log("orders", 0), 80)
        fill(manager.get_or_create_log(".hidden", 0), 20)  # a legal topic name: its partition is no dot-directory
    OffsetStore(data)  # what the broker keeps beside the partitions: an empty .consumer_offsets, ...
    TopicConfigFiles(data).put("orders", {"retention.ms": "60000"})  # ... .topic_configs
    shutil.copytree(data / "orders-0", data / ".deleted-gone-0-1234")  # a deletion a crash interrupted
    (data / "orders-1").mkdir()  # a partition whose first segment a crash prevented
    (data / "lost+found").mkdir()  # not the broker's at all
    segments = len(list(data.glob("orders-0/*.log"))) + len(list(data.glob(".hidden-0/*.log")))

    done = kafkalog("log", "check", str(data))
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == [
        f"skipped {data / 'lost+found'}: not a <topic>-<partition> directory (a broker ignores it too)",
        f"no segments: {data / 'orders-1'} is an empty partition (a broker opens it with no messages)",
        f"checked {segments} segments in 3 partitions (1 without segments): 0 corrupt",
    ]
    direct = kafkalog("log", "check", str(data / "orders-1"), str(data / "orders-0"))
    assert direct.stdout.splitlines()[-1].endswith(" segments in 2 partitions (1 without segments): 0 corrupt")
    fresh = tmp_path / "kafka-2"
    LogManager([fresh], CONFIG).close()  # a data directory a broker opened once, no partition yet
    assert kafkalog("log", "check", str(fresh)).stdout == "checked 0 segments in 0 partitions: 0 corrupt\n"
    with LogManager([data], CONFIG) as manager:  # the broker opens the partitions that were counted
        assert sorted(manager.logs) == [(".hidden", 0), ("orders", 0), ("orders", 1)]


def test_piped_lines_are_not_cut_at_80_columns(tmp_path: Path) -> None:
    topic = "t" * 249  # the longest topic name
    with LogManager([tmp_path], CONFIG) as manager:
        fill(manager.get_or_create_log(topic, 0), 5)
    done = kafkalog("log", "check", str(tmp_path))
    assert done.exit_code == 0, done.output
    assert f"checking {topic}-0 " in done.stderr  # the progress line, printed once at the end
