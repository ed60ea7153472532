"""Request header v0-v2 and response header v0-v1.

Request header v2 keeps ``client_id`` a classic (int16-length) string so that
any broker can read the header of any ApiVersions request; only the trailing
tagged-field section is new in v2.
"""

from __future__ import annotations

import io
import struct

from kcoord.protocol.schema import F, S, Api

_SIZE = struct.Struct(">i")
_SIZE_HEADER_V0 = struct.Struct(">ii")  # size, correlation id
_SIZE_HEADER_V1 = struct.Struct(">iib")  # size, correlation id, no tagged fields

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
    generated=True,  # read from every request
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


def frame_request(api: Api, version: int, correlation_id: int, client_id: str | None,
                  body) -> bytes:
    """A whole request frame: size, header (v1 or v2) and body."""
    flexible = api.is_flexible(version)
    header = request_header_codec(request_header_version(flexible)).encode({
        "request_api_key": api.key, "request_api_version": version,
        "correlation_id": correlation_id, "client_id": client_id,
    })
    payload = header + api.codec(version, "request").encode(body)
    return _SIZE.pack(len(payload)) + payload


def decode_request(api: Api, version: int, frame) -> tuple:
    """(header, body) of a request frame (without its size prefix)."""
    header, pos = request_header_codec(2 if api.is_flexible(version) else 1).decode_at(frame, 0)
    codec = api.codec(version, "request")
    if codec.generated:
        return header, codec.decode_at(frame, pos)[0]
    stream = io.BytesIO(frame)
    stream.seek(pos)
    return header, codec.read(stream)


def frame_response(api: Api, version: int, correlation_id: int, body) -> bytes:
    """A whole response frame: size, header (v0 or v1, v0 always for ApiVersions) and body."""
    payload = api.codec(version, "response").encode(body)
    if response_header_version(api.key, api.is_flexible(version)) == 1:
        return _SIZE_HEADER_V1.pack(5 + len(payload), correlation_id, 0) + payload
    return _SIZE_HEADER_V0.pack(4 + len(payload), correlation_id) + payload
