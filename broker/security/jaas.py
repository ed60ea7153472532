"""Kafka's ``sasl.jaas.config`` values: one or more login modules, each
``<class> <flag> [option=value ...];``, values bare or in double quotes (Kafka's
``JaasConfig`` reads them with Java's ``StreamTokenizer``).

On a broker the PLAIN module's options name its users: ``user_<name>="<password>"``
(Kafka's ``PlainServerCallbackHandler``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.DOTALL)

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


class JaasError(ValueError):
    pass


@dataclass
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str):
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise JaasError(f"unexpected text at {text[pos:pos + 20]!r}")
        pos = match.end()
        quoted, word, equals, end = match.groups()
        if quoted is not None:
            yield "value", re.sub(r"\\(.)", r"\1", quoted)
        elif word is not None:
            yield "value", word
        else:
            yield ("=" if equals else ";"), None


def parse(text: str) -> list[LoginModule]:
    """The login modules of a JAAS configuration value; JaasError when malformed
    (Kafka: "Value not specified for key ...", "Expected ';' ...")."""
    modules: list[LoginModule] = []
    tokens = list(_tokens(text))
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "value" or i + 1 >= len(tokens) or tokens[i + 1][0] != "value":
            raise JaasError("Invalid JAAS config: expected a login module and its control flag")
        name, flag = tokens[i][1], tokens[i + 1][1].lower()
        if flag not in _FLAGS:
            raise JaasError(f"Invalid login module control flag '{tokens[i + 1][1]}' in JAAS "
                            "config")
        module = LoginModule(name, flag)
        i += 2
        while i < len(tokens) and tokens[i][0] != ";":
            if (tokens[i][0] != "value" or i + 2 >= len(tokens) or tokens[i + 1][0] != "="
                    or tokens[i + 2][0] != "value"):
                raise JaasError(f"Value not specified for key '{tokens[i][1]}' in JAAS config")
            module.options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasError("Expected ';' after the options of a login module in JAAS config")
        i += 1
        modules.append(module)
    if not modules:
        raise JaasError("JAAS config entry not terminated by semi-colon")
    return modules


def plain_users(text: str | None) -> dict[str, str]:
    """The users (name -> password) a PLAIN server module's options name."""
    users: dict[str, str] = {}
    for module in parse(text) if text else ():
        if module.name == PLAIN_MODULE:
            users.update({key[5:]: value for key, value in module.options.items()
                          if key.startswith("user_")})
    return users
