"""TLS listeners: an ``ssl.SSLContext`` from Kafka's ``ssl.*`` settings, and the
principal of a client certificate.

Key and trust stores are read in the forms Python can use: ``PEM`` (Kafka
accepts it since 2.7: a file with the private key and the certificate chain, or
the PEM text itself in ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``;
``ssl.truststore.certificates`` likewise) and ``PKCS12``.  ``JKS`` is a Java
format: kcoord refuses it at start and says how to convert it.

The principal of a connection with a client certificate is its subject's
distinguished name in RFC 2253 form (``CN=alice,O=example``), turned by
``ssl.principal.mapping.rules`` as Kafka's ``SslPrincipalMapper`` turns it.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from typing import Callable

ANONYMOUS = "User:ANONYMOUS"


class TlsConfigError(ValueError):
    pass


def _password(value) -> bytes | None:
    return None if value in (None, "") else str(value).encode()


def _pkcs12_to_pem(path: str, password: bytes | None) -> tuple[bytes, bytes, list[bytes]]:
    """(key PEM, certificate PEM, extra certificate PEMs) of a PKCS12 store."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    with open(path, "rb") as fh:
        key, cert, extra = pkcs12.load_key_and_certificates(fh.read(), password)
    key_pem = b"" if key is None else key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    cert_pem = b"" if cert is None else cert.public_bytes(serialization.Encoding.PEM)
    return key_pem, cert_pem, [c.public_bytes(serialization.Encoding.PEM) for c in extra or ()]


def _load_cert_chain(context: ssl.SSLContext, pem: bytes, password: bytes | None) -> None:
    """``load_cert_chain`` from PEM text: the ssl module reads files only, so
    through a private temporary file, removed at once."""
    fd, path = tempfile.mkstemp(prefix="kcoord-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def server_context(get: Callable[[str], object], listener: str) -> ssl.SSLContext:
    """The server context of a TLS listener; ``get(property)`` gives a property
    as the listener sees it.  TlsConfigError names what is wrong."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
    enabled = [v for v in get("ssl.enabled.protocols") or [] if v in versions]
    if not enabled:
        raise TlsConfigError(f"listener {listener}: ssl.enabled.protocols names neither "
                             "TLSv1.2 nor TLSv1.3")
    context.minimum_version = min(versions[v] for v in enabled)
    context.maximum_version = max(versions[v] for v in enabled)
    kind = str(get("ssl.keystore.type") or "JKS").upper()
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    try:
        if chain or key:
            if kind != "PEM":
                raise TlsConfigError(f"listener {listener}: ssl.keystore.key and "
                                     "ssl.keystore.certificate.chain need ssl.keystore.type=PEM")
            if not (chain and key):
                raise TlsConfigError(f"listener {listener}: give both ssl.keystore.key and "
                                     "ssl.keystore.certificate.chain")
            _load_cert_chain(context, f"{key}\n{chain}\n".encode(),
                             _password(get("ssl.key.password")))
        elif not location:
            raise TlsConfigError(f"listener {listener}: a TLS listener needs a key and a "
                                 "certificate: ssl.keystore.location (and ssl.keystore.type=PEM)"
                                 ", or kcoord serve --dev-tls")
        elif kind == "PEM":
            context.load_cert_chain(str(location), password=_password(get("ssl.key.password")))
        elif kind == "PKCS12":
            key_pem, cert_pem, extra = _pkcs12_to_pem(
                str(location), _password(get("ssl.keystore.password")))
            _load_cert_chain(context, key_pem + cert_pem + b"".join(extra), None)
        else:
            raise TlsConfigError(
                f"listener {listener}: ssl.keystore.type {kind} is not supported: kcoord reads "
                "PEM and PKCS12 stores (keytool -importkeystore -deststoretype PKCS12 converts "
                "a JKS store)")
        _load_trust(context, get, listener)
    except (OSError, ssl.SSLError, ValueError) as exc:
        if isinstance(exc, TlsConfigError):
            raise
        raise TlsConfigError(f"listener {listener}: the key or trust store cannot be loaded: "
                             f"{exc}") from None
    auth = str(get("ssl.client.auth") or "none")
    context.verify_mode = {"required": ssl.CERT_REQUIRED,
                           "requested": ssl.CERT_OPTIONAL}.get(auth, ssl.CERT_NONE)
    if context.verify_mode != ssl.CERT_NONE and not context.get_ca_certs():
        raise TlsConfigError(f"listener {listener}: ssl.client.auth={auth} needs a trust store "
                             "(ssl.truststore.location) to check client certificates against")
    ciphers = get("ssl.cipher.suites") or []
    if ciphers:
        try:
            context.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise TlsConfigError(f"listener {listener}: none of ssl.cipher.suites is known to "
                                 "OpenSSL (give OpenSSL's names)") from None
    return context


def _load_trust(context: ssl.SSLContext, get, listener: str) -> None:
    kind = str(get("ssl.truststore.type") or "JKS").upper()
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if inline:
        context.load_verify_locations(cadata=str(inline))
    elif not location:
        return
    elif kind == "PEM":
        context.load_verify_locations(cafile=str(location))
    elif kind == "PKCS12":
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        with open(str(location), "rb") as fh:
            store = pkcs12.load_pkcs12(fh.read(), _password(get("ssl.truststore.password")))
        certs = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certs.append(store.cert.certificate)
        context.load_verify_locations(cadata="".join(
            c.public_bytes(serialization.Encoding.PEM).decode() for c in certs))
    else:
        raise TlsConfigError(f"listener {listener}: ssl.truststore.type {kind} is not "
                             "supported: kcoord reads PEM and PKCS12 stores")


# --- principals -----------------------------------------------------------------

_RULE = re.compile(r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)")


class PrincipalMapper:
    """Kafka's ``SslPrincipalMapper``: rules tried in order, the first whose
    pattern matches the whole name gives the principal's name."""

    def __init__(self, rules: str = "DEFAULT"):
        self.rules: list[tuple[re.Pattern, str, str] | None] = []
        text = (rules or "DEFAULT").strip()
        pos = 0
        while pos < len(text):
            match = _RULE.match(text, pos)
            if match is None:
                raise TlsConfigError(f"Invalid rule: {text[pos:]}")
            if match[1]:
                self.rules.append(None)
            else:
                replacement = re.sub(r"\$(\d+)", r"\\\1", match[3])
                self.rules.append((re.compile(match[2]), replacement, match[4]))
            pos = match.end()
            rest = text[pos:].lstrip()
            if rest.startswith(","):
                rest = rest[1:].lstrip()
            elif rest:
                raise TlsConfigError(f"Invalid rule: {rest}")
            pos = len(text) - len(rest)

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            if rule is None:
                return distinguished_name
            pattern, replacement, case = rule
            if pattern.fullmatch(distinguished_name):
                out = pattern.sub(replacement, distinguished_name)
                return out.lower() if case == "L" else out.upper() if case == "U" else out
        raise TlsConfigError(f"No rules apply to {distinguished_name}, rules {self.rules}")


def certificate_principal(ssl_object, mapper: PrincipalMapper) -> str:
    """``User:<name>`` of the client's certificate, ANONYMOUS without one."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return ANONYMOUS
    from cryptography import x509

    subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    return f"User:{mapper.name(subject)}"
