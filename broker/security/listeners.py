"""What each listener needs to secure its connections, built once at start from
the configuration: the TLS context (SSL, SASL_SSL), the SASL settings
(SASL_PLAINTEXT, SASL_SSL) and the certificate principal mapper (SSL)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Callable

import structlog

from kcoord.broker.security.jaas import JaasError, parse, plain_users
from kcoord.broker.security.sasl import SERVED_MECHANISMS, SaslSettings
from kcoord.broker.security.scram import Credential
from kcoord.broker.security.tls import PrincipalMapper, TlsConfigError, server_context

log = structlog.get_logger("kcoord.security")


class SecurityConfigError(ValueError):
    pass


@dataclass
class ListenerSecurity:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslSettings | None = None
    mapper: PrincipalMapper | None = None


def build(config, name: str,
          scram_lookup: Callable[[str, str], Credential | None]) -> ListenerSecurity:
    """The security of listener ``name``; SecurityConfigError says what to fix."""
    protocol = config.protocol_of(name)
    security = ListenerSecurity(name, protocol)

    def get(prop: str, mechanism: str | None = None):
        return config.for_listener(name, prop, mechanism)

    try:
        if protocol in ("SSL", "SASL_SSL"):
            security.ssl_context = server_context(get, name)
        if protocol == "SSL":
            security.mapper = PrincipalMapper(get("ssl.principal.mapping.rules"))
    except TlsConfigError as exc:
        raise SecurityConfigError(str(exc)) from None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        enabled = list(get("sasl.enabled.mechanisms") or [])
        served = [m for m in enabled if m in SERVED_MECHANISMS]
        if not served:
            raise SecurityConfigError(
                f"listener {name}: sasl.enabled.mechanisms={','.join(enabled) or '(none)'} "
                f"names no mechanism kcoord serves: set it to some of "
                f"{','.join(SERVED_MECHANISMS)}")
        if len(served) < len(enabled):
            log.warning("listener.sasl_mechanisms_not_served", listener=name,
                        not_served=[m for m in enabled if m not in served],
                        reason="kcoord serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and "
                               "OAUTHBEARER (unsecured tokens); clients asking for the others "
                               "get UNSUPPORTED_SASL_MECHANISM")
        users: dict[str, str] = {}
        if "PLAIN" in served:
            prop = f"listener.name.{name.lower()}.plain.sasl.jaas.config"
            try:
                users = plain_users(get("sasl.jaas.config", "PLAIN"))
            except JaasError as exc:
                raise SecurityConfigError(f"{prop}: {exc}") from None
            if not users:
                raise SecurityConfigError(
                    f"listener {name}: PLAIN is enabled but no user can log in with it: give "
                    f"them in {prop} (org.apache.kafka.common.security.plain.PlainLoginModule "
                    'required user_alice="alice-secret";)')
        options: dict[str, str] = {}
        if "OAUTHBEARER" in served:
            prop = f"listener.name.{name.lower()}.oauthbearer.sasl.jaas.config"
            text = get("sasl.jaas.config", "OAUTHBEARER")
            try:
                modules = parse(text) if text else []
            except JaasError as exc:
                raise SecurityConfigError(f"{prop}: {exc}") from None
            for module in modules:
                options.update(module.options)
        security.sasl = SaslSettings(
            listener=name, mechanisms=served, plain_users=users, scram_lookup=scram_lookup,
            oauthbearer_options=options,
            reauth_ms={m: int(get("connections.max.reauth.ms", m) or 0) for m in served},
            failed_delay_ms=int(get("connection.failed.authentication.delay.ms") or 0))
    return security
