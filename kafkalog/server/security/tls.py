"""TLS for SSL and SASL_SSL listeners: the server's context, and the principal a client certificate names.

Role: build one ``ssl.SSLContext`` from the broker's TlsSettings, checked at start (a certificate
that does not load, a key that does not match it, or an unreadable client CA stops the broker with
the file named, not the first client); and turn a verified client certificate's subject into
Kafka's principal, ``User:CN=alice,OU=data,O=Example`` (RFC 2253 order, most specific first, as
Kafka's default principal builder writes it).

Invariants: TLS 1.2 at least (1.3 when configured); no compression, no renegotiation (OpenSSL's
defaults in ``ssl.create_default_context``); a key password is never written to a log or an error.
"""

from __future__ import annotations

import ssl
from typing import Any

from kafkalog.server.config import BrokerConfigError, TlsSettings

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_SHORT_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context every TLS listener wraps its connections in; BrokerConfigError naming the file."""
    if settings.certificate is None or settings.key is None:
        raise BrokerConfigError("tls.certificate: an SSL or SASL_SSL listener needs a certificate and its key")
    for key, path in (("certificate", settings.certificate), ("key", settings.key), ("client_ca", settings.client_ca)):
        if path is not None and not path.is_file():
            raise BrokerConfigError(f"tls.{key}: {path} does not exist or is not a file")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = _VERSIONS[settings.min_version]
    try:
        context.load_cert_chain(settings.certificate, settings.key, password=settings.key_password)
    except ssl.SSLError as exc:
        # the reason (e.g. KEY_VALUES_MISMATCH, bad decrypt), never the password
        raise BrokerConfigError(
            f"tls.certificate: {settings.certificate} with key {settings.key} cannot be used: {exc.reason or exc}"
        ) from None
    except OSError as exc:
        raise BrokerConfigError(f"tls.certificate: {settings.certificate} or its key cannot be read: {exc}") from None
    if settings.client_ca is not None:
        try:
            context.load_verify_locations(cafile=settings.client_ca)
        except OSError as exc:  # ssl.SSLError too
            raise BrokerConfigError(f"tls.client_ca: {settings.client_ca} cannot be read: {exc}") from None
    context.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[settings.client_auth]
    return context


def principal_of(certificate: dict[str, Any] | None) -> str | None:
    """``User:<subject>`` of a verified client certificate (``SSLSocket.getpeercert()``), None
    without one."""
    if not certificate or not certificate.get("subject"):
        return None
    parts = [
        "+".join(f"{_SHORT_NAMES.get(key, key)}={_escape(value)}" for key, value in rdn)
        for rdn in reversed(certificate["subject"])
    ]
    return "User:" + ",".join(parts)


def _escape(value: str) -> str:
    """RFC 2253's escapes: the special characters, and a leading '#' or space or a trailing space."""
    out = "".join(f"\\{c}" if c in ',+"\\<>;' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
