"""The storage contract on a real HDFS, and the WebHDFS answers it is built on, from a real NameNode.

- Every contract test of tests/pipelines/storage/test_storage.py (those that take ``backend``) runs here
  against the MiniDFSCluster twice: ``WebHdfsStorage`` on hdfs:// paths through the NameNode's
  WebHDFS (how the tools reach HDFS without Spark) and ``HadoopStorage`` through Hadoop's
  FileSystem in the Spark driver's JVM (how a run's commit steps reach it). HDFS is the authority
  for the contract's semantics: what it refuses, the storages refuse.
- The REST semantics ``WebHdfsStorage`` relies on, asked of the NameNode with the bare ``hdfs``
  client: the plain RENAME enters an existing directory and answers false, RENAME with
  ``renameoptions=NONE`` (rename2) refuses with exceptions, CREATE is redirected to a DataNode,
  which refuses an existing path, missing paths are 404 FileNotFoundException, and a permission
  refusal (permissions are on) is an error, not a refusal; the Java stack traces the DataNode sends
  stay out of a StorageError.
- HA name-service addresses (``a;b``, as ``raw.webhdfs_url`` may hold): a dead address before the
  NameNode costs nothing but a refused connection; only dead or wrong addresses fail naming them;
  a pipeline file with such a value works through the tools' storage, a malformed one is refused.
"""

from __future__ import annotations

import getpass
import inspect
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import hdfs
import pytest
from hdfs.util import HdfsError

from pipelines.app.runner import state_of
from pipelines.config.pipeline import load_spec
from pipelines.errors import AlreadyExistsError, SpecError, StorageError
from pipelines.storage import FileStatus, storage_for
from pipelines.storage.hadoop import HadoopStorage
from pipelines.storage.webhdfs import WebHdfsStorage
from tests.hadoop.on_hdfs import hdfs_directory
from tests.pipelines.harness import write_spec
from tests.pipelines.storage import test_storage as contract
from tests.pipelines.storage.test_storage import (  # noqa: F401 - the contract tests: pytest collects them here too
    Backend,
    test_delete,
    test_list_is_sorted_with_sizes_and_kinds,
    test_list_of_a_file_fails,
    test_list_of_a_missing_directory_is_empty,
    test_racing_write_new_calls_one_wins_the_others_see_already_exists,
    test_read_of_a_directory_fails,
    test_read_of_a_missing_file_names_the_path,
    test_rename_never_replaces_an_existing_destination,
    test_rename_of_a_directory_moves_its_tree,
    test_rename_of_a_file_creates_the_destination_parent,
    test_rename_of_a_missing_source_returns_false_and_creates_nothing,
    test_rename_or_fail_below_a_file_fails,
    test_rename_or_fail_names_both_paths_when_the_destination_exists,
    test_rename_or_fail_names_both_paths_when_the_source_is_missing,
    test_rename_or_fail_of_a_directory_into_itself_fails,
    test_rename_then_write_new_is_a_commit,
    test_walk_files_goes_depth_first_in_name_order,
    test_walk_files_returns_every_file_with_its_path,
    test_write_bytes_refuses_an_existing_directory,
    test_write_bytes_refuses_an_existing_file,
    test_write_new_is_not_disturbed_by_a_stale_temporary,
    test_write_new_publishes_the_whole_file_and_leaves_no_temporary,
    test_write_new_refuses_an_existing_file,
    test_write_then_read,
)
from tests.support.hadoop import HadoopCluster

pytestmark = pytest.mark.integration

LEFT_OUT: dict[str, str] = {}
"""Contract tests of test_storage.py not run here, each with the reason (none: every one holds on HDFS)."""

INTRUDER = "intruder"
"""A WebHDFS user name that owns nothing (simple authentication: the client names itself)."""


# the contract on the real HDFS


@pytest.fixture(params=["webhdfs-on-hdfs", "hadoop-fs-on-hdfs"])
def backend(request: pytest.FixtureRequest, hadoop: HadoopCluster) -> Iterator[Backend]:
    """A storage of the MiniDFSCluster and a fresh hdfs:// directory of its own (not created yet)."""
    kind: str = request.param
    base = hdfs_directory(hadoop, f"{kind}-{request.node.originalname.removeprefix('test_')[:40]}")
    if kind == "hadoop-fs-on-hdfs":
        # Spark only for this kind: the WebHDFS half runs without a JVM of ours, as the tools do.
        storage = storage_for(base, spark=request.getfixturevalue("spark"))
        assert isinstance(storage, HadoopStorage)
        yield Backend(kind, storage, base)
        return
    webhdfs = storage_for(base, webhdfs_url=hadoop.webhdfs_url)
    assert isinstance(webhdfs, WebHdfsStorage)
    with webhdfs:
        yield Backend(kind, webhdfs, base)


def test_every_contract_test_runs_here() -> None:
    """A contract test added to test_storage.py runs on the real HDFS too, unless LEFT_OUT says why."""
    contract_tests = {
        name
        for name, value in vars(contract).items()
        if name.startswith("test_") and callable(value) and "backend" in inspect.signature(value).parameters
    }
    here = {name for name in contract_tests if globals().get(name) is getattr(contract, name)}
    assert contract_tests - here == set(LEFT_OUT)


# the NameNode's REST semantics, through the bare hdfs client


@pytest.fixture
def raw(hadoop: HadoopCluster) -> Iterator[hdfs.InsecureClient]:
    """The ``hdfs`` package's client on the NameNode, as the local user (HDFS's superuser here)."""
    client = hdfs.InsecureClient(hadoop.webhdfs_url, user=getpass.getuser(), timeout=30)
    try:
        yield client
    finally:
        client._session.close()


@pytest.fixture
def home(request: pytest.FixtureRequest, hadoop: HadoopCluster) -> str:
    """A fresh absolute HDFS path (no scheme) for one test; not created."""
    return urlsplit(hdfs_directory(hadoop, request.node.originalname.removeprefix("test_")[:40])).path


def _read(raw: hdfs.InsecureClient, path: str) -> bytes:
    with raw.read(path) as reader:
        data: bytes = reader.read()
    return data


def test_plain_rename_moves_into_an_existing_directory(raw: hdfs.InsecureClient, home: str) -> None:
    """FileSystem.rename semantics: a destination directory is entered, not refused; why
    WebHdfsStorage never sends the plain RENAME."""
    raw.write(f"{home}/a/f", data=b"x")
    raw.makedirs(f"{home}/d")
    raw.rename(f"{home}/a/f", f"{home}/d")
    assert raw.list(f"{home}/d") == ["f"]
    assert _read(raw, f"{home}/d/f") == b"x"


def test_plain_rename_answers_false_and_the_package_raises(raw: hdfs.InsecureClient, home: str) -> None:
    """The plain RENAME answers {"boolean": false} for every refusal, without saying which; the
    package's rename turns that into an HdfsError with no Java exception, like a failure."""
    raw.write(f"{home}/a", data=b"a")
    raw.write(f"{home}/b", data=b"b")
    for destination in (f"{home}/b", f"{home}/no/parent"):
        assert raw._rename(f"{home}/a", destination=destination).json() == {"boolean": False}
    assert raw._rename(f"{home}/missing", destination=f"{home}/c").json() == {"boolean": False}
    with pytest.raises(HdfsError, match="Unable to rename") as failed:
        raw.rename(f"{home}/a", f"{home}/b")
    assert failed.value.exception is None
    assert _read(raw, f"{home}/b") == b"b"
    assert raw.status(f"{home}/no", strict=False) is None


def test_rename2_refusals_are_exceptions(raw: hdfs.InsecureClient, home: str) -> None:
    """RENAME with renameoptions=NONE (rename2) refuses with a Java exception per cause and changes
    nothing; it succeeds with 200 and an empty body.

    An existing destination of the other kind (a file onto a directory, a directory onto a file) is a
    bare IOException ("must both be directories"), checked before FileAlreadyExistsException, which is
    for a destination of the same kind: WebHdfsStorage has to treat both as "dst exists"."""
    raw.write(f"{home}/a", data=b"a")
    raw.write(f"{home}/file", data=b"")
    raw.write(f"{home}/dir/f", data=b"")
    raw.makedirs(f"{home}/empty")
    refusals = {
        (f"{home}/a", f"{home}/file"): "FileAlreadyExistsException",
        (f"{home}/dir", f"{home}/empty"): "FileAlreadyExistsException",
        (f"{home}/a", f"{home}/a"): "FileAlreadyExistsException",  # the same path
        (f"{home}/a", f"{home}/empty"): "IOException",  # must both be directories
        (f"{home}/dir", f"{home}/file"): "IOException",  # the same check, the other way round
        (f"{home}/missing", f"{home}/new"): "FileNotFoundException",
        (f"{home}/a", f"{home}/no/parent"): "FileNotFoundException",
        (f"{home}/a", f"{home}/file/under"): "ParentNotDirectoryException",
        (f"{home}/a", f"{home}/a/under"): "ParentNotDirectoryException",  # under the source, a file
        (f"{home}/dir", f"{home}/dir/inner"): "IOException",  # under the source, a directory
    }
    for (source, destination), exception in refusals.items():
        with pytest.raises(HdfsError) as failed:
            raw._rename(source, destination=destination, renameoptions="NONE")
        assert failed.value.exception == exception, (source, destination, failed.value.message)
        if exception == "IOException" and destination == f"{home}/empty":
            assert failed.value.message == f"Source {source} and destination {destination} must both be directories"
    assert _read(raw, f"{home}/a") == b"a"
    assert raw.list(f"{home}/empty") == []
    assert sorted(raw.list(home)) == ["a", "dir", "empty", "file"]
    moved = raw._rename(f"{home}/a", destination=f"{home}/empty/a", renameoptions="NONE")
    assert (moved.status_code, moved.content) == (200, b"")
    assert _read(raw, f"{home}/empty/a") == b"a"


def test_webhdfs_write_goes_through_the_datanode_redirect(
    raw: hdfs.InsecureClient, home: str, hadoop: HadoopCluster
) -> None:
    """CREATE at the NameNode creates nothing: it answers 307 with a DataNode's WebHDFS address, even
    for a path that exists (it looks at nothing); the PUT of the data there creates the file. The
    storage's write follows the redirect and returns with the file written and closed."""
    namenode_port = urlsplit(hadoop.webhdfs_url).port
    raw.write(f"{home}/existing", data=b"old")
    redirect = raw._create(f"{home}/existing", overwrite=False)  # the raw endpoint follows no redirect
    assert redirect.status_code == 307
    assert urlsplit(redirect.headers["Location"]).path == f"/webhdfs/v1{home}/existing"

    redirect = raw._create(f"{home}/f", overwrite=False)
    assert redirect.status_code == 307
    datanode = urlsplit(redirect.headers["Location"])
    assert datanode.port != namenode_port
    assert (datanode.path, "overwrite=false" in datanode.query) == (f"/webhdfs/v1{home}/f", True)
    assert raw.status(f"{home}/f", strict=False) is None
    assert raw._request("PUT", redirect.headers["Location"], data=b"x").status_code == 201
    assert _read(raw, f"{home}/f") == b"x"

    storage = storage_for(f"{hadoop.hdfs_url}{home}", webhdfs_url=hadoop.webhdfs_url)
    assert isinstance(storage, WebHdfsStorage)
    with storage:
        storage.write_bytes(f"{hadoop.hdfs_url}{home}/g", b"through the storage")
    assert _read(raw, f"{home}/g") == b"through the storage"
    assert hadoop.open_files(home) == []


def test_create_refuses_an_existing_file_at_the_datanode(raw: hdfs.InsecureClient, home: str) -> None:
    """The DataNode's CREATE (overwrite=false) is refused with 403 FileAlreadyExistsException, also
    for a directory; overwrite=true replaces a file."""
    raw.write(f"{home}/f", data=b"first")
    raw.makedirs(f"{home}/d")
    for path in (f"{home}/f", f"{home}/d"):
        with pytest.raises(HdfsError, match="already exists") as refused:
            raw.write(path, data=b"second")
        assert refused.value.exception == "FileAlreadyExistsException"
    assert _read(raw, f"{home}/f") == b"first"
    raw.write(f"{home}/f", data=b"third", overwrite=True)
    assert _read(raw, f"{home}/f") == b"third"


def test_missing_paths_are_404_file_not_found(raw: hdfs.InsecureClient, home: str) -> None:
    """GETFILESTATUS and LISTSTATUS of a missing path: 404 FileNotFoundException naming it; DELETE
    of one answers false."""
    for response in (raw._get_file_status(f"{home}/x", strict=False), raw._list_status(f"{home}/x", strict=False)):
        assert response.status_code == 404
        assert response.json()["RemoteException"]["exception"] == "FileNotFoundException"
    for method in (raw.status, raw.list):
        with pytest.raises(HdfsError, match=f"{home}/x") as failed:
            method(f"{home}/x")
        assert failed.value.exception == "FileNotFoundException"
    assert raw.status(f"{home}/x", strict=False) is None
    assert raw.delete(f"{home}/x") is False


def test_hdfs_urls_go_through_the_given_webhdfs_address(raw: hdfs.InsecureClient, home: str) -> None:
    """An hdfs:// URL's authority is only the filesystem's name: every request goes to the WebHDFS
    address given (here the authority does not even resolve), the paths are its HDFS paths."""
    storage = storage_for("hdfs://namenode.invalid:8020/data", webhdfs_url=raw.url, user=getpass.getuser())
    assert isinstance(storage, WebHdfsStorage)
    with storage:
        storage.write_bytes(f"hdfs://namenode.invalid:8020{home}/x/part-0", b"abc")
        assert storage.list(f"hdfs://namenode.invalid:8020{home}/x") == [
            FileStatus(f"hdfs://namenode.invalid:8020{home}/x/part-0", "part-0", False, 3)
        ]
        assert storage.rename(f"hdfs://namenode.invalid:8020{home}/x", f"hdfs://namenode.invalid:8020{home}/y")
    assert _read(raw, f"{home}/y/part-0") == b"abc"


def test_webhdfs_rename_raises_for_failures_other_than_refusals(
    raw: hdfs.InsecureClient, home: str, hadoop: HadoopCluster
) -> None:
    """A permission refusal is not "dst exists": rename raises StorageError naming both paths and
    the NameNode's AccessControlException, and nothing moves."""
    raw.write(f"{home}/a", data=b"a")
    raw.set_permission(home, "755")  # the superuser's directory: others may read it, not change it
    src, dst = f"{hadoop.hdfs_url}{home}/a", f"{hadoop.hdfs_url}{home}/b"
    with storage_for(src, webhdfs_url=hadoop.webhdfs_url, user=INTRUDER) as storage:
        assert storage.exists(src)
        with pytest.raises(StorageError, match="AccessControlException: Permission denied: user=intruder") as failed:
            storage.rename(src, dst)
        assert not isinstance(failed.value, AlreadyExistsError)
        assert src in str(failed.value)
        assert dst in str(failed.value)
        assert "access=WRITE" in str(failed.value)
    assert _read(raw, f"{home}/a") == b"a"
    assert raw.list(home) == ["a"]


def test_webhdfs_errors_carry_the_java_message_without_its_stack_trace(
    raw: hdfs.InsecureClient, home: str, hadoop: HadoopCluster
) -> None:
    """The DataNode's refusals (CREATE, OPEN) carry the NameNode's Java stack trace in their message;
    a StorageError keeps the exception and its first line, one line for the person reading it."""
    raw.write(f"{home}/d/f", data=b"x")
    with pytest.raises(HdfsError) as answered:
        raw.write(f"{home}/d", data=b"y")
    assert "\n\tat org.apache.hadoop" in answered.value.message  # what the DataNode sends
    with storage_for(f"{hadoop.hdfs_url}{home}", webhdfs_url=hadoop.webhdfs_url) as storage:
        for action in (
            lambda: storage.write_bytes(f"{hadoop.hdfs_url}{home}/d", b"y"),
            lambda: storage.read_bytes(f"{hadoop.hdfs_url}{home}/d"),
        ):
            with pytest.raises(StorageError) as failed:
                action()
            assert "\n" not in str(failed.value), str(failed.value)
            assert f"{home}/d" in str(failed.value)


# HA name-service addresses: several WebHDFS addresses separated by ";"


@pytest.fixture
def dead() -> Iterator[list[str]]:
    """Two http:// addresses that refuse connections (bound, never listening: no one else takes them)."""
    sockets = [socket.socket(), socket.socket()]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        yield [f"http://127.0.0.1:{sock.getsockname()[1]}" for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _every_operation(webhdfs_url: str, base: str) -> None:
    """Each operation of the interface on a storage of its own (the ``hdfs`` client moves a live
    address to the front after a failure: a fresh one tries the addresses in the given order)."""

    def on_fresh(operation: Callable[[WebHdfsStorage], Any]) -> Any:
        storage = storage_for(base, webhdfs_url=webhdfs_url)
        assert isinstance(storage, WebHdfsStorage) and storage.webhdfs_url == webhdfs_url
        with storage:
            return operation(storage)

    on_fresh(lambda s: s.write_bytes(f"{base}/staging/part-0", b"data"))
    assert on_fresh(lambda s: s.exists(f"{base}/staging/part-0"))
    assert on_fresh(lambda s: s.read_bytes(f"{base}/staging/part-0")) == b"data"
    assert on_fresh(lambda s: s.rename(f"{base}/staging", f"{base}/final/run-1")) is True
    assert on_fresh(lambda s: s.list(f"{base}/final")) == [FileStatus(f"{base}/final/run-1", "run-1", True, 0)]
    on_fresh(lambda s: s.write_new(f"{base}/final/_manifest", b"{}"))
    with pytest.raises(AlreadyExistsError):
        on_fresh(lambda s: s.write_new(f"{base}/final/_manifest", b"{}"))
    assert [entry.name for entry in on_fresh(lambda s: s.walk_files(f"{base}/final"))] == ["_manifest", "part-0"]
    assert on_fresh(lambda s: s.delete(f"{base}/final", recursive=True)) is True
    assert not on_fresh(lambda s: s.exists(f"{base}/final"))


def test_ha_addresses_with_a_dead_one_first_every_operation_works(hadoop: HadoopCluster, dead: list[str]) -> None:
    """A NameNode address that refuses connections (the other NameNode of an HA pair, down) before the
    live one: every operation goes on to the live one."""
    _every_operation(f"{dead[0]};{hadoop.webhdfs_url}", hdfs_directory(hadoop, "ha-dead-first"))
    _every_operation(f"{dead[0]};{dead[1]};{hadoop.webhdfs_url}", hdfs_directory(hadoop, "ha-two-dead"))


def test_ha_addresses_all_dead_or_wrong_fail_naming_them(hadoop: HadoopCluster, dead: list[str]) -> None:
    """With no NameNode among the addresses, every operation fails with a StorageError that names
    the path and the addresses: dead ones (connection refused) and wrong ones (a server that answers,
    but not WebHDFS: here the NameNode's RPC port spoken to in HTTP, whose answers name no address)."""
    rpc_port = f"http://localhost:{urlsplit(hadoop.hdfs_url).port}"
    base = hdfs_directory(hadoop, "ha-none-alive")
    for addresses in ([dead[0]], [dead[0], dead[1]], [rpc_port], [dead[0], rpc_port]):
        storage = storage_for(base, webhdfs_url=";".join(addresses))
        with storage:
            operations: list[tuple[str, Any]] = [
                ("checking", lambda s=storage: s.exists(f"{base}/x")),
                ("reading", lambda s=storage: s.read_bytes(f"{base}/x")),
                ("creating", lambda s=storage: s.write_bytes(f"{base}/x", b"x")),
                ("listing", lambda s=storage: s.list(base)),
                ("renaming", lambda s=storage: s.rename(f"{base}/x", f"{base}/y")),
                ("deleting", lambda s=storage: s.delete(f"{base}/x")),
            ]
            for action, operation in operations:
                with pytest.raises(StorageError) as failed:
                    operation()
                message = str(failed.value)
                assert message.startswith(f"{action} {base}/x" if action != "listing" else f"listing {base}"), message
                for address in addresses:
                    assert address in message, (addresses, message)


def _pipeline_file(tmp_path: Path, raw_path: str, webhdfs_url: str) -> Path:
    return write_spec(tmp_path, "localhost:9092", tmp_path, raw_options={"path": raw_path, "webhdfs_url": webhdfs_url})


def test_a_pipeline_file_with_ha_addresses_works_through_the_tools_storage(
    tmp_path: Path, hadoop: HadoopCluster, raw: hdfs.InsecureClient, dead: list[str]
) -> None:
    """``raw.webhdfs_url: "<dead>;<namenode>"`` loads as written, and the tools' state (status,
    offsets: pipelines.app.runner.state_of, no Spark) reads and writes the raw layer through it."""
    addresses = f"{dead[0]};{hadoop.webhdfs_url}"
    raw_path = f"{hdfs_directory(hadoop, 'ha-spec')}/raw"
    spec = load_spec(_pipeline_file(tmp_path, raw_path, addresses))
    assert spec.raw.webhdfs_url == addresses
    assert spec.webhdfs_url_for(raw_path) == addresses
    state = state_of(spec)
    assert state.committed_seqs() == []
    state.record_empty_run("run-1")
    assert state_of(spec).run_record("run-1") == (True, None)
    assert _read(raw, f"{urlsplit(raw_path).path}/_pipeline/runs/run-1.json") == b'{"seq": null, "target": null}'


@pytest.mark.parametrize(
    ("webhdfs_url", "named"),
    [
        ("namenode:9870", "'namenode:9870'"),  # no scheme: urlsplit reads "namenode" as one
        ("http://127.0.0.1:9870;namenode2:9870", "'namenode2:9870'"),  # one bad address of two
        ("hdfs://localhost:8020", "'hdfs://localhost:8020'"),  # the RPC address, not WebHDFS
        ("http:/namenode:9870", "'http:/namenode:9870'"),  # a slash short: no host
        ("http://namenode:98070", "'http://namenode:98070'"),  # no such port
    ],
)
def test_a_pipeline_file_with_a_malformed_webhdfs_address_is_refused_naming_it(
    tmp_path: Path, webhdfs_url: str, named: str
) -> None:
    """A raw.webhdfs_url that is not http(s)://host[:port] (any of its addresses) is refused, naming
    the address, before any request: by the loader or when the tools make the storage from the spec."""
    raw_path = "hdfs://namenode:8020/data/raw"
    with pytest.raises((SpecError, StorageError)) as refused:
        state_of(load_spec(_pipeline_file(tmp_path, raw_path, webhdfs_url)))
    assert named in str(refused.value)
    assert "http" in str(refused.value)
