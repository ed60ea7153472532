"""The tools' connection to a broker, with a Java client's ``--command-config``
properties as Kafka's tools take them: ``security.protocol`` (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL), ``ssl.truststore.*`` and ``ssl.keystore.*`` in PEM
form (a location, or the PEM text itself), ``ssl.endpoint.identification.algorithm``
(empty: no host name check), ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512) with the user and password of ``sasl.jaas.config``."""

from __future__ import annotations

import base64
import hmac
import secrets
import socket
import ssl
import time

from kcoord.broker.config import read_properties
from kcoord.broker.security import jaas
from kcoord.broker.security.scram import MECHANISMS, salted_password
from kcoord.protocol.client import WireClient


class ConnectError(Exception):
    """Why the tool cannot talk to the broker (one line for the user)."""


def _ssl_context(props: dict[str, str], host: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    trust = props.get("ssl.truststore.certificates")
    location = props.get("ssl.truststore.location")
    if trust:
        context.load_verify_locations(cadata=trust)
    elif location:
        if props.get("ssl.truststore.type", "PEM").upper() != "PEM":
            raise ConnectError("only PEM trust stores are read (ssl.truststore.type=PEM)")
        context.load_verify_locations(cafile=location)
    else:
        context.load_default_certs()
    keystore = props.get("ssl.keystore.location")
    if keystore:
        context.load_cert_chain(keystore, password=props.get("ssl.key.password") or None)
    if props.get("ssl.endpoint.identification.algorithm", "https") == "":
        context.check_hostname = False
    return context


def _login(client: WireClient, mechanism: str, user: str, password: str) -> None:
    handshake = client.call(17, 1, {"mechanism": mechanism})
    if handshake["error_code"]:
        raise ConnectError(f"the broker does not enable SASL mechanism {mechanism} (it "
                           f"enables {', '.join(handshake['mechanisms'])})")

    def send(token: bytes) -> bytes:
        answer = client.call(36, 2, {"auth_bytes": token})
        if answer["error_code"]:
            raise ConnectError(answer["error_message"] or "authentication failed")
        return bytes(answer["auth_bytes"])

    if mechanism == "PLAIN":
        send(f"\0{user}\0{password}".encode())
        return
    scram = MECHANISMS.get(mechanism)
    if scram is None:
        raise ConnectError(f"sasl.mechanism {mechanism} is not one the tool speaks (PLAIN, "
                           "SCRAM-SHA-256, SCRAM-SHA-512)")
    name = user.replace("=", "=3D").replace(",", "=2C")
    nonce = secrets.token_urlsafe(18)
    first_bare = f"n={name},r={nonce}"
    server_first = send(f"n,,{first_bare}".encode()).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    if not fields.get("r", "").startswith(nonce):
        raise ConnectError("the broker's SCRAM nonce does not extend the client's")
    salted = salted_password(scram, password.encode(), base64.b64decode(fields["s"]),
                             int(fields["i"]))
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    client_key = scram.hmac(salted, b"Client Key")
    signature = scram.hmac(scram.digest(client_key), auth_message)
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    server_final = send(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    expected = scram.hmac(scram.hmac(salted, b"Server Key"), auth_message)
    if not hmac.compare_digest(server_final.decode(), "v=" + base64.b64encode(expected).decode()):
        raise ConnectError("the broker's SCRAM signature is wrong: it does not know the password")


def _first_answering(addresses, timeout_s: float, client_id: str, props: dict[str, str],
                     tls: bool) -> WireClient:
    """A connection to the first of ``addresses`` that takes one, tried again
    and again with a growing pause until ``timeout_s`` has passed, as Kafka's
    admin client waits for a broker that is not up yet (TimeoutError then).  A
    host that no address resolves to is an error at once (ValueError)."""
    deadline = time.monotonic() + timeout_s
    pause = 0.05
    while True:
        resolved = False
        for host, port in addresses:
            left = deadline - time.monotonic()
            try:
                context = _ssl_context(props, host) if tls else None
                return WireClient(host, port, timeout=max(left, 0.001), client_id=client_id,
                                  ssl_context=context)
            except socket.gaierror:
                continue
            except (ConnectionError, socket.timeout) as exc:
                resolved, last = True, exc
        if not resolved:
            raise ValueError("No resolvable bootstrap urls given in bootstrap.servers")
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"Timed out waiting for a node assignment ({last})")
        time.sleep(min(pause, left))
        pause = min(pause * 2, 1.0)


def connect(bootstrap: str, timeout_s: float, client_id: str,
            command_config: str | None = None) -> WireClient:
    """A connection to ``bootstrap``, secured and logged in as the properties say;
    OSError or ValueError when it cannot be made, ConnectError when the
    properties or the login fail."""
    addresses = []
    for address in (a.strip() for a in bootstrap.split(",")):
        if address:
            host, _, port = address.rpartition(":")
            addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ValueError("No resolvable bootstrap urls given in bootstrap.servers")
    props = read_properties(command_config) if command_config else {}
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConnectError(f"security.protocol {protocol} is not one of PLAINTEXT, SSL, "
                           "SASL_PLAINTEXT, SASL_SSL")
    client = _first_answering(addresses, timeout_s, client_id, props,
                              protocol in ("SSL", "SASL_SSL"))
    if protocol.startswith("SASL_"):
        try:
            options: dict[str, str] = {}
            for module in jaas.parse(props.get("sasl.jaas.config", "")):
                options.update(module.options)
            _login(client, props.get("sasl.mechanism", "GSSAPI").upper(),
                   options.get("username", ""), options.get("password", ""))
        except (ConnectError, jaas.JaasError) as exc:
            client.close()
            raise ConnectError(str(exc)) from None
        except BaseException:
            client.close()
            raise
    return client
