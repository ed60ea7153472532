"""A development certificate authority and certificates for a local TLS broker.

``ensure(folder)`` writes, once (later calls reuse what is there):

* ``ca.pem``: the CA certificate a client trusts (``ssl.truststore.location``,
  librdkafka's ``ssl.ca.location``, kafka-python's ``ssl_cafile``);
* ``broker.pem``: the broker's private key and certificate chain (for
  ``localhost``, ``127.0.0.1`` and ``::1``), the ``ssl.keystore.location`` of a
  PEM keystore;
* ``client.pem``, ``client.key``, ``client.crt``: a client's key and certificate
  (subject ``CN=client``), for listeners that ask for client certificates;
* ``client-ssl.properties``, ``client-sasl-ssl.properties``: the settings of a
  Java client (Kafka's tools' ``--command-config``) for the two TLS listeners.

Keys are EC P-256; certificates last ``DAYS`` days.  For development only: the
CA key sits beside the certificates.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

DAYS = 825
FILES = ("ca.pem", "ca.key", "broker.pem", "client.pem", "client.key", "client.crt")


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject: str, key, issuer_name, issuer_key, *, ca: bool, sans=None, client=False):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder()
               .subject_name(name)
               .issuer_name(issuer_name or name)
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=DAYS))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else
            [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


def _write(path: Path, data: bytes, private: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def ensure(folder: Path, hosts: tuple[str, ...] = ()) -> Path:
    """The folder, with a CA and certificates in it (made if missing)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    folder = Path(folder)
    if all((folder / name).exists() for name in FILES):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    ca_key = _key()
    ca = _cert("kcoord development CA", ca_key, None, None, ca=True)
    names = ["localhost", *hosts]
    sans = [x509.DNSName(n) for n in dict.fromkeys(names) if not _is_ip(n)]
    sans += [x509.IPAddress(ipaddress.ip_address(n))
             for n in dict.fromkeys(["127.0.0.1", "::1", *hosts]) if _is_ip(n)]
    broker_key = _key()
    broker = _cert("localhost", broker_key, ca.subject, ca_key, ca=False, sans=sans)
    client_key = _key()
    client = _cert("client", client_key, ca.subject, ca_key, ca=False, client=True)
    _write(folder / "ca.key", _key_pem(ca_key), private=True)
    _write(folder / "broker.pem", _key_pem(broker_key) + broker.public_bytes(pem)
           + ca.public_bytes(pem), private=True)
    _write(folder / "client.key", _key_pem(client_key), private=True)
    _write(folder / "client.crt", client.public_bytes(pem))
    _write(folder / "client.pem", _key_pem(client_key) + client.public_bytes(pem), private=True)
    ca_path = (folder / "ca.pem").resolve()
    common = (f"ssl.truststore.type=PEM\nssl.truststore.location={ca_path}\n"
              f"ssl.keystore.type=PEM\nssl.keystore.location={(folder / 'client.pem').resolve()}\n")
    _write(folder / "client-ssl.properties", f"security.protocol=SSL\n{common}".encode())
    _write(folder / "client-sasl-ssl.properties", (
        f"security.protocol=SASL_SSL\n{common}sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="kcoord" password="kcoord-secret";\n').encode())
    # ca.pem last: its presence with the others marks the set complete
    _write(folder / "ca.pem", ca.public_bytes(pem))
    return folder


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
