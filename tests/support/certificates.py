"""Certificates for the TLS tests: a certificate authority, a broker's certificate and clients'.

Made with the ``cryptography`` package (no process: the unit tier may use it), EC P-256 keys for
speed, PEM files in a directory: what an operator makes with openssl (docs/security.md), and what
every client here reads (Python's ssl, librdkafka, Kafka 4.x's Java clients with PEM stores).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Subject = list[tuple[x509.ObjectIdentifier, str]]
"""A certificate's subject: (attribute, value) pairs in the certificate's order."""


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM files."""

    certificate: Path
    key: Path


@dataclass(frozen=True)
class Authority:
    """A certificate authority that issues certificates into ``directory``."""

    name: str
    directory: Path
    _key: ec.EllipticCurvePrivateKey
    _certificate: x509.Certificate

    @property
    def certificate(self) -> Path:
        return self.directory / f"{self.name}-ca.pem"

    def issue(
        self,
        file_name: str,
        subject: Subject,
        *,
        server: bool = False,
        expired: bool = False,
        key_password: str | None = None,
    ) -> Issued:
        """A certificate for ``subject`` (a server's names 127.0.0.1 and localhost); ``expired``:
        valid until yesterday."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        not_after = now - datetime.timedelta(days=1) if expired else now + datetime.timedelta(days=30)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(oid, value) for oid, value in subject]))
            .issuer_name(self._certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=2))
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if server:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        issued = Issued(self.directory / f"{file_name}.pem", self.directory / f"{file_name}.key")
        issued.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(key_password.encode())
            if key_password
            else serialization.NoEncryption()
        )
        issued.key.write_bytes(
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        )
        issued.key.chmod(0o600)
        return issued


def authority(directory: Path, name: str = "test") -> Authority:
    """A new self-signed certificate authority, its certificate written to ``<name>-ca.pem``."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=2))
        .not_valid_after(now + datetime.timedelta(days=60))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    made = Authority(name, directory, key, certificate)
    made.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return made


def person(
    common_name: str, unit: str = "data", organization: str = "Example"
) -> list[tuple[x509.ObjectIdentifier, str]]:
    """A subject as a certificate lists it (country-most first): O, OU, CN."""
    return [
        (NameOID.ORGANIZATION_NAME, organization),
        (NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
        (NameOID.COMMON_NAME, common_name),
    ]


def pkcs12_keystore(issued: Issued, path: Path, password: str) -> Path:
    """``issued``'s key and certificate as a PKCS12 keystore (what a JVM broker reads)."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    key = serialization.load_pem_private_key(issued.key.read_bytes(), None)
    certificate = x509.load_pem_x509_certificate(issued.certificate.read_bytes())
    encryption = serialization.BestAvailableEncryption(password.encode())
    path.write_bytes(pkcs12.serialize_key_and_certificates(b"broker", key, certificate, None, encryption))  # type: ignore[arg-type]
    return path
