"""A topic name ending in a newline (``"b\\n"``) was accepted by CreateTopics and
by Metadata auto-creation: the name check used ``$``, which matches before a
final newline.  Its lines broke both offset checkpoint files, so every log was
recovered as after a crash at every restart.  Names now follow Kafka's
``Topic.validate`` over the whole string (with Java's UTF-16 length), and a
checkpoint reader skips a bad line and keeps the good ones."""

from __future__ import annotations

import pytest

from kcoord.broker.topics.manager import validate_topic_name
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.manager import read_checkpoint, write_checkpoint


@pytest.mark.parametrize("name", ["b\n", "b\r", "\nb", "a b", "é", "a\x00", "a/b"])
def test_names_with_illegal_characters_are_refused(name):
    assert "contains one or more characters other than" in validate_topic_name(name)


def test_length_is_counted_in_utf16_units_like_java():
    assert validate_topic_name("a" * 249) is None
    assert "longer than the max allowed length 249" in validate_topic_name("a" * 250)
    # 125 astral characters are 250 UTF-16 units: Kafka reports the length first.
    assert "longer than the max allowed length 249" in validate_topic_name("\U0001F600" * 125)


def test_create_and_auto_create_refuse_a_trailing_newline(broker):
    from kcoord.protocol.client import WireClient

    client = WireClient("127.0.0.1", broker.port)
    try:
        created = client.call(19, 4, {"topics": [{"name": "b\n", "num_partitions": 1,
                                                  "replication_factor": 1, "assignments": [],
                                                  "configs": []}],
                                      "timeout_ms": 5000, "validate_only": False})
        assert created["topics"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        meta = client.call(3, 9, {"topics": [{"name": "c\n"}], "allow_auto_topic_creation": True,
                                  "include_cluster_authorized_operations": False,
                                  "include_topic_authorized_operations": False})
        assert meta["topics"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    finally:
        client.close()
    assert broker.broker.topics.get("b\n") is None and broker.broker.topics.get("c\n") is None


def test_a_checkpoint_with_a_bad_line_keeps_its_good_entries(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    write_checkpoint(path, {("a", 0): 10, ("b", 1): 20})
    text = open(path).read().replace("b 1 20\n", "b\n 1 20\nb 1 20\n")
    open(path, "w").write(text.replace("0\n2\n", "0\n3\n", 1))
    assert read_checkpoint(path) == {("a", 0): 10, ("b", 1): 20}
    open(path, "w").write("0\n2\na 0 10\ngarbage\n")
    assert read_checkpoint(path) == {("a", 0): 10}
    open(path, "w").write("junk")
    assert read_checkpoint(path) == {}
