"""Listeners as Kafka writes them, the broker's security settings, and a connection's login
(kafkalog.server.listeners, .config, .security.tls, .security.session; kafkalog.sasl's client side).

Unit tier: no socket. The session's checker thread runs for real: these tests wait on its answers.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.protocol import ApiKey, ErrorCode
from kafkalog.sasl import SaslLoginError, ScramClient, plain_message
from kafkalog.server.config import BrokerAddress, BrokerConfig, BrokerConfigError, SaslSettings, TlsSettings
from kafkalog.server.deferred import DeferredResponse
from kafkalog.server.listeners import SecurityProtocol
from kafkalog.server.security.credentials import UsersFile
from kafkalog.server.security.session import Authenticator, Session, State
from kafkalog.server.security.tls import principal_of, server_context
from tests.support.certificates import authority, person

pytestmark = pytest.mark.unit

# ------------------------------------------------------------------ listeners


def test_listeners_parse_with_names_protocols_and_advertised_addresses(tmp_path: Path) -> None:
    config = BrokerConfig(
        listeners=("PLAINTEXT://127.0.0.1:9092", "internal://10.0.0.5:9094", "SASL_SSL://0.0.0.0:9093"),
        advertised_listeners=("SASL_SSL://broker1.example.com:19093",),
        listener_security_protocol_map={"INTERNAL": "sasl_plaintext"},
        sasl=SaslSettings(users_file=tmp_path / "users.json"),
        tls=TlsSettings(certificate=tmp_path / "c.pem", key=tmp_path / "k.pem"),
    )
    plain, internal, public = config.listener_specs
    assert (plain.name, plain.security_protocol, plain.endpoint) == (
        "PLAINTEXT", SecurityProtocol.PLAINTEXT, "PLAINTEXT://127.0.0.1:9092",
    )  # fmt: skip
    assert (internal.name, internal.security_protocol) == ("INTERNAL", SecurityProtocol.SASL_PLAINTEXT)
    assert (public.host, public.port, public.endpoint) == ("0.0.0.0", 9093, "SASL_SSL://broker1.example.com:19093")
    assert public.security_protocol.uses_tls and public.security_protocol.uses_sasl
    (me,) = config.brokers  # a client is told the address of the listener it came in on
    assert me.address("SASL_SSL") == ("broker1.example.com", 19093)
    assert me.address("INTERNAL") == ("10.0.0.5", 9094)
    assert me.address("SSL") is None


def test_without_listeners_host_and_port_are_one_plaintext_listener_reached_from_any() -> None:
    config = BrokerConfig(host="127.0.0.1", port=9092, advertised_host="kafka.local")
    (only,) = config.listener_specs
    assert (only.name, only.host, only.endpoint) == ("PLAINTEXT", "127.0.0.1", "PLAINTEXT://kafka.local:9092")
    (me,) = config.brokers
    assert me.address("PLAINTEXT") == me.address("ANYTHING") == ("kafka.local", 9092)
    assert BrokerAddress(1, "h", 1, ("SSL://h:2",)).address("SSL") == ("h", 2)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": ("PLAINTEXT:/127.0.0.1:9092",)}, "is not NAME://host:port"),
        ({"listeners": ("PLAINTEXT://127.0.0.1:99999",)}, "port 99999 is not a TCP port"),
        ({"listeners": ("CLIENTS://127.0.0.1:9092",)}, "CLIENTS is neither a security protocol"),
        ({"listeners": ("PLAINTEXT://127.0.0.1:1", "PLAINTEXT://127.0.0.1:2")}, "a second listener named PLAINTEXT"),
        ({"listeners": ("PLAINTEXT://127.0.0.1:1", "X://127.0.0.1:1"), "listener_security_protocol_map": {"X": "SSL"}},
         "127.0.0.1:1 is taken"),
        ({"listeners": ("PLAINTEXT://0.0.0.0:1",)}, "give advertised_listeners a PLAINTEXT://host:port"),
        ({"listeners": ("PLAINTEXT://h:1",), "advertised_listeners": ("SSL://h:1",)}, "no listener is named SSL"),
        ({"listeners": ("PLAINTEXT://h:1",), "advertised_listeners": ("PLAINTEXT://0.0.0.0:1",)}, "not an address"),
        ({"listeners": ("PLAINTEXT://h:1",), "listener_security_protocol_map": {"A": "TLS"}}, "'TLS' is not one of"),
        ({"advertised_listeners": ("PLAINTEXT://h:1",)}, "given without listeners"),
        ({"listeners": ("SASL_PLAINTEXT://h:1",)}, "sasl.users_file: a SASL listener needs the users file"),
        ({"listeners": ("SSL://h:1",)}, "tls.certificate: an SSL or SASL_SSL listener needs a certificate"),
    ],
)  # fmt: skip
def test_listener_mistakes_are_refused_naming_the_setting(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(BrokerConfigError, match=message):
        BrokerConfig(**settings)


def test_security_settings_are_checked_once() -> None:
    with pytest.raises(BrokerConfigError, match="mechanisms: one or more of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"):
        SaslSettings(mechanisms=("GSSAPI",))
    with pytest.raises(BrokerConfigError, match="each once"):
        SaslSettings(mechanisms=("PLAIN", "PLAIN"))
    with pytest.raises(BrokerConfigError, match="handshake_timeout_ms"):
        SaslSettings(handshake_timeout_ms=10)
    with pytest.raises(BrokerConfigError, match="a certificate and its key go together"):
        TlsSettings(certificate=Path("c.pem"))
    with pytest.raises(BrokerConfigError, match="client_auth: required needs client_ca"):
        TlsSettings(certificate=Path("c"), key=Path("k"), client_auth="required")


# ------------------------------------------------------------------ TLS


def test_the_tls_context_is_checked_at_start_naming_the_file(tmp_path: Path) -> None:
    ca = authority(tmp_path)
    broker = ca.issue("broker", person("broker"), server=True, key_password="key-secret-1")
    other = ca.issue("other", person("other"), server=True)
    good = server_context(TlsSettings(certificate=broker.certificate, key=broker.key, key_password="key-secret-1",
                                      client_ca=ca.certificate, client_auth="required"))  # fmt: skip
    assert good.minimum_version == ssl.TLSVersion.TLSv1_2 and good.verify_mode == ssl.CERT_REQUIRED
    strict = server_context(TlsSettings(certificate=other.certificate, key=other.key, min_version="TLSv1.3"))
    assert strict.minimum_version == ssl.TLSVersion.TLSv1_3 and strict.verify_mode == ssl.CERT_NONE
    with pytest.raises(BrokerConfigError, match="cannot be used") as wrong_password:
        server_context(TlsSettings(certificate=broker.certificate, key=broker.key, key_password="nope-2"))
    assert "nope-2" not in str(wrong_password.value)
    with pytest.raises(BrokerConfigError, match=r"KEY_VALUES_MISMATCH|key values mismatch"):
        server_context(TlsSettings(certificate=other.certificate, key=broker.key, key_password="key-secret-1"))
    with pytest.raises(BrokerConfigError, match=r"tls.certificate: .*missing\.pem does not exist"):
        server_context(TlsSettings(certificate=tmp_path / "missing.pem", key=other.key))
    with pytest.raises(BrokerConfigError, match=r"tls\.client_ca: .* cannot be read"):
        server_context(TlsSettings(certificate=other.certificate, key=other.key, client_ca=other.key,
                                   client_auth="requested"))  # fmt: skip


def test_a_client_certificate_subject_is_the_principal_most_specific_first() -> None:
    subject = (
        (("organizationName", "Example, Inc"),),
        (("organizationalUnitName", "data"),),
        (("commonName", "alice"),),
    )
    assert principal_of({"subject": subject}) == "User:CN=alice,OU=data,O=Example\\, Inc"
    assert principal_of({"subject": ((("commonName", " lead+trail "),),)}) == "User:CN=\\ lead\\+trail\\ "
    assert principal_of(None) is None and principal_of({}) is None


# ------------------------------------------------------------------ sessions


@pytest.fixture
def authenticator(tmp_path: Path) -> Iterator[Authenticator]:
    users = UsersFile(tmp_path / "users.json")
    users.set_password("alice", "correct horse", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
    made = Authenticator(users, ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"))
    yield made
    made.close()


def _answer(deferred: DeferredResponse | None) -> dict[str, Any]:
    assert deferred is not None
    answered = threading.Event()
    deferred.on_complete(answered.set)
    assert answered.wait(5), "the checker never answered"
    assert deferred.body is not None
    return deferred.body


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_scram_login_admits_requests_only_once_done(authenticator: Authenticator, mechanism: str) -> None:
    session = Session(authenticator, deadline=100.0)
    assert session.admits(ApiKey.API_VERSIONS) is None
    refused = session.admits(ApiKey.METADATA)
    assert refused is not None and "METADATA before authenticating (waiting for SaslHandshake)" in refused.reason
    assert session.admits(ApiKey.SASL_AUTHENTICATE) is not None  # not before the handshake
    assert session.handshake(1, mechanism) == {
        "error_code": 0, "mechanisms": ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"],
    }  # fmt: skip
    client = ScramClient(mechanism, "alice", "correct horse")
    first = _answer(session.authenticate(client.first()))
    assert first["error_code"] == 0 and session.state is State.AUTHENTICATE and session.principal == "User:ANONYMOUS"
    final = _answer(session.authenticate(client.final(first["auth_bytes"])))
    assert final["error_code"] == 0
    client.verify(final["auth_bytes"])  # the server proved it holds the credential
    assert session.authenticated and session.principal == "User:alice"
    assert session.admits(ApiKey.METADATA) is None and not session.expired(1e9)
    assert (authenticator.successes, authenticator.failures) == (1, 0)


def test_wrong_passwords_unknown_users_and_bad_mechanisms_fail_without_the_secret(authenticator: Authenticator) -> None:
    for user, password in [("alice", "wrong horse"), ("mallory", "correct horse")]:
        session = Session(authenticator, deadline=100.0)
        session.handshake(1, "SCRAM-SHA-512")
        client = ScramClient("SCRAM-SHA-512", user, password)
        first = _answer(session.authenticate(client.first()))
        final = _answer(session.authenticate(client.final(first["auth_bytes"])))
        assert final["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert final["error_message"] == f"SCRAM-SHA-512: authentication failed for user {user!r}"
        assert session.state is State.FAILED and password not in str(session.failure)
    plain = Session(authenticator, deadline=100.0)
    plain.handshake(1, "PLAIN")
    refused = _answer(plain.authenticate(plain_message("alice", "hunter2")))
    assert refused["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED and "hunter2" not in str(refused)
    accepted = Session(authenticator, deadline=100.0)
    accepted.handshake(0, "PLAIN")  # v0: the token comes bare, not in SaslAuthenticate
    assert accepted.wants_raw_token
    assert _answer(accepted.authenticate(plain_message("alice", "correct horse")))["error_code"] == 0
    assert accepted.principal == "User:alice"
    odd = Session(authenticator, deadline=100.0)
    assert odd.handshake(1, "GSSAPI")["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert odd.state is State.FAILED and "asked for mechanism 'GSSAPI'" in str(odd.failure)
    again = Session(authenticator, deadline=100.0)
    again.handshake(1, "PLAIN")
    assert again.handshake(1, "PLAIN")["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
    assert authenticator.failures == 3


def test_a_session_on_a_listener_without_sasl_is_its_principal_from_the_start(authenticator: Authenticator) -> None:
    session = Session(None, principal="User:CN=alice", deadline=5.0)
    assert session.authenticated and session.admits(ApiKey.PRODUCE) is None and not session.expired(10.0)
    assert session.handshake(1, "PLAIN") == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": []}
    waiting = Session(authenticator, deadline=5.0)
    assert not waiting.expired(4.9) and waiting.expired(5.0)


def test_the_users_file_changed_while_running_is_read_at_the_next_login(
    authenticator: Authenticator, tmp_path: Path
) -> None:
    UsersFile(tmp_path / "users.json").set_password("bob", "bobs password", ["SCRAM-SHA-256"])
    session = Session(authenticator, deadline=100.0)
    session.handshake(1, "SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "bob", "bobs password")
    first = _answer(session.authenticate(client.first()))
    assert _answer(session.authenticate(client.final(first["auth_bytes"])))["error_code"] == 0
    assert session.principal == "User:bob"


def test_the_client_checks_the_server_signature() -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="abc")
    assert client.first() == b"n,,n=alice,r=abc"
    with pytest.raises(SaslLoginError, match="does not extend ours"):
        client.final(b"r=xyz,s=c2FsdA==,i=4096")
    with pytest.raises(SaslLoginError, match="salt or iteration count"):
        client.final(b"r=abcdef,s=c2FsdA==,i=12")
    client.final(b"r=abcdef,s=c2FsdA==,i=4096")
    with pytest.raises(SaslLoginError, match="does not verify"):
        client.verify(b"v=" + b"QUFBQQ==")
    with pytest.raises(SaslLoginError, match="the server refused: invalid-proof"):
        client.verify(b"e=invalid-proof")
    with pytest.raises(SaslLoginError, match="unknown SCRAM mechanism"):
        ScramClient("SCRAM-MD5", "a", "b")


def test_the_locked_down_example_loads_with_no_listener_open_to_strangers(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkalog.server.config import load_config

    monkeypatch.setenv("KAFKALOG_KEY_PASSWORD", "from-the-environment")
    config = load_config(Path(__file__).resolve().parents[3] / "conf" / "broker-secure.yaml")
    assert [(listener.name, listener.security_protocol) for listener in config.listener_specs] == [
        ("SASL_SSL", SecurityProtocol.SASL_SSL), ("LOCAL", SecurityProtocol.SASL_PLAINTEXT),
    ]  # fmt: skip
    assert "PLAIN" not in config.sasl.mechanisms and config.tls.key_password == "from-the-environment"
    assert config.brokers[0].address("SASL_SSL") == ("kafka1.example.com", 9093)
    assert config.authorization.deny_by_default and config.authorization.super_users == ("User:admin",)


def test_a_sasl_authenticate_without_a_handshake_is_refused_not_crashed(authenticator: Authenticator) -> None:
    for session in (Session(None, deadline=1.0), Session(authenticator, deadline=1.0)):
        if session.state is State.HANDSHAKE:  # on a SASL listener the network layer closes first ...
            assert session.admits(ApiKey.SASL_AUTHENTICATE) is not None
        answer = _answer(session.authenticate(b"n,,n=alice,r=x"))  # ... and the session refuses too
        assert answer["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert session.state is State.FAILED and "SaslAuthenticate while" in str(session.failure)
