"""The basic-authentication users file: written by ``kafkalog registry-user``, read at start with
errors naming the line, passwords checked in constant time (and remembered once found right)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from kafkalog.schema_registry.auth import (
    BasicAuth,
    LoginLimits,
    LoginThrottled,
    PasswordHash,
    hash_password,
    read_users,
    set_user,
)
from kafkalog.schema_registry.errors import RegistryConfigError


def basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


def test_users_written_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "users"
    assert set_user(path, "alice", hash_password("one", iterations=1000)) is False
    assert set_user(path, "bob", hash_password("two", iterations=1000)) is False
    assert set_user(path, "alice", hash_password("three", iterations=1000)) is True
    assert path.stat().st_mode & 0o777 == 0o600
    assert "one" not in path.read_text() and "three" not in path.read_text()
    users = read_users(path)
    assert sorted(users) == ["alice", "bob"]
    auth = BasicAuth(users)
    assert auth.user(basic("alice:three")) == "alice"
    assert auth.user(basic("alice:one")) is None, "the old password is gone"
    assert auth.user(basic("bob:two")) == "bob"
    assert auth.user(basic("bob:two")) == "bob", "remembered"
    assert auth.user(basic("bob:tw")) is None
    assert auth.user(basic("carol:two")) is None
    for header in (None, "", "Basic", "Basic !!!", "Bearer abc", basic("no-colon"), "Basic " + "A" * 5000):
        assert auth.user(header) is None, header
    with pytest.raises(RegistryConfigError, match="user 'a:b'"):
        set_user(path, "a:b", hash_password("x", iterations=1000))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alice\n", ":1: expected user:hash"),
        ("alice:md5$abc\n", ":1: expected pbkdf2-sha256"),
        ("alice:pbkdf2-sha256$0$AAAAAAAAAAA=$" + "A" * 44 + "\n", ":1: iterations"),
        ("alice:pbkdf2-sha256$10$!!$" + "A" * 44 + "\n", ":1: salt and key must be base64"),
        ("# only a comment\n\n", "lists no user"),
    ],
)
def test_a_wrong_users_file_names_its_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "users"
    path.write_text(text)
    with pytest.raises(RegistryConfigError, match=message.replace("$", r"\$")):
        read_users(path)
    with pytest.raises(RegistryConfigError, match="cannot read"):
        read_users(tmp_path / "missing")


def test_a_user_given_twice_is_refused(tmp_path: Path) -> None:
    line = f"alice:{hash_password('x', iterations=1000)}\n"
    path = tmp_path / "users"
    path.write_text(line + line)
    with pytest.raises(RegistryConfigError, match=":2: user 'alice' given twice"):
        read_users(path)
    assert PasswordHash.of(line.split(":", 1)[1]).matches("x")


def test_a_header_that_is_not_ascii_logs_no_one_in() -> None:
    auth = BasicAuth({"alice": hash_password("secret", iterations=1000)})
    for header in ("Basic é", "Basic YWxpY2U6c2VjcmV0é", "Basic \u0100"):
        assert auth.user(header) is None, header


def test_an_unknown_user_costs_what_the_costliest_known_one_does() -> None:
    auth = BasicAuth({"a": hash_password("x", iterations=1000), "b": hash_password("y", iterations=3000)})
    assert auth._dummy.iterations == 3000


def test_the_users_file_is_written_through_a_fresh_private_file(tmp_path: Path) -> None:
    """No predictable temporary name: a symlink planted at the old one is never followed, a leftover
    file never reused (nor its mode kept), and nothing is left beside the file."""
    path = tmp_path / "users"
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    (tmp_path / ".users.tmp").symlink_to(victim)
    old_umask = os.umask(0)
    try:
        assert set_user(path, "alice", hash_password("one", iterations=1000)) is False
    finally:
        os.umask(old_umask)
    assert victim.read_text() == "untouched\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert not path.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".users.tmp", "users", "victim"]
    path.chmod(0o644)  # a file made readable by hand is private again once rewritten
    assert set_user(path, "alice", hash_password("two", iterations=1000)) is True
    assert path.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [".users.tmp", "users", "victim"]


def test_a_hash_costlier_than_the_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "users"
    costly = str(hash_password("x", iterations=1000)).replace("$1000$", "$2000000$")
    path.write_text(f"alice:{costly}\n")
    with pytest.raises(RegistryConfigError, match="iterations must be 1 to 1000000"):
        read_users(path)


def test_wrong_passwords_cost_a_pbkdf2_run_once_and_within_a_budget() -> None:
    auth = BasicAuth({"alice": hash_password("secret", iterations=1000)}, LoginLimits(1000, 2000, burst_s=2.0))

    def header(credentials: str) -> str:
        return "Basic " + base64.b64encode(credentials.encode()).decode()

    assert auth.user(header("alice:secret"), "a") == "alice"
    assert auth.user(header("alice:one"), "a") is None
    with pytest.raises(LoginThrottled):  # the client's budget: 2 runs of 1000 iterations
        auth.user(header("alice:two"), "a")
    for _ in range(100):
        assert auth.user(header("alice:one"), "a") is None, "a wrong password seen already costs no run"
    assert auth.user(header("alice:secret"), "a") == "alice", "nor does the right one"
    assert auth.user(header("bob:x"), "b") is None, "another address has a budget of its own"
    assert auth.user(header("bob:y"), "b") is None
    with pytest.raises(LoginThrottled):  # the registry's budget (4000) is spent too
        auth.user(header("alice:four"), "c")
