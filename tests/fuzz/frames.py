"""Frames for the live fuzz test: a valid request for every served API and version,
and mutations of them.

Seeds are built with the project's own schemas: the schema defaults (the
smallest valid request) and, for the topic APIs, requests naming topics and
configs.  A corpus of frames kept in ``tests/fuzz/corpus/`` (one ``.bin``
file each: a whole frame, size included) is replayed first; frames that once
found a bug belong there.
"""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

from kcoord.broker.apis import load_handlers
from kcoord.protocol import compression
from kcoord.protocol.headers import frame_request
from kcoord.protocol.records import Record, build_batch, build_legacy

CORPUS = Path(__file__).resolve().parent / "corpus"

_RICH = {
    3: {"topics": [{"name": "fuzz-a", "topic_id": uuid.UUID(int=0)}, {"name": "fuzz-b"}],
        "allow_auto_topic_creation": True},
    19: {"topics": [{"name": "fuzz-c", "num_partitions": 2, "replication_factor": 1,
                     "assignments": [], "configs": [{"name": "retention.ms", "value": "1000"}]}],
         "timeout_ms": 1000, "validate_only": True},
    20: {"topic_names": ["fuzz-a"], "topics": [{"name": "fuzz-b"}], "timeout_ms": 1000},
    32: {"resources": [{"resource_type": 2, "resource_name": "fuzz-a",
                        "configuration_keys": ["retention.ms"]},
                       {"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
         "include_synonyms": True, "include_documentation": True},
    18: {"client_software_name": "fuzz", "client_software_version": "1.0"},
}

_RECORDS = [Record(None, 1_700_000_000_000 + i, b"k%d" % i, b"v" * i, [("h", b"x")])
            for i in range(3)]


def _produce(records: bytes, acks: int = -1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 1000, "topic_data": [
        {"name": "fuzz-a", "partition_data": [{"index": 0, "records": records}]}]}


_FETCH_PARTITION = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 16,
                    "current_leader_epoch": -1, "log_start_offset": -1}

# Data-plane requests: batches in every shape the broker converts or checks,
# with an idempotent producer id, legacy message sets, and fetches, offset
# lookups and epoch queries naming the fuzzed topic.
_DATA = {
    0: [_produce(build_batch(_RECORDS)),
        _produce(build_batch(_RECORDS, compression_type=compression.GZIP, producer_id=1,
                             producer_epoch=0, base_sequence=0)),
        _produce(build_legacy(_RECORDS, magic=1, compression_type=compression.SNAPPY)),
        _produce(build_legacy(_RECORDS, magic=0), acks=0)],
    1: [{"max_wait_ms": 5, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
         "session_id": 0, "session_epoch": -1,
         "topics": [{"topic": "fuzz-a", "topic_id": uuid.UUID(int=0),
                     "partitions": [_FETCH_PARTITION]}],
         "forgotten_topics_data": [{"topic": "fuzz-b", "topic_id": uuid.UUID(int=0),
                                    "partitions": [0]}]}],
    2: [{"replica_id": -1, "isolation_level": 0, "topics": [{"name": "fuzz-a", "partitions": [
        {"partition_index": 0, "timestamp": t, "current_leader_epoch": -1}
        for t in (-1, -2, -3, 1_700_000_000_001)]}]}],
    21: [{"topics": [{"name": "fuzz-a", "partitions": [
        {"partition_index": 0, "offset": 1}, {"partition_index": 1, "offset": -1}]}],
        "timeout_ms": 100}],
    22: [{"transactional_id": None, "transaction_timeout_ms": 1000}],
    23: [{"replica_id": -1, "topics": [{"topic": "fuzz-a", "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}],
}


_SUB = b"\x00\x00\x00\x00\x00\x01\x00\x06fuzz-a\xff\xff\xff\xff"
_COMMIT = {"group_id": "fuzz-g", "generation_id_or_member_epoch": -1, "member_id": "",
           "group_instance_id": None, "retention_time_ms": -1, "topics": [
               {"name": "fuzz-a", "partitions": [
                   {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                    "commit_timestamp": -1, "committed_metadata": "m"}]}]}

# Group requests that are answered at once: a first join (v4+ hands out a
# member id and parks nothing), syncs, heartbeats and leaves of unknown
# members, commits of a simple consumer, fetches and the admin group APIs.
_GROUPS = {
    8: [_COMMIT],
    9: [{"group_id": "fuzz-g", "topics": None, "require_stable": True,
         "groups": [{"group_id": "fuzz-g", "member_id": None, "member_epoch": -1,
                     "topics": [{"name": "fuzz-a", "partition_indexes": [0, 1]}]}]}],
    10: [{"key": "fuzz-g", "key_type": 0, "coordinator_keys": ["fuzz-g", "fuzz-h"]}],
    11: [{"group_id": "fuzz-g", "session_timeout_ms": 6000, "rebalance_timeout_ms": 100,
          "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
          "protocols": [{"name": "range", "metadata": _SUB}], "reason": "fuzz"}],
    12: [{"group_id": "fuzz-g", "generation_id": 1, "member_id": "m", "group_instance_id": "i"}],
    13: [{"group_id": "fuzz-g", "member_id": "m", "members": [
        {"member_id": "m", "group_instance_id": None, "reason": None},
        {"member_id": "", "group_instance_id": "i", "reason": "fuzz"}]}],
    14: [{"group_id": "fuzz-g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
          "protocol_type": "consumer", "protocol_name": "range",
          "assignments": [{"member_id": "m", "assignment": b"\x00\x01"}]}],
    15: [{"groups": ["fuzz-g", ""], "include_authorized_operations": True}],
    16: [{"states_filter": ["Stable", "empty"], "types_filter": ["classic"]}],
    42: [{"groups_names": ["fuzz-g", "fuzz-h"]}],
    47: [{"group_id": "fuzz-g", "topics": [{"name": "fuzz-a",
                                            "partitions": [{"partition_index": 0}]}]}],
    # the consumer group protocol (KIP-848): a join by names, a join by a regular
    # expression, a steady heartbeat with owned partitions, a leave, a describe
    68: [{"group_id": "fuzz-cg", "member_id": "fuzz-m", "member_epoch": 0,
          "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["fuzz-a"],
          "topic_partitions": []},
         {"group_id": "fuzz-cg", "member_id": "fuzz-r", "member_epoch": 0,
          "rebalance_timeout_ms": 1000, "subscribed_topic_regex": "fuzz-.*",
          "server_assignor": "range", "instance_id": "fuzz-i", "topic_partitions": []},
         {"group_id": "fuzz-cg", "member_id": "fuzz-m", "member_epoch": 2,
          "topic_partitions": [{"topic_id": uuid.UUID(int=7), "partitions": [0, 1]}]},
         {"group_id": "fuzz-cg", "member_id": "fuzz-m", "member_epoch": -1}],
    69: [{"group_ids": ["fuzz-cg", "fuzz-g", ""], "include_authorized_operations": True}],
}


# Group requests with Kafka's extremes: a JoinGroup listing thousands of
# protocols, ids of the longest length a string holds (a member id made from
# one cannot be encoded), and ids that are not valid UTF-8 (``_BAD_ID`` is
# swapped for malformed bytes in the frame).
_BAD_ID = "fuzz-bad"
_BAD_BYTES = b"fuzz-\xff\xed\xa0"
_LONG_ID = "i" * 32767
_JOIN = _GROUPS[11][0]
_EXTREMES = {
    8: [dict(_COMMIT, group_id=_BAD_ID)],
    10: [{"key": _BAD_ID, "key_type": 0, "coordinator_keys": [_BAD_ID]}],
    11: [dict(_JOIN, protocols=[{"name": f"p{i}", "metadata": _SUB} for i in range(3000)]),
         dict(_JOIN, group_instance_id=_LONG_ID),
         dict(_JOIN, group_id=_BAD_ID, group_instance_id=_BAD_ID),
         dict(_JOIN, group_id=_LONG_ID)],
    15: [{"groups": [_BAD_ID, _LONG_ID], "include_authorized_operations": True}],
    42: [{"groups_names": [_BAD_ID]}],
}


def seeds(*, extremes_only: bool = False) -> list[tuple[int, int, bytes]]:
    """(api key, version, frame) for every served API and version."""
    out = []
    for key, reg in sorted(load_handlers().items()):
        for version in range(reg.min_version, reg.max_version + 1):
            bodies = (() if extremes_only else
                      ({}, _RICH.get(key), *_DATA.get(key, ()), *_GROUPS.get(key, ())))
            for body in (*bodies, *_EXTREMES.get(key, ())):
                if body is None:
                    continue
                if key == 11 and body is not None and body.get("member_id") == "" and \
                        version < 4:
                    continue  # an old first join is parked in the purgatory
                try:
                    frame = frame_request(reg.schema, version, 1, "fuzz", body)
                except (ValueError, TypeError):
                    continue  # a field this version does not carry
                out.append((key, version, frame.replace(_BAD_ID.encode(), _BAD_BYTES)))
    return out


def corpus() -> list[bytes]:
    return [p.read_bytes() for p in sorted(CORPUS.glob("*.bin"))]


def save(frame: bytes) -> Path:
    """Keep a frame that found a bug in the corpus (named by its content)."""
    import hashlib

    CORPUS.mkdir(exist_ok=True)
    path = CORPUS / f"found-{hashlib.sha256(frame).hexdigest()[:16]}.bin"
    path.write_bytes(frame)
    return path


def mutate(frame: bytes, ops) -> bytes:
    """Apply mutations ``(kind, position, value)`` to a frame's bytes."""
    data = bytearray(frame)
    for kind, pos, value in ops:
        if not data:
            break
        i = pos % len(data)
        if kind == "flip":
            data[i] ^= (value % 255) + 1
        elif kind == "set":
            data[i] = value % 256
        elif kind == "text":
            data[i] = 32 + value % 95  # a printable character: strings stay valid UTF-8
        elif kind == "insert":
            data[i:i] = bytes([value % 256]) * (1 + value % 7)
        elif kind == "delete":
            del data[i:i + 1 + value % 7]
        elif kind == "truncate":
            del data[i:]
        elif kind == "int16":
            data[i:i + 2] = struct.pack(">h", (value % 65536) - 32768)
        elif kind == "int32":
            data[i:i + 4] = struct.pack(">i", (value % (1 << 32)) - (1 << 31))
        elif kind == "resize":
            # keep the frame's size prefix true to the mutated body
            data[0:4] = struct.pack(">i", max(len(data) - 4, 0))
    return bytes(data)
