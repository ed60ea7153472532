"""Codec figures: microseconds per parse and per build of typical messages.

Each message body is parsed from bytes and built to bytes with the compiled
construct codec every API uses (``Api.codec(version, direction)``).  Next to it,
in the same run, a hand-written ``struct``-based encoder/decoder of the Metadata
v9 request (checked to produce the same bytes and values first) gives the
baseline; the ratio is the figure to watch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
import struct
import timeit

from kcoord.protocol.messages.api_versions import API_VERSIONS
from kcoord.protocol.messages.create_topics import CREATE_TOPICS
from kcoord.protocol.messages.metadata import METADATA
from kcoord.protocol.wire import ZERO_UUID

QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"
TARGET_SECONDS = 0.02 if QUICK else 0.1  # per timing repeat
REPEATS = 3 if QUICK else 5


# -- the messages --------------------------------------------------------------------------

METADATA_V9_REQUEST = {
    "topics": [{"name": "orders"}, {"name": "payments"}, {"name": "shipments.eu-west-1"}],
    "allow_auto_topic_creation": True,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}

CREATE_TOPICS_V5_REQUEST = {
    "topics": [{
        "name": "orders",
        "num_partitions": 6,
        "replication_factor": 1,
        "assignments": [],
        "configs": [{"name": "cleanup.policy", "value": "compact"},
                    {"name": "retention.ms", "value": "604800000"}],
    }],
    "timeout_ms": 30000,
    "validate_only": False,
}


def api_versions_v3_response() -> dict:
    """The answer the broker gives: its own table of served APIs."""
    try:
        from kcoord.broker.apis import advertised_versions
        table = advertised_versions()
    except Exception:  # the broker package is not importable: use the schemas' ranges
        from kcoord.protocol.messages import ALL_APIS
        table = [(a.key, a.min_version, a.max_version) for a in ALL_APIS.values()]
    return {
        "error_code": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in table],
        "throttle_time_ms": 0,
    }


# -- the hand-written baseline: Metadata v9 request ----------------------------------------

_BOOLS3 = struct.Struct(">???")


def _write_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    b = data[pos]
    if b < 0x80:
        return b, pos + 1
    value, shift = 0, 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _skip_tags(data: bytes, pos: int) -> int:
    count, pos = _read_uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        pos += size
    return pos


def hand_build_metadata_v9(request: dict) -> bytes:
    out = bytearray()
    topics = request["topics"]
    if topics is None:
        out.append(0)
    else:
        _write_uvarint(out, len(topics) + 1)
        for topic in topics:
            name = topic["name"].encode()
            _write_uvarint(out, len(name) + 1)
            out += name
            out.append(0)  # no tagged fields
    out += _BOOLS3.pack(request["allow_auto_topic_creation"],
                        request["include_cluster_authorized_operations"],
                        request["include_topic_authorized_operations"])
    out.append(0)
    return bytes(out)


def hand_parse_metadata_v9(data: bytes) -> dict:
    count, pos = _read_uvarint(data, 0)
    topics: list | None
    if count == 0:
        topics = None
    else:
        topics = []
        for _ in range(count - 1):
            size, pos = _read_uvarint(data, pos)
            if size == 0:
                raise ValueError("null topic name in Metadata v9")
            end = pos + size - 1
            # topic_id exists from v10; the codec fills it with its default, so does this.
            topics.append({"name": data[pos:end].decode(), "topic_id": ZERO_UUID})
            pos = _skip_tags(data, end)
    auto, cluster_ops, topic_ops = _BOOLS3.unpack_from(data, pos)
    pos = _skip_tags(data, pos + 3)
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} trailing bytes")
    return {"topics": topics, "allow_auto_topic_creation": auto,
            "include_cluster_authorized_operations": cluster_ops,
            "include_topic_authorized_operations": topic_ops}


# -- timing ----------------------------------------------------------------------------------


def _plain(value):
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def micros(fn) -> float:
    """Best-of-REPEATS microseconds per call of ``fn``."""
    timer = timeit.Timer(fn)
    number, elapsed = 1, 0.0
    while True:  # calibrate the loop count to about TARGET_SECONDS per repeat
        elapsed = timer.timeit(number)
        if elapsed >= TARGET_SECONDS / 4:
            break
        number *= 4
    number = max(1, int(number * TARGET_SECONDS / elapsed))
    return min(timer.repeat(repeat=REPEATS, number=number)) / number * 1e6


def measure(api, version: int, direction: str, value: dict) -> dict:
    codec = api.codec(version, direction)
    data = codec.encode(value)
    decoded = codec.decode(data)
    assert codec.encode(decoded) == data, f"{api.name} v{version} {direction} does not round-trip"
    return {"bytes": len(data),
            "parse": micros(lambda: codec.decode(data)),
            "build": micros(lambda: codec.encode(value))}


def run() -> None:
    print(f"codec: compiled construct, message body only, µs per call (best of {REPEATS})")
    api_versions = api_versions_v3_response()
    cases = [
        ("Metadata v9 request, 3 topics", METADATA, 9, "request", METADATA_V9_REQUEST),
        ("CreateTopics v5 request, 1 topic + 2 configs", CREATE_TOPICS, 5, "request",
         CREATE_TOPICS_V5_REQUEST),
        (f"ApiVersions v3 response, {len(api_versions['api_keys'])} APIs", API_VERSIONS, 3,
         "response", api_versions),
    ]
    results = {}
    for label, api, version, direction, value in cases:
        r = results[label] = measure(api, version, direction, value)
        print(f"  {label:<46} {r['bytes']:>5} B   parse {r['parse']:7.2f} µs   "
              f"build {r['build']:7.2f} µs")

    # The baseline must agree with the codec before its speed means anything.
    codec = METADATA.codec(9, "request")
    data = codec.encode(METADATA_V9_REQUEST)
    assert hand_build_metadata_v9(METADATA_V9_REQUEST) == data, "hand-written build differs"
    assert hand_parse_metadata_v9(data) == _plain(codec.decode(data)), "hand-written parse differs"
    hand_parse = micros(lambda: hand_parse_metadata_v9(data))
    hand_build = micros(lambda: hand_build_metadata_v9(METADATA_V9_REQUEST))
    ours = results["Metadata v9 request, 3 topics"]
    print(f"  {'hand-written struct: Metadata v9 request':<46} {len(data):>5} B   "
          f"parse {hand_parse:7.2f} µs   build {hand_build:7.2f} µs")
    print(f"  construct / hand-written (Metadata v9 request): parse {ours['parse'] / hand_parse:.1f}x, "
          f"build {ours['build'] / hand_build:.1f}x")
    print()


if __name__ == "__main__":
    run()
