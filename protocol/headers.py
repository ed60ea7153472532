"""Request header v0-v2 and response header v0-v1.

Request header v2 keeps ``client_id`` a classic (int16-length) string so that
any broker can read the header of any ApiVersions request; only the trailing
tagged-field section is new in v2.
"""

from __future__ import annotations

from protocol.schema import F, S, Api

REQUEST_HEADER = Api(
    key=-1,
    name="RequestHeader",
    versions="0-2",
    flexible="2+",
    request=S(
        F("request_api_key", "int16"),
        F("request_api_version", "int16"),
        F("correlation_id", "int32"),
        F("client_id", "string", v="1+", nullable="1+", classic=True, default=None),
    ),
    response=S(),
)

RESPONSE_HEADER = Api(
    key=-1,
    name="ResponseHeader",
    versions="0-1",
    flexible="1+",
    request=S(F("correlation_id", "int32")),
    response=S(),
)


def request_header_version(flexible: bool) -> int:
    return 2 if flexible else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    # ApiVersions answers always use header v0 so that a client of any version
    # can read the error and the supported ranges (KIP-511).
    if api_key == 18:
        return 0
    return 1 if flexible else 0


def request_header_codec(version: int):
    return REQUEST_HEADER.codec(version, "request")


def response_header_codec(version: int):
    return RESPONSE_HEADER.codec(version, "request")
