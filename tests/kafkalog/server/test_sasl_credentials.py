"""SCRAM credentials and the server's side of SASL logins (kafkalog.server.security.credentials and .scram):
RFC 7677's own exchange byte for byte, a client's both mechanisms, wrong passwords and unknown users
answered alike, malformed messages refused with a reason, and the users file."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import stat
import statistics
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog.cli import main
from kafkalog.server.security.credentials import CredentialError, UsersFile, derive, salted_password
from kafkalog.server.security.scram import SaslAuthenticationError, ScramServer, StandIns, plain_login
from kafkalog.server.security.session import Authenticator

SECRET = b"broker secret"
NO_USERS = StandIns(SECRET, lambda mechanism: [])


def test_rfc7677_scram_sha_256_exchange_byte_for_byte() -> None:
    credential = derive("SCRAM-SHA-256", "pencil", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    server = ScramServer(
        "SCRAM-SHA-256", lambda user, mechanism: credential if user == "user" else None, NO_USERS,
        nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )  # fmt: skip
    first = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first.reply == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert first.user is None
    final = server.step(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == type(final)(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", user="user")
    with pytest.raises(SaslAuthenticationError, match="over"):
        server.step(b"c=biws")


def _client(mechanism: str, user: str, password: str, server: ScramServer) -> str | None:
    """A SCRAM client as RFC 5802 describes it: the user the server authenticated (the server's
    signature checked), or SaslAuthenticationError from the server."""
    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r=clientnonce123"
    server_first = server.step(f"n,,{bare}".encode()).reply.decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = salted_password(mechanism, password, base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.digest(salted, b"Client Key", name)
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(hashlib.new(name, client_key).digest(), auth, name)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    final = server.step(f"{without_proof},p={proof}".encode())
    server_key = hmac.digest(salted, b"Server Key", name)
    assert final.reply.decode() == "v=" + base64.b64encode(hmac.digest(server_key, auth, name)).decode()
    return final.user


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_client_logs_in_and_a_wrong_password_or_unknown_user_is_refused_alike(tmp_path: Path, mechanism: str) -> None:
    users = UsersFile(tmp_path / "users.json")
    users.set_password("alice,=x", "s3cret", [mechanism])
    assert (
        _client(
            mechanism,
            "alice,=x",
            "s3cret",
            ScramServer(mechanism, users.credential, StandIns(SECRET, users.iteration_counts)),
        )
        == "alice,=x"
    )
    refusals = []
    for user, password in (("alice,=x", "wrong"), ("mallory", "s3cret")):
        with pytest.raises(SaslAuthenticationError) as refused:
            _client(
                mechanism,
                user,
                password,
                ScramServer(mechanism, users.credential, StandIns(SECRET, users.iteration_counts)),
            )
        refusals.append(str(refused.value).replace(repr(user), "USER"))
        assert "s3cret" not in str(refused.value) and "wrong" not in str(refused.value)
    assert refusals[0] == refusals[1] == f"{mechanism}: authentication failed for user USER"
    # an unknown user's salt is the same on every try: a fresh one would tell it does not exist
    salts = {
        ScramServer(mechanism, users.credential, StandIns(SECRET, users.iteration_counts))
        .step(b"n,,n=mallory,r=abc")
        .reply.split(b",")[1]
    }
    salts.add(
        ScramServer(mechanism, users.credential, StandIns(SECRET, users.iteration_counts))
        .step(b"n,,n=mallory,r=abc")
        .reply.split(b",")[1]
    )
    assert len(salts) == 1


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"x" * 5000, "over 4096"),
        (b"\xff\xfe", "not UTF-8"),
        (b"n=user,r=abc", "gs2 header"),
        (b"p=tls-unique,,n=user,r=abc", "gs2 header"),
        (b"n,a=admin,n=user,r=abc", "authorization identity"),
        (b"n,,n=user", "nonce"),
        (b"n,,n=us=41er,r=abc", "escape"),
        (b"n,,r=abc", "names no user"),
        (b"n,,n=user,r=abc,m=ext", "mandatory extensions"),
        (b"n,,n=user,n=again,r=abc", "malformed attribute"),
    ],
)
def test_malformed_first_messages_are_refused_with_the_reason(message: bytes, reason: str) -> None:
    with pytest.raises(SaslAuthenticationError, match=reason):
        ScramServer("SCRAM-SHA-256", lambda user, mechanism: None, NO_USERS).step(message)


def test_a_final_message_must_carry_the_first_messages_binding_and_nonce(tmp_path: Path) -> None:
    users = UsersFile(tmp_path / "users.json")
    users.set_password("bob", "pw", ["SCRAM-SHA-256"])
    for final, reason in (
        (b"c=eSws,r={nonce},p=AAAA", "channel binding"),
        (b"c=biws,r=other,p=AAAA", "nonce"),
        (b"c=biws,r={nonce},p=@@@", "not base64"),
        (b"c=biws,r={nonce},p=AAAA", "authentication failed"),
    ):
        server = ScramServer("SCRAM-SHA-256", users.credential, StandIns(SECRET, users.iteration_counts))
        nonce = server.step(b"n,,n=bob,r=abc").reply.decode().split(",")[0][2:]
        with pytest.raises(SaslAuthenticationError, match=reason):
            server.step(final.replace(b"{nonce}", nonce.encode()))


def test_plain_logins_are_checked_against_the_salted_credential(tmp_path: Path) -> None:
    users = UsersFile(tmp_path / "users.json")
    users.set_password("carol", "hunter2", ["SCRAM-SHA-256"])
    assert plain_login(b"\0carol\0hunter2", users.credential, StandIns(SECRET, users.iteration_counts)).user == "carol"
    assert (
        plain_login(b"carol\0carol\0hunter2", users.credential, StandIns(SECRET, users.iteration_counts)).user
        == "carol"
    )
    for message, reason in (
        (b"\0carol\0hunter3", "authentication failed for user 'carol'"),
        (b"\0nobody\0hunter2", "authentication failed for user 'nobody'"),
        (b"admin\0carol\0hunter2", "may not act as 'admin'"),
        (b"carol\0hunter2", "expected authzid NUL user NUL password"),
        (b"\0carol\0", "must not be empty"),
    ):
        with pytest.raises(SaslAuthenticationError, match=reason) as refused:
            plain_login(message, users.credential, StandIns(SECRET, users.iteration_counts))
        assert "hunter" not in str(refused.value)


def test_the_users_file_holds_no_password_and_is_read_back_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "users.json"
    users = UsersFile(path)
    users.set_password("dave", "correct horse", ["SCRAM-SHA-256", "SCRAM-SHA-512"], iterations=8192)
    users.set_password("erin", "battery staple", ["SCRAM-SHA-512"])
    text = path.read_text()
    assert "correct horse" not in text and "battery staple" not in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = UsersFile(path)
    assert again.users() == {"dave": ["SCRAM-SHA-256", "SCRAM-SHA-512"], "erin": ["SCRAM-SHA-512"]}
    dave = again.credential("dave", "SCRAM-SHA-512")
    assert dave is not None and dave.iterations == 8192 and dave.matches_password("correct horse")
    assert not dave.matches_password("correct horse ")
    # a new password gets a new salt
    before = again.credential("erin", "SCRAM-SHA-512")
    again.set_password("erin", "battery staple", ["SCRAM-SHA-512"])
    after = again.credential("erin", "SCRAM-SHA-512")
    assert before is not None and after is not None and before.salt != after.salt
    assert again.remove("dave") and not again.remove("dave")
    assert UsersFile(path).users() == {"erin": ["SCRAM-SHA-512"]}
    assert UsersFile(tmp_path / "absent.json").users() == {}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda d: d["users"]["u"].update({"SCRAM-SHA-1": d["users"]["u"]["SCRAM-SHA-256"]}),
            "unknown SCRAM mechanism",
        ),
        (lambda d: d["users"]["u"]["SCRAM-SHA-256"].update(iterations=100), "outside 4096..16384"),
        (lambda d: d["users"]["u"]["SCRAM-SHA-256"].update(iterations="4096"), "whole number"),
        (lambda d: d["users"]["u"]["SCRAM-SHA-256"].update(stored_key="!!"), "base64"),
        (lambda d: d["users"]["u"]["SCRAM-SHA-256"].update(stored_key="AAAA"), "keys of 32 bytes"),
        (lambda d: d["users"]["u"]["SCRAM-SHA-256"].pop("salt"), "salt, stored_key"),
        (lambda d: d.update(format=2), "not a users file of format 1"),
    ],
)
def test_a_damaged_users_file_is_refused_naming_the_file_and_user(tmp_path: Path, change: object, reason: str) -> None:
    path = tmp_path / "users.json"
    UsersFile(path).set_password("u", "pw", ["SCRAM-SHA-256"])
    document = json.loads(path.read_text())
    change(document)  # type: ignore[operator]
    path.write_text(json.dumps(document))
    with pytest.raises(CredentialError, match=reason) as refused:
        UsersFile(path)
    assert str(path) in str(refused.value)


def test_bad_names_passwords_and_iterations_are_refused(tmp_path: Path) -> None:
    users = UsersFile(tmp_path / "users.json")
    for user, password, iterations, reason in (
        ("", "pw", 4096, "user name"),
        ("a\nb", "pw", 4096, "user name"),
        ("u", "", 4096, "must not be empty"),
        ("u", "pw", 1000, "outside 4096..16384"),
    ):
        with pytest.raises(CredentialError, match=reason):
            users.set_password(user, password, ["SCRAM-SHA-256"], iterations=iterations)
    with pytest.raises(CredentialError, match="at least one"):
        users.set_password("u", "pw", [])
    assert users.users() == {}


def test_kafkalog_users_adds_lists_and_removes_without_a_password_in_sight(tmp_path: Path) -> None:
    path = tmp_path / "users.json"

    def run(*args: str, stdin: str | None = None) -> tuple[int, str]:
        done = CliRunner().invoke(main, ["users", *args, "--file", str(path)], input=stdin, prog_name="kafkalog")
        return done.exit_code, done.output

    assert run("add", "alice", "--password-stdin", stdin="open sesame\n") == (
        0, f"added alice in {path} (2 credentials: SCRAM-SHA-256, SCRAM-SHA-512)\n"
    )  # fmt: skip
    code, said = run("add", "bob", "--mechanism", "SCRAM-SHA-512", stdin="pw1\npw1\n")  # the prompt, twice
    assert code == 0 and said.endswith(f"added bob in {path} (1 credential: SCRAM-SHA-512)\n") and "pw1" not in said
    assert run("add", "alice", "--password-stdin", stdin="new one\n")[1].startswith("new password for alice")
    assert run("list") == (0, "alice\tSCRAM-SHA-256,SCRAM-SHA-512\nbob\tSCRAM-SHA-512\n")
    credential = UsersFile(path).credential("alice", "SCRAM-SHA-256")
    assert credential is not None and credential.matches_password("new one")
    assert "open sesame" not in path.read_text() and "new one" not in path.read_text()
    assert run("remove", "bob") == (0, f"removed bob from {path}\n")
    assert run("remove", "bob") == (1, f"error: no user 'bob' in {path}\n")
    assert run("add", "carol", "--password-stdin", stdin="\n") == (1, "error: a password must not be empty\n")
    path.write_text("{not json")
    code, said = run("list")
    assert code == 1 and said.startswith(f"error: {path}: not JSON")


def _shape(first_answer: bytes, client_nonce: str) -> tuple[int, int, str]:
    """(length of the server's nonce part, salt bytes, iterations) of a server-first message."""
    fields = dict(part.split("=", 1) for part in first_answer.decode().split(","))
    assert fields["r"].startswith(client_nonce)
    return len(fields["r"]) - len(client_nonce), len(base64.b64decode(fields["s"])), fields["i"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_an_unknown_users_first_answer_is_shaped_like_a_real_users(tmp_path: Path, mechanism: str) -> None:
    """The documented ``--iterations 8192`` user: the stand-in offers its count and a salt of its
    length (SCRAM-SHA-512's used to be 64 bytes and always 4096), the same on every try."""
    users = UsersFile(tmp_path / "users.json")
    users.set_password("bob", "pw", [mechanism], iterations=8192)
    stand_ins = StandIns(SECRET, users.iteration_counts)
    real = ScramServer(mechanism, users.credential, stand_ins).step(b"n,,n=bob,r=abc").reply
    made_up = ScramServer(mechanism, users.credential, stand_ins).step(b"n,,n=mallory,r=abc").reply
    assert _shape(made_up, "abc") == _shape(real, "abc") == (32, 32, "8192")
    again = ScramServer(mechanism, users.credential, stand_ins).step(b"n,,n=mallory,r=xyz").reply
    assert made_up.split(b",")[1:] == again.split(b",")[1:]  # salt and count: the same for the name
    # with users of several counts, each unknown name gets one of theirs, and keeps it
    users.set_password("carol", "pw", [mechanism], iterations=12000)
    counts = {
        _shape(ScramServer(mechanism, users.credential, stand_ins).step(f"n,,n=u{i},r=a".encode()).reply, "a")[2]
        for i in range(40)
    }
    assert counts == {"8192", "12000"}


def test_a_refused_plain_login_takes_as_long_for_an_unknown_user_as_for_a_wrong_password(tmp_path: Path) -> None:
    """The PBKDF2 derivations run for every login (before, an unknown user was refused in a tenth
    of the time), whichever mechanisms the user has: carol both, dave SCRAM-SHA-256 only."""
    users = UsersFile(tmp_path / "users.json")
    users.set_password("carol", "hunter2", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
    users.set_password("dave", "hunter2", ["SCRAM-SHA-256"])
    stand_ins = StandIns(SECRET, users.iteration_counts)
    assert plain_login(b"\0dave\0hunter2", users.credential, stand_ins).user == "dave"
    timings: dict[bytes, list[float]] = {b"\0carol\0wrong": [], b"\0dave\0wrong": [], b"\0nobody\0wrong": []}
    for _ in range(15):
        for message, times in timings.items():
            started = time.perf_counter()
            with pytest.raises(SaslAuthenticationError):
                plain_login(message, users.credential, stand_ins)
            times.append(time.perf_counter() - started)
    carol, dave, unknown = (statistics.median(times) for times in timings.values())
    assert 0.67 < unknown / carol < 1.5 and 0.67 < unknown / dave < 1.5, (carol, dave, unknown)


def test_an_unknown_users_first_answer_is_as_quick_with_many_users(tmp_path: Path) -> None:
    """The stand-in's iteration count comes from counts worked out when the file is read: with
    20,000 users an unknown name is answered in microseconds, as a known one (it took 0.8 ms)."""
    key = base64.b64encode(bytes(64)).decode()  # keys of a SHA-512's size; nobody logs in as these users
    credential = {
        "salt": base64.b64encode(bytes(32)).decode(),
        "stored_key": key,
        "server_key": key,
        "iterations": 4096,
    }
    document = {"format": 1, "users": {f"user{i}": {"SCRAM-SHA-512": credential} for i in range(20_000)}}
    (tmp_path / "users.json").write_text(json.dumps(document))
    users = UsersFile(tmp_path / "users.json")
    stand_ins = StandIns(SECRET, users.iteration_counts)
    timings: dict[str, list[float]] = {"user7": [], "mallory": []}
    for _ in range(200):
        for user, times in timings.items():
            server = ScramServer("SCRAM-SHA-512", users.credential, stand_ins)
            started = time.perf_counter()
            server.step(f"n,,n={user},r=abc".encode())
            times.append(time.perf_counter() - started)
    known, unknown = (statistics.median(times) for times in timings.values())
    assert unknown - known < 50e-6, (known, unknown)


def test_a_names_stand_in_is_the_same_after_a_restart(tmp_path: Path) -> None:
    """The secret behind the stand-ins is kept beside the users file: a restarted broker (or a
    second one sharing the file) offers the same made-up salt, as it does a real user's."""
    users = UsersFile(tmp_path / "users.json")
    users.set_password("bob", "pw", ["SCRAM-SHA-512"])
    answers = []
    for _ in range(2):  # two brokers' lifetimes
        authenticator = Authenticator(UsersFile(tmp_path / "users.json"), ("SCRAM-SHA-512",))
        try:
            answers.append(authenticator.exchange("SCRAM-SHA-512").step(b"n,,n=mallory,r=abc").reply.split(b",")[1:])
        finally:
            authenticator.close()
    assert answers[0] == answers[1]
    secret = tmp_path / "users.json.stand-ins"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and len(secret.read_bytes()) == 32
