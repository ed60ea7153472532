"""What a consumer group subscribes to, as Kafka 4.4 sees it: the broker's topics
(``TopicImage``), Kafka's metadata hash of the subscribed topics (KIP-1101),
and regular expressions, which Kafka evaluates with RE2/J and kcoord with RE2
(the same syntax), refused with RE2/J's words.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from typing import Protocol

import re2
import xxhash

from kcoord.protocol.errors import ErrorCode as E


class InvalidRegex(Exception):
    """INVALID_REGULAR_EXPRESSION, with Kafka's message."""

    code = E.INVALID_REGULAR_EXPRESSION


class TopicImage(Protocol):
    """What the consumer groups need of the broker's topics (Kafka's
    ``MetadataImage``): ``version`` changes whenever a topic is created,
    deleted or grows."""
    version: int

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None: ...

    def name_of(self, topic_id: uuid.UUID) -> str | None: ...

    def topic_names(self): ...


class StaticImage:
    """A fixed set of topics: ``{name: (topic id, partitions)}`` (tests, and a
    shard that is not told of the broker's topics)."""

    def __init__(self, topics: Mapping[str, tuple[uuid.UUID, int]] | None = None):
        self.topics = dict(topics or {})
        self.version = 0
        self.created_version = 0

    def set(self, name: str, topic_id: uuid.UUID | None = None, partitions: int = 1) -> uuid.UUID:
        if topic_id is None:
            topic_id = self.topics[name][0] if name in self.topics else uuid.uuid4()
        created = name not in self.topics
        self.topics[name] = (topic_id, partitions)
        self.version += 1
        if created:
            self.created_version = self.version
        return topic_id

    def delete(self, name: str) -> None:
        self.topics.pop(name, None)
        self.version += 1

    def lookup(self, name: str):
        return self.topics.get(name)

    def topic_names(self):
        return self.topics.keys()

    def name_of(self, topic_id: uuid.UUID):
        for name, (tid, _n) in self.topics.items():
            if tid == topic_id:
                return name
        return None


def topic_hash(topic_id: uuid.UUID, name: str, partitions: int) -> int:
    """Utils.computeTopicHash (XXH3-64, little-endian, strings as UTF-16LE and
    their length); a single broker has no racks."""
    raw = topic_id.bytes
    data = bytearray(b"\x00")
    data += raw[0:8][::-1] + raw[8:16][::-1]
    data += _java_string(name)
    data += struct.pack("<i", partitions)
    for i in range(partitions):
        data += struct.pack("<i", i)
    return _signed64(xxhash.xxh3_64_intdigest(bytes(data)))


def group_hash(topic_hashes: Mapping[str, int]) -> int:
    """Utils.computeGroupHash: over the topic hashes in topic-name order (Java's)."""
    if not topic_hashes:
        return 0
    names = sorted(topic_hashes, key=lambda n: n.encode("utf-16-be"))
    return _signed64(xxhash.xxh3_64_intdigest(
        b"".join(struct.pack("<q", topic_hashes[n]) for n in names)))


def _java_string(text: str) -> bytes:
    units = text.encode("utf-16-le")
    return units + struct.pack("<i", len(units) // 2)


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# (topic name, id, partition count) -> its hash (Kafka's topicHashCache)
TOPIC_HASHES: dict[tuple[str, uuid.UUID, int], int] = {}
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_COMPILED: dict[str, object] = {}

# RE2's messages for a bad expression, and RE2J's (the library Kafka uses), whose
# description Kafka's INVALID_REGULAR_EXPRESSION message carries.
_RE2J_DESCRIPTIONS = [
    ("missing )", "missing closing )"),
    ("missing ]", "missing closing ]"),
    ("unexpected )", "regexp/syntax: internal error"),  # what RE2/J answers, as Kafka shows
    ("invalid repetition size", "invalid repeat count"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("missing argument to repetition operator", "missing argument to repetition operator"),
    ("bad repetition argument", "invalid repeat count"),
    ("invalid perl operator", "invalid or unsupported Perl syntax"),
    ("invalid escape sequence", "invalid escape sequence"),
    ("trailing \\", "trailing backslash at end of expression"),
    ("invalid character class range", "invalid character class range"),
    ("invalid character class", "invalid character class"),
    ("invalid named capture group", "invalid named capture"),
    ("invalid UTF-8", "invalid UTF-8"),
]


def compiled_regex(regex: str):
    """The expression compiled with RE2 (None if it does not compile)."""
    if regex not in _COMPILED:
        if len(_COMPILED) > 10_000:
            _COMPILED.clear()
        try:
            _COMPILED[regex] = re2.compile(regex, _RE2_OPTIONS)
        except re2.error:
            _COMPILED[regex] = None
    return _COMPILED[regex]


def check_regex(regex: str) -> None:
    """Utils.throwIfRegularExpressionIsInvalid (RE2J syntax, which RE2 shares)."""
    try:
        re2.compile(regex, _RE2_OPTIONS)
    except re2.error as error:
        detail = error.args[0] if error.args else b""
        text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        description = next((j for c, j in _RE2J_DESCRIPTIONS if text.startswith(c)), text)
        raise InvalidRegex(
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: "
            f"{description}.") from None
