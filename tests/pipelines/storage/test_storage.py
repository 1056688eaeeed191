"""The storage contract (HDFS semantics) checked against every implementation.

Each contract test (those taking ``backend``) runs here on local files: plain paths, file:// URLs,
and the fallback used where renameat2 is missing. tests/hadoop/test_storage_on_hdfs.py runs the same
tests on a real HDFS (Hadoop's MiniDFSCluster), through WebHDFS and through Hadoop's FileSystem, and
asks the real NameNode the WebHDFS REST semantics WebHdfsStorage is built on. The refusals are the
point: a rename never replaces an existing file or directory, where POSIX rename(2) would replace a
file or an empty directory without a word.

What stays here of WebHDFS needs no server at all (URL parsing, an unreachable address) or a fault
the real NameNode cannot produce, served by ``tests.support.webhdfs_server`` (each such test says
which).
"""

from __future__ import annotations

import re
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import pipelines.storage.local as local_module
from pipelines.errors import AlreadyExistsError, PlanError, StorageError
from pipelines.ledger.state import PipelineState
from pipelines.storage import FileStatus, LocalStorage, Storage, storage_for
from pipelines.storage.webhdfs import WebHdfsStorage
from tests.support.webhdfs_server import WebHdfsServer

DATA = bytes(range(256)) * 41  # not a round size, every byte value


@dataclass
class Backend:
    """A storage and a directory of it (not created yet) that the test owns."""

    kind: str
    storage: Storage
    base: str

    def at(self, relative: str) -> str:
        return self.storage.join(self.base, relative)


def _mkdir(storage: Storage, path: str) -> None:
    """An empty directory (the interface creates directories only as parents)."""
    marker = storage.join(path, "marker")
    storage.write_bytes(marker, b"")
    assert storage.delete(marker)


@pytest.fixture(params=["local", "local-file-url", "local-without-renameat2"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    kind: str = request.param
    root = tmp_path_factory.mktemp("storage")
    base = f"file://{root}/base" if kind == "local-file-url" else str(root / "base")
    storage = storage_for(base)
    assert isinstance(storage, LocalStorage)
    if kind != "local-without-renameat2":
        yield Backend(kind, storage, base)
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local_module, "_renameat2", None)
        yield Backend(kind, storage, base)


def test_the_local_variants_cover_both_rename_paths() -> None:
    """ "local" renames with renameat2 and "local-without-renameat2" with its fallback: both must exist."""
    if not sys.platform.startswith("linux"):
        pytest.skip("renameat2 is Linux's")
    assert local_module._renameat2 is not None


# write, read


def test_write_then_read(backend: Backend) -> None:
    s, path = backend.storage, backend.at("deep/er/file.bin")
    assert not s.exists(path)
    s.write_bytes(path, DATA)
    assert s.exists(path)
    assert s.exists(backend.at("deep/er"))  # parents were created
    assert s.read_bytes(path) == DATA
    s.write_bytes(backend.at("empty"), b"")
    assert s.read_bytes(backend.at("empty")) == b""


def test_write_bytes_refuses_an_existing_file(backend: Backend) -> None:
    s, path = backend.storage, backend.at("once")
    s.write_bytes(path, b"first")
    with pytest.raises(AlreadyExistsError, match="already exists") as refused:
        s.write_bytes(path, b"second, longer")
    assert path in str(refused.value)
    assert s.read_bytes(path) == b"first"


def test_write_bytes_refuses_an_existing_directory(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes(backend.at("dir/inside"), b"x")
    with pytest.raises(AlreadyExistsError):
        s.write_bytes(backend.at("dir"), b"y")
    assert [entry.name for entry in s.list(backend.at("dir"))] == ["inside"]


def test_read_of_a_missing_file_names_the_path(backend: Backend) -> None:
    missing = backend.at("no/such/file")
    with pytest.raises(StorageError) as failed:
        backend.storage.read_bytes(missing)
    assert not isinstance(failed.value, AlreadyExistsError)
    assert missing in str(failed.value)


def test_read_of_a_directory_fails(backend: Backend) -> None:
    backend.storage.write_bytes(backend.at("d/f"), b"x")
    with pytest.raises(StorageError, match="reading"):
        backend.storage.read_bytes(backend.at("d"))


# write_new


def test_write_new_publishes_the_whole_file_and_leaves_no_temporary(backend: Backend) -> None:
    s, path = backend.storage, backend.at("out/manifest.json")
    s.write_new(path, DATA)
    assert s.read_bytes(path) == DATA
    assert s.list(backend.at("out")) == [FileStatus(path, "manifest.json", False, len(DATA))]


def test_write_new_is_not_disturbed_by_a_stale_temporary(backend: Backend) -> None:
    s, path = backend.storage, backend.at("out/manifest.json")
    s.write_bytes(backend.at("out/.manifest.json.tmp"), b"left by a crashed writer")
    s.write_new(path, b"fresh")
    assert s.read_bytes(path) == b"fresh"
    names = sorted(entry.name for entry in s.list(backend.at("out")))
    assert names == [".manifest.json.tmp", "manifest.json"]


def test_racing_write_new_calls_one_wins_the_others_see_already_exists(backend: Backend) -> None:
    s, path = backend.storage, backend.at("out/manifest.json")
    writers = 6
    start = threading.Barrier(writers)
    outcomes: list[object] = []

    def write(n: int) -> None:
        start.wait()
        try:
            s.write_new(path, f"writer {n}".encode())
            outcomes.append(n)
        except AlreadyExistsError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    winners = [o for o in outcomes if isinstance(o, int)]
    assert len(winners) == 1 and len(outcomes) == writers, outcomes
    assert s.read_bytes(path) == f"writer {winners[0]}".encode()
    assert [entry.name for entry in s.list(backend.at("out"))] == ["manifest.json"]


def test_write_new_refuses_an_existing_file(backend: Backend) -> None:
    s, path = backend.storage, backend.at("out/manifest.json")
    s.write_bytes(path, b"committed")
    with pytest.raises(AlreadyExistsError) as refused:
        s.write_new(path, b"late")
    assert path in str(refused.value)
    assert s.read_bytes(path) == b"committed"


# rename


def test_rename_of_a_file_creates_the_destination_parent(backend: Backend) -> None:
    s = backend.storage
    src, dst = backend.at("staging/part-0"), backend.at("final/2024/01/part-0")
    s.write_bytes(src, DATA)
    assert s.rename(src, dst) is True
    assert not s.exists(src)
    assert s.read_bytes(dst) == DATA


def test_rename_of_a_directory_moves_its_tree(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes(backend.at("run/part-0"), b"0")
    s.write_bytes(backend.at("run/sub/part-1"), b"11")
    assert s.rename(backend.at("run"), backend.at("published/run-7")) is True
    assert not s.exists(backend.at("run"))
    assert [(entry.path, entry.size) for entry in s.walk_files(backend.at("published"))] == [
        (backend.at("published/run-7/part-0"), 1),
        (backend.at("published/run-7/sub/part-1"), 2),
    ]


@pytest.mark.parametrize(
    ("source_kind", "destination_kind"),
    [("file", "file"), ("file", "empty directory"), ("directory", "empty directory"), ("directory", "file")],
)
def test_rename_never_replaces_an_existing_destination(
    backend: Backend, source_kind: str, destination_kind: str
) -> None:
    """os.rename would replace the file, and an empty directory with a directory; HDFS refuses both."""
    s = backend.storage
    src, dst = backend.at("src"), backend.at("dst")
    if source_kind == "file":
        s.write_bytes(src, b"source")
    else:
        s.write_bytes(s.join(src, "part-0"), b"source")
    if destination_kind == "file":
        s.write_bytes(dst, b"destination")
    else:
        _mkdir(s, dst)
    before = s.walk_files(backend.base)

    assert s.rename(src, dst) is False

    assert s.walk_files(backend.base) == before
    if destination_kind == "file":
        assert s.read_bytes(dst) == b"destination"
    else:
        assert s.list(dst) == []  # nothing was moved into it either (HDFS's plain rename would)
    assert s.exists(src)


def test_rename_of_a_missing_source_returns_false_and_creates_nothing(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes(backend.at("other"), b"x")
    assert s.rename(backend.at("missing"), backend.at("new/parent/dst")) is False
    assert not s.exists(backend.at("new"))
    assert [entry.name for entry in s.list(backend.base)] == ["other"]


def test_rename_or_fail_names_both_paths_when_the_destination_exists(backend: Backend) -> None:
    s = backend.storage
    src, dst = backend.at("a"), backend.at("b")
    s.write_bytes(src, b"a")
    s.write_bytes(dst, b"b")
    with pytest.raises(AlreadyExistsError) as refused:
        s.rename_or_fail(src, dst)
    assert src in str(refused.value)
    assert dst in str(refused.value)
    assert (s.read_bytes(src), s.read_bytes(dst)) == (b"a", b"b")


def test_rename_or_fail_names_both_paths_when_the_source_is_missing(backend: Backend) -> None:
    src, dst = backend.at("missing"), backend.at("b")
    with pytest.raises(StorageError, match="does not exist") as failed:
        backend.storage.rename_or_fail(src, dst)
    assert not isinstance(failed.value, AlreadyExistsError)
    assert src in str(failed.value)
    assert dst in str(failed.value)
    assert not backend.storage.exists(dst)


def test_rename_or_fail_of_a_directory_into_itself_fails(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes(backend.at("d/f"), b"x")
    with pytest.raises(StorageError) as failed:
        s.rename_or_fail(backend.at("d"), backend.at("d/inner"))
    assert backend.at("d/inner") in str(failed.value)
    assert [entry.path for entry in s.walk_files(backend.base)] == [backend.at("d/f")]


def test_rename_or_fail_below_a_file_fails(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes(backend.at("f"), b"file")
    s.write_bytes(backend.at("src"), b"src")
    with pytest.raises(StorageError) as failed:
        s.rename_or_fail(backend.at("src"), backend.at("f/child"))
    assert backend.at("f/child") in str(failed.value)
    assert (s.read_bytes(backend.at("f")), s.read_bytes(backend.at("src"))) == (b"file", b"src")


def test_rename_then_write_new_is_a_commit(backend: Backend) -> None:
    """The commit protocol in small: stage, publish once, and a second publisher is refused."""
    s = backend.storage
    for attempt in ("first", "second"):
        s.write_bytes(backend.at(f"staging/{attempt}/part-0"), attempt.encode())
    s.rename_or_fail(backend.at("staging/first"), backend.at("table/seq=1"))
    with pytest.raises(AlreadyExistsError):
        s.rename_or_fail(backend.at("staging/second"), backend.at("table/seq=1"))
    assert s.read_bytes(backend.at("table/seq=1/part-0")) == b"first"
    assert [entry.name for entry in s.list(backend.at("table/seq=1"))] == ["part-0"]


# list, walk_files


def test_list_is_sorted_with_sizes_and_kinds(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes(backend.at("b.txt"), b"bbb")
    s.write_bytes(backend.at("c-1"), b"")
    s.write_bytes(backend.at("B/inside"), b"12345")
    s.write_bytes(backend.at("a.txt"), b"a")
    assert s.list(backend.base) == [
        FileStatus(backend.at("B"), "B", True, 0),  # byte order: upper case first
        FileStatus(backend.at("a.txt"), "a.txt", False, 1),
        FileStatus(backend.at("b.txt"), "b.txt", False, 3),
        FileStatus(backend.at("c-1"), "c-1", False, 0),
    ]
    # the listed path's form is kept, trailing slash or not
    assert s.list(backend.base + "/") == s.list(backend.base)


def test_list_of_a_missing_directory_is_empty(backend: Backend) -> None:
    assert backend.storage.list(backend.base) == []
    backend.storage.write_bytes(backend.at("x"), b"")
    assert backend.storage.list(backend.at("missing/deeper")) == []


def test_list_of_a_file_fails(backend: Backend) -> None:
    backend.storage.write_bytes(backend.at("f"), b"x")
    with pytest.raises(StorageError, match="listing") as failed:
        backend.storage.list(backend.at("f"))
    assert backend.at("f") in str(failed.value)


def test_walk_files_returns_every_file_with_its_path(backend: Backend) -> None:
    s = backend.storage
    for name, data in [("b", b"22"), ("a/y/z", b"333"), ("a/x", b"1"), ("a/empty/.keep", b"")]:
        s.write_bytes(backend.at(name), data)
    s.delete(backend.at("a/empty/.keep"))
    assert s.walk_files(backend.base) == [
        FileStatus(backend.at("a/x"), "x", False, 1),
        FileStatus(backend.at("a/y/z"), "z", False, 3),
        FileStatus(backend.at("b"), "b", False, 2),
    ]
    assert s.walk_files(backend.at("missing")) == []


def test_walk_files_goes_depth_first_in_name_order(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes(backend.at("x/f"), b"")
    s.write_bytes(backend.at("x-1"), b"")
    paths = [entry.path[len(backend.base) :] for entry in s.walk_files(backend.base)]
    assert paths == ["/x/f", "/x-1"]  # names in order ("x" < "x-1"), each directory before the next name


# delete


def test_delete(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes(backend.at("f"), b"x")
    assert s.delete(backend.at("f")) is True
    assert not s.exists(backend.at("f"))
    assert s.delete(backend.at("f")) is False

    s.write_bytes(backend.at("tree/a/b"), b"x")
    with pytest.raises(StorageError) as refused:
        s.delete(backend.at("tree"))
    assert backend.at("tree") in str(refused.value)
    assert s.read_bytes(backend.at("tree/a/b")) == b"x"
    assert s.delete(backend.at("tree"), recursive=True) is True
    assert not s.exists(backend.at("tree"))

    _mkdir(s, backend.at("empty"))
    assert s.delete(backend.at("empty")) is True
    assert s.list(backend.base) == []


# storage_for and the WebHDFS specifics


def test_storage_for_an_unknown_scheme_fails() -> None:
    with pytest.raises(StorageError, match="'s3'"):
        storage_for("s3://bucket/table")


def test_storage_for_hdfs_needs_the_webhdfs_address() -> None:
    # names the path and the key of the pipeline file to set
    with pytest.raises(StorageError, match=r"^hdfs://namenode:8020/data: .*\(raw\.webhdfs_url in a pipeline file"):
        storage_for("hdfs://namenode:8020/data")


@pytest.mark.parametrize("stored", [b"not json", b"[1, 2]", b'{"pipeline": "p", "seq": 1}'])
def test_an_unreadable_stored_plan_names_its_file(tmp_path: Path, stored: bytes) -> None:
    state = PipelineState(LocalStorage(), str(tmp_path / "raw"))
    plan = Path(state.plan_path(1))
    plan.parent.mkdir(parents=True)
    plan.write_bytes(stored)
    with pytest.raises(PlanError, match=rf"^{re.escape(str(plan))}: the stored plan is unreadable: ") as info:
        state.pending_plan()
    if stored.startswith(b"{"):
        assert "key 'splits' is missing" in str(info.value)


def test_webhdfs_url_without_a_port_means_9870() -> None:
    with WebHdfsStorage.for_url("webhdfs://namenode/data") as storage:
        assert storage.webhdfs_url == "http://namenode:9870"
    with WebHdfsStorage.for_url("webhdfs://[::1]:50070/data") as storage:
        assert storage.webhdfs_url == "http://[::1]:50070"
    with pytest.raises(StorageError, match="http"):
        WebHdfsStorage.for_url("hdfs://namenode:8020/data", webhdfs_url="namenode:9870")


@pytest.mark.parametrize("bad", ["namenode:9870", "http:/namenode:9870", "http://namenode:98070", "http://nn:x"])
def test_webhdfs_refuses_an_address_that_is_not_an_http_url_of_a_host(bad: str) -> None:
    """Refused when the storage is made, naming the address, also as one of several (HA): a missing
    host or a bad port would otherwise fail only at the first request."""
    for webhdfs_url in (bad, f"http://namenode1:9870;{bad}"):
        with pytest.raises(StorageError, match=rf"^hdfs://namenode:8020: WebHDFS address {re.escape(repr(bad))} "):
            WebHdfsStorage.for_url("hdfs://namenode:8020/data", webhdfs_url=webhdfs_url)


def test_webhdfs_refuses_paths_of_another_filesystem() -> None:
    with WebHdfsStorage.for_url("webhdfs://127.0.0.1:1/base") as storage:
        with pytest.raises(StorageError, match=re.escape("not a path of webhdfs://127.0.0.1:1 ")):
            storage.exists("webhdfs://127.0.0.2:1/base/x")
        with pytest.raises(StorageError, match="not a path of"):
            storage.exists("/base/x")


def test_webhdfs_unreachable_namenode_is_a_storage_error_naming_the_path_and_the_address() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = f"webhdfs://127.0.0.1:{port}/base/x"
    with WebHdfsStorage.for_url(path, user="loader") as storage:
        for operation in (storage.exists, storage.read_bytes, storage.list):
            with pytest.raises(StorageError, match=r"Connection refused|Max retries") as failed:
                operation(path)
            assert path in str(failed.value)
            assert str(failed.value).endswith(f"(WebHDFS at http://127.0.0.1:{port})")  # the address to fix


def test_webhdfs_rename_with_a_server_that_ignores_rename_options() -> None:
    """A gateway that ignores ``renameoptions`` (HttpFS, say) answers the plain RENAME's boolean;
    false is still a refusal, and its false for a missing parent is retried after creating it.

    A fake serves this because the real NameNode cannot: Hadoop 3's WebHDFS always honours
    renameoptions (rename2). The real NameNode's answers are asked in tests/hadoop/test_storage_on_hdfs.py."""
    with (
        WebHdfsServer() as server,
        WebHdfsStorage.for_url(f"webhdfs://127.0.0.1:{server.port}/") as s,
    ):
        base = f"webhdfs://127.0.0.1:{server.port}"
        s.write_bytes(f"{base}/a", b"a")
        s.write_bytes(f"{base}/b", b"b")
        assert s.rename(f"{base}/a", f"{base}/b") is False
        assert s.rename(f"{base}/missing", f"{base}/new/c") is False
        assert not s.exists(f"{base}/new")
        assert s.rename(f"{base}/a", f"{base}/new/c") is True  # its false for a missing parent is retried
        assert s.read_bytes(f"{base}/new/c") == b"a"
        assert s.read_bytes(f"{base}/b") == b"b"
