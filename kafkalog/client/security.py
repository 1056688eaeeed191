"""How kafkalog's clients reach a secured broker: TLS, and a SASL login, as Kafka's clients do.

Role: one frozen value, given to any client (Producer, SimpleConsumer, GroupConsumer, Admin, the
mirror-maker's and the loader's), that kafkalog.client.connection applies on every connection:
wrap the socket in TLS (checking the broker's certificate and name), then log in with PLAIN or
SCRAM before the first request. Works against kafkalog brokers and Kafka's alike.

Invariants: a password is never in a ``repr``, a log line or an error (``ClientSecurity`` hides
it); TLS checks the broker's certificate against ``ca_file`` (or the system's authorities) and its
name, unless ``check_hostname`` is turned off for a broker reached by another name.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kafkalog.errors import ClientError
from kafkalog.sasl import MECHANISMS

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """TLS and SASL settings of a client (PLAINTEXT, the default, uses neither)."""

    protocol: Protocol = "PLAINTEXT"
    """PLAINTEXT, SSL (TLS), SASL_PLAINTEXT (a login, no TLS) or SASL_SSL (both)."""
    mechanism: str = "SCRAM-SHA-512"
    """The SASL mechanism: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN (over TLS only, please)."""
    username: str | None = None
    """The SASL user."""
    password: str | None = field(default=None, repr=False)
    """Its password: in a file, only as ``${env:NAME}`` (the loader refuses it written out)."""
    ca_file: Path | None = None
    """The authorities the broker's certificate must come from (None: the system's)."""
    certificate: Path | None = None
    """A client certificate (PEM), for a broker that asks for one (mTLS)."""
    key: Path | None = None
    """The client certificate's key (PEM)."""
    key_password: str | None = field(default=None, repr=False)
    """The key's password, if it is encrypted (``${env:NAME}`` in a file)."""
    check_hostname: bool = True
    """Check that the broker's certificate names the host connected to (turn off only for a broker
    reached by an address its certificate does not list)."""

    def __post_init__(self) -> None:
        if self.protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ClientError(f"security protocol {self.protocol!r}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
        if self.uses_sasl:
            if self.mechanism not in MECHANISMS:
                raise ClientError(f"SASL mechanism {self.mechanism!r}: one of {', '.join(MECHANISMS)}")
            if not self.username or not self.password:
                raise ClientError(
                    f"{self.protocol} needs a username and a password (the password from the environment)"
                )
        if (self.certificate is None) != (self.key is None):
            raise ClientError("a client certificate and its key go together")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def tls_context(self) -> ssl.SSLContext:
        """The context every TLS connection is wrapped in; ClientError naming the file that fails."""
        try:
            context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.check_hostname = self.check_hostname
            if self.certificate is not None:
                context.load_cert_chain(self.certificate, self.key, password=self.key_password)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise ClientError(f"TLS settings cannot be used ({self.ca_file}, {self.certificate}): {exc}") from None
        return context


PLAINTEXT = ClientSecurity()
