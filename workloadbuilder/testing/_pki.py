"""A throw-away PKI for the local control plane, made with the ``cryptography`` package.

One CA signs the API server's serving certificate (127.0.0.1 / localhost) and every client
certificate (CN = user name, O = groups, the way kube-apiserver maps x509 identities). A
separate RSA key pair signs and verifies service-account tokens.
"""

from __future__ import annotations

import datetime
import ipaddress
import warnings
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertPair", "Pki"]

_VALIDITY = datetime.timedelta(days=30)


@attrs.frozen(kw_only=True)
class CertPair:
    """PEM file paths of one certificate and its private key."""

    cert: Path
    key: Path


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, *, private: bool = False) -> Path:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


class Pki:
    """Creates the CA on construction and issues certificates into ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "workloadbuilder-harness-ca")])
        self._ca_name = name
        self._ca_cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca_cert = _write(
            directory / "ca.crt", self._ca_cert.public_bytes(serialization.Encoding.PEM)
        )
        self.ca_key = _write(directory / "ca.key", _key_pem(self._ca_key), private=True)
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.sa_key = _write(directory / "sa.key", _key_pem(sa_key), private=True)
        self.sa_pub = _write(
            directory / "sa.pub",
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        )

    def _issue(
        self,
        stem: str,
        subject: x509.Name,
        *,
        server: bool,
    ) -> CertPair:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.DNSName("localhost"),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self._ca_key, hashes.SHA256())
        return CertPair(
            cert=_write(
                self.directory / f"{stem}.crt", cert.public_bytes(serialization.Encoding.PEM)
            ),
            key=_write(self.directory / f"{stem}.key", _key_pem(key), private=True),
        )

    def serving(self, stem: str = "apiserver") -> CertPair:
        """A serving certificate for 127.0.0.1 and localhost."""
        return self._issue(
            stem, x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, stem)]), server=True
        )

    def client(
        self, user: str, groups: tuple[str, ...] = (), *, stem: str | None = None
    ) -> CertPair:
        """A client certificate that authenticates as ``user`` in ``groups``."""
        # RFC 5280 caps CN/O at 64 characters, but Kubernetes identities are longer
        # (system:serviceaccount:<namespace>:<name>) and the API server reads them anyway.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "length must be <= 64"
            attributes = [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, g, _validate=False) for g in groups
            ]
            attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user, _validate=False))
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        return self._issue(stem or f"client-{safe}", x509.Name(attributes), server=False)
