"""The records of ``__consumer_offsets``: keys and values as Kafka writes them.

Every key and value is an int16 version followed by the fields of that
version; the key's version is the record type (Kafka's CoordinatorRecordType):

* key 0 or 1: an offset commit (group, topic, partition); Kafka writes 1 and
  reads both.  Its value: OffsetCommitValue, written as v3, or v1 when the
  commit carried an expiry time; v4 is the first flexible version.
* key 2: a classic group's metadata (group); its value: GroupMetadataValue,
  written as v3; v4 is the first flexible version.
* keys 3 to 8 and 16: a consumer group of the KIP-848 protocol, as many small
  records (Kafka's ConsumerGroup*Key/Value): 3 the group's epoch, 4 the
  subscribed topics' metadata (read, no longer written by Kafka 4.x), 5 a
  member's metadata, 6 the target assignment's epoch, 7 a member's target
  assignment, 8 a member's current assignment, 16 a regular expression's
  resolution.  Every value is version 0, flexible.
* other keys belong to share and streams groups: readers skip them.

A null value is a tombstone.  A value version newer than the newest known one
is read with the newest known layout (KIP-915 keeps later changes to tagged
fields).
"""

from __future__ import annotations

import struct

from kcoord.protocol.schema import F, S, Api

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

OFFSET_COMMIT_KEY = Api(
    key=-1, name="OffsetCommitKey", versions="0-1", flexible=None,
    request=S(
        F("group", "string"),
        F("topic", "string"),
        F("partition", "int32"),
    ),
    response=S(),
    generated=True,  # written on every commit
)

OFFSET_COMMIT_VALUE = Api(
    key=-1, name="OffsetCommitValue", versions="0-4", flexible="4+",
    request=S(
        F("offset", "int64"),
        F("leader_epoch", "int32", v="3+", default=-1),
        F("metadata", "string"),
        F("commit_timestamp", "int64"),
        F("expire_timestamp", "int64", v="1", default=-1),
    ),
    response=S(),
    generated=True,  # written on every commit
)

GROUP_METADATA_KEY = Api(
    key=-1, name="GroupMetadataKey", versions="2", flexible=None,
    request=S(F("group", "string")),
    response=S(),
)

GROUP_METADATA_VALUE = Api(
    key=-1, name="GroupMetadataValue", versions="0-4", flexible="4+",
    request=S(
        F("protocol_type", "string"),
        F("generation", "int32"),
        F("protocol", "string", nullable="0+"),
        F("leader", "string", nullable="0+"),
        F("current_state_timestamp", "int64", v="2+", default=-1),
        F("members", [S(
            F("member_id", "string"),
            F("group_instance_id", "string", v="3+", nullable="3+", default=None),
            F("client_id", "string"),
            F("client_host", "string"),
            F("rebalance_timeout", "int32", v="1+", default=-1),
            F("session_timeout", "int32"),
            F("subscription", "bytes"),
            F("assignment", "bytes"),
        )]),
    ),
    response=S(),
)

# --- the consumer group protocol (KIP-848) -------------------------------------------

_GROUP_KEY = S(F("group", "string"))
_MEMBER_KEY = S(F("group", "string"), F("member_id", "string"))
_TOPIC_PARTITIONS = S(F("topic_id", "uuid"), F("partitions", ["int32"]))


def _key(name: str, fields: S) -> Api:
    return Api(key=-1, name=name, versions="0", flexible=None, request=fields, response=S())


def _value(name: str, fields: S) -> Api:
    return Api(key=-1, name=name, versions="0", flexible="0+", request=fields, response=S())


CONSUMER_GROUP_METADATA_VALUE = _value("ConsumerGroupMetadataValue", S(
    F("epoch", "int32"),
    F("metadata_hash", "int64", tag=0, default=0),
))
CONSUMER_GROUP_PARTITION_METADATA_VALUE = _value("ConsumerGroupPartitionMetadataValue", S(
    F("topics", [S(
        F("topic_id", "uuid"),
        F("topic_name", "string"),
        F("num_partitions", "int32"),
        F("partition_metadata", [S(F("partition", "int32"), F("racks", ["string"]))]),
    )]),
))
CONSUMER_GROUP_MEMBER_METADATA_VALUE = _value("ConsumerGroupMemberMetadataValue", S(
    F("instance_id", "string", nullable="0+", default=None),
    F("rack_id", "string", nullable="0+", default=None),
    F("client_id", "string"),
    F("client_host", "string"),
    F("subscribed_topic_names", ["string"]),
    F("subscribed_topic_regex", "string", nullable="0+", default=None),
    F("rebalance_timeout_ms", "int32", default=-1),
    F("server_assignor", "string", nullable="0+", default=None),
    F("classic_member_metadata", S(
        F("session_timeout_ms", "int32"),
        F("supported_protocols", [S(F("name", "string"), F("metadata", "bytes"))]),
    ), nullable="0+", tag=0, default=None),
))
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _value(
    "ConsumerGroupTargetAssignmentMetadataValue", S(
        F("assignment_epoch", "int32"),
        F("assignment_timestamp", "int64", tag=0, default=0),
    ))
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = _value(
    "ConsumerGroupTargetAssignmentMemberValue", S(
        F("topic_partitions", [_TOPIC_PARTITIONS]),
    ))
_ASSIGNED_PARTITIONS = S(
    F("topic_id", "uuid"),
    F("partitions", ["int32"]),
    F("assignment_epochs", ["int32"], nullable="0+", tag=0, default=None),
)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = _value(
    "ConsumerGroupCurrentMemberAssignmentValue", S(
        F("member_epoch", "int32"),
        F("previous_member_epoch", "int32"),
        F("state", "int8"),
        F("assigned_partitions", [_ASSIGNED_PARTITIONS]),
        F("partitions_pending_revocation", [_ASSIGNED_PARTITIONS]),
    ))
CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = _value("ConsumerGroupRegularExpressionValue", S(
    F("topics", ["string"]),
    F("version", "int64"),
    F("timestamp", "int64"),
))

OFFSET_COMMIT = "offset_commit"
GROUP_METADATA = "group_metadata"
CONSUMER_GROUP_METADATA = "consumer_group_metadata"
CONSUMER_GROUP_PARTITION_METADATA = "consumer_group_partition_metadata"
CONSUMER_GROUP_MEMBER_METADATA = "consumer_group_member_metadata"
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = "consumer_group_target_assignment_metadata"
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = "consumer_group_target_assignment_member"
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = "consumer_group_current_member_assignment"
CONSUMER_GROUP_REGULAR_EXPRESSION = "consumer_group_regular_expression"

# record type -> (kind, key schema, value schema)
_TYPES: dict[int, tuple[str, Api, Api]] = {
    0: (OFFSET_COMMIT, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    1: (OFFSET_COMMIT, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: (GROUP_METADATA, GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
    3: (CONSUMER_GROUP_METADATA, _key("ConsumerGroupMetadataKey", _GROUP_KEY),
        CONSUMER_GROUP_METADATA_VALUE),
    4: (CONSUMER_GROUP_PARTITION_METADATA, _key("ConsumerGroupPartitionMetadataKey", _GROUP_KEY),
        CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    5: (CONSUMER_GROUP_MEMBER_METADATA, _key("ConsumerGroupMemberMetadataKey", _MEMBER_KEY),
        CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    6: (CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
        _key("ConsumerGroupTargetAssignmentMetadataKey", _GROUP_KEY),
        CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    7: (CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        _key("ConsumerGroupTargetAssignmentMemberKey", _MEMBER_KEY),
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    8: (CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
        _key("ConsumerGroupCurrentMemberAssignmentKey", _MEMBER_KEY),
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    16: (CONSUMER_GROUP_REGULAR_EXPRESSION,
         _key("ConsumerGroupRegularExpressionKey",
              S(F("group", "string"), F("regular_expression", "string"))),
         CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE),
}
_TYPE_OF_KIND = {kind: rtype for rtype, (kind, _, _) in _TYPES.items() if rtype != 0}
_VALUE_OF_KIND = {kind: value for kind, _, value in _TYPES.values()}

_VERSION = struct.Struct(">h")


class UnknownRecordType(ValueError):
    """A key version (record type) this broker does not know: skipped on load."""

    def __init__(self, version: int):
        super().__init__(f"unknown __consumer_offsets record type (key version) {version}")
        self.version = version


def _encode(api: Api, version: int, fields: dict) -> bytes:
    return _VERSION.pack(version) + api.codec(version, "request").encode(fields)


_KEY_CACHE: dict[tuple[str, str, int], bytes] = {}
_KEY_CACHE_SIZE = 10_000


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    # A group commits the same partitions again and again: their keys are
    # kept (a bounded cache, emptied when full).
    cache_key = (group, topic, partition)
    key = _KEY_CACHE.get(cache_key)
    if key is None:
        key = _encode(OFFSET_COMMIT_KEY, OFFSET_COMMIT_KEY_VERSION,
                      {"group": group, "topic": topic, "partition": partition})
        if len(_KEY_CACHE) >= _KEY_CACHE_SIZE:
            _KEY_CACHE.clear()
        _KEY_CACHE[cache_key] = key
    return key


def offset_commit_value(offset: int, metadata: str, commit_timestamp: int, *,
                        leader_epoch: int = -1, expire_timestamp: int = -1) -> bytes:
    """v3, or v1 when the commit carried an expiry time (it has no leader epoch)."""
    version = OFFSET_COMMIT_VALUE_VERSION if expire_timestamp == -1 else \
        OFFSET_COMMIT_VALUE_WITH_EXPIRY
    return _encode(OFFSET_COMMIT_VALUE, version, {
        "offset": offset, "leader_epoch": leader_epoch, "metadata": metadata,
        "commit_timestamp": commit_timestamp, "expire_timestamp": expire_timestamp})


def group_metadata_key(group: str) -> bytes:
    return _encode(GROUP_METADATA_KEY, GROUP_METADATA_KEY_VERSION, {"group": group})


def group_metadata_value(fields: dict) -> bytes:
    return _encode(GROUP_METADATA_VALUE, GROUP_METADATA_VALUE_VERSION, fields)


def _decode(api: Api, raw: bytes):
    if len(raw) < 2:
        raise ValueError("a record key or value shorter than its version")
    (version,) = _VERSION.unpack_from(raw, 0)
    if version < api.min_version:
        raise ValueError(f"{api.name} version {version} does not exist")
    version = min(version, api.max_version)
    return version, api.codec(version, "request").decode(raw[2:])


def decode_key(raw: bytes) -> tuple[str, object]:
    """(record kind, key fields); ``UnknownRecordType`` for record types to skip."""
    if len(raw) < 2:
        raise ValueError("a record key shorter than its version")
    (version,) = _VERSION.unpack_from(raw, 0)
    known = _TYPES.get(version)
    if known is None:
        raise UnknownRecordType(version)
    kind, api, _ = known
    return kind, api.codec(0 if version > 2 else version, "request").decode(raw[2:])


def decode_value(kind: str, raw: bytes | None):
    """The value fields of a record of ``kind``, or None for a tombstone."""
    if raw is None:
        return None
    return _decode(_VALUE_OF_KIND[kind], raw)[1]


def consumer_group_key(kind: str, group: str, member_id: str | None = None,
                       regular_expression: str | None = None) -> bytes:
    """The key of a consumer group record of ``kind`` (version 0 of its key)."""
    rtype = _TYPE_OF_KIND[kind]
    fields: dict = {"group": group}
    if member_id is not None:
        fields["member_id"] = member_id
    if regular_expression is not None:
        fields["regular_expression"] = regular_expression
    return _VERSION.pack(rtype) + _TYPES[rtype][1].codec(0, "request").encode(fields)


def consumer_group_value(kind: str, fields: dict) -> bytes:
    """The value of a consumer group record of ``kind``, version 0 as Kafka 4.4 writes it."""
    return _encode(_VALUE_OF_KIND[kind], 0, fields)


# --- what a consumer group's members carry (protocol type "consumer") ---------------

CONSUMER_PROTOCOL_SUBSCRIPTION = Api(
    key=-1, name="ConsumerProtocolSubscription", versions="0-3", flexible=None,
    request=S(
        F("topics", ["string"]),
        F("user_data", "bytes", nullable="0+", default=None),
        F("owned_partitions", [S(F("topic", "string"), F("partitions", ["int32"]))], v="1+",
          default=[]),
        F("generation", "int32", v="2+", default=-1),
        F("rack_id", "string", v="3+", nullable="3+", default=None),
    ),
    response=S(),
)

CONSUMER_PROTOCOL_ASSIGNMENT = Api(
    key=-1, name="ConsumerProtocolAssignment", versions="0-3", flexible=None,
    request=S(
        F("assigned_partitions", [S(F("topic", "string"), F("partitions", ["int32"]))]),
        F("user_data", "bytes", nullable="0+", default=None),
    ),
    response=S(),
)


def consumer_subscription(raw: bytes):
    """A member's ConsumerProtocolSubscription (a version newer than 3 is read as 3)."""
    return _decode(CONSUMER_PROTOCOL_SUBSCRIPTION, raw)[1]


def consumer_assignment(raw: bytes):
    """A member's ConsumerProtocolAssignment (a version newer than 3 is read as 3)."""
    return _decode(CONSUMER_PROTOCOL_ASSIGNMENT, raw)[1]


def consumer_assignment_bytes(partitions, version: int) -> bytes:
    """A ConsumerProtocolAssignment of ``[(topic, [partitions])]`` in ``version``
    (a newer one is written as 3, the newest known, as Kafka's
    ConsumerProtocol.serializeAssignment does); ValueError below 0."""
    if version < 0:
        raise ValueError(f"Unsupported assignment version: {version}")
    newest = CONSUMER_PROTOCOL_ASSIGNMENT.max_version
    return _encode(CONSUMER_PROTOCOL_ASSIGNMENT, min(version, newest),
                   {"assigned_partitions": [{"topic": t, "partitions": list(p)}
                                            for t, p in partitions],
                    "user_data": None})


def consumer_protocol_version(raw: bytes) -> int:
    """The version a ConsumerProtocolSubscription or Assignment starts with."""
    if len(raw) < 2:
        raise ValueError("embedded consumer protocol shorter than its version")
    return _VERSION.unpack_from(raw, 0)[0]
