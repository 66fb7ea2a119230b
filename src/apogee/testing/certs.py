"""Throw-away TLS certificates for tests (the ``cryptography`` package, a dev dependency).

Owns: ``make_certificate`` -- a self-signed certificate and its key as PEM
files, valid for a day for 127.0.0.1, ::1 and localhost. A self-signed
certificate is its own CA, so a client that must check the server trusts the
certificate file itself.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True, slots=True)
class CertFiles:
    cert: Path
    key: Path


def make_certificate(directory: Path, name: str = "server") -> CertFiles:
    """``<name>.pem`` and ``<name>.key`` under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"apogee-test-{name}")])
    now = dt.datetime.now(dt.UTC)
    names = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    files = CertFiles(directory / f"{name}.pem", directory / f"{name}.key")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    files.key.chmod(0o600)
    return files
