"""DescribeTopicPartitions (key 75, v0) on the raw wire, against kcoord and Apache
Kafka 4.4 at once, answers compared field by field and, since the normalizer sorts
topics and partitions, their order compared as well: named topics, pages of
partitions followed by their cursors to the end, unknown and invalid names,
internal topics, the cursor's refusals and edge cases, every topic (an empty
list) from a cursor of this test's own, and a request large enough to be
decoded in a worker thread; then Kafka's ``kafka-topics
--describe``, which asks this API, prints the same for kcoord as for Kafka."""

from __future__ import annotations

import itertools
import re
import uuid

import pytest

from kcoord.protocol.client import WireClient
from tests.reference import kafka
from tests.reference.differential import Differential

KEY = 75
_tags = itertools.count()


@pytest.fixture
def d(diff) -> Differential:
    return diff("main")


def body(*names: str, limit: int = 2000, cursor: tuple[str, int] | None = None) -> dict:
    return {"topics": [{"name": n} for n in names], "response_partition_limit": limit,
            "cursor": None if cursor is None else {"topic_name": cursor[0],
                                                   "partition_index": cursor[1]}}


def _shape(answer: dict) -> tuple:
    """What the normalizer's sorting hides: the order of topics and partitions."""
    return ([(t["name"], [p["partition_index"] for p in t["partitions"]])
             for t in answer["topics"]], answer["next_cursor"])


def same(d: Differential, request: dict) -> dict:
    """Both answers equal, field by field and in order; kcoord's (normalized)."""
    answer = d.same(KEY, 0, request)
    shapes = []
    for side in (d.kcoord, d.kafka):
        with WireClient.to(side.bootstrap) as client:
            shapes.append(_shape(client.call(KEY, 0, request)))
    assert shapes[0] == shapes[1], f"order differs: kcoord {shapes[0]}, Kafka {shapes[1]}"
    return answer


def _topics(d: Differential, prefix: str) -> dict[str, int]:
    """Three topics of 3, 1 and 5 partitions; their names sort as listed here."""
    made = {f"{prefix}-a": 3, f"{prefix}-b": 1, f"{prefix}-c": 5}
    for name, partitions in made.items():
        d.create_topics(name, partitions=partitions)
    return made


def _pages(d: Differential, request: dict, limit: int) -> list[dict]:
    """Every page from ``request`` on, each compared, following ``next_cursor``."""
    pages = []
    request = dict(request, response_partition_limit=limit)
    while True:
        page = same(d, request)
        pages.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 100, "no end to the pages"
        request = dict(request, cursor=cursor)


def _partitions(pages: list[dict]) -> list[tuple[str, int]]:
    return [(t["name"], p["partition_index"]) for page in pages
            for t in page["topics"] for p in t["partitions"]]


def test_named_topics_with_their_partitions_as_on_kafka(d):
    prefix = f"dtp-named-{next(_tags)}"
    made = _topics(d, prefix)
    names = list(made)
    # asked out of order and one twice: answered once each, sorted by name
    answer = same(d, body(names[2], names[0], names[1], names[0]))
    assert [(t["name"], len(t["partitions"]), t["error_code"]) for t in answer["topics"]] == \
        [(n, c, 0) for n, c in made.items()]
    assert answer["next_cursor"] is None
    first = answer["topics"][0]["partitions"][0]
    assert (first["leader_id"], first["replica_nodes"], first["isr_nodes"]) == (1, [1], [1])
    assert answer["topics"][0]["topic_authorized_operations"] > 0


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 8, 9, 10])
def test_pages_and_cursors_as_on_kafka(d, limit):
    """Nine partitions in pages of ``limit``: a page ends inside a topic (the cursor
    names the first partition left out) or exactly at a topic's end (the cursor
    names the next topic at partition 0); followed to the end, the pages hold
    every partition once."""
    prefix = f"dtp-pages-{limit}-{next(_tags)}"
    made = _topics(d, prefix)
    pages = _pages(d, body(*made), limit)
    assert _partitions(pages) == [(n, p) for n, c in made.items() for p in range(c)]
    assert all(sum(len(t["partitions"]) for t in page["topics"]) <= limit for page in pages)
    if limit < 9:
        assert pages[0]["next_cursor"] is not None


def test_unknown_and_invalid_topics_as_on_kafka(d):
    prefix = f"dtp-unknown-{next(_tags)}"
    d.create_topics(f"{prefix}-a", partitions=3)
    missing = f"{prefix}-missing"
    answer = same(d, body(f"{prefix}-a", missing, "bad/name", "x" * 250, ".."))
    codes = {t["name"]: t["error_code"] for t in answer["topics"]}
    assert codes == {f"{prefix}-a": 0, missing: 3, "bad/name": 17, "x" * 250: 17, "..": 17}
    # "" without a cursor: Kafka 4.4 takes it for the absent cursor's topic and
    # fails the whole request (UNKNOWN_SERVER_ERROR for every name); with a cursor
    # it is one invalid name among others
    failed = same(d, body(f"{prefix}-a", "", missing))
    assert {t["error_code"] for t in failed["topics"]} == {-1}
    assert {t["name"]: t["error_code"] for t in same(d, body(
        f"{prefix}-a", "", cursor=("", 0)))["topics"]} == {"": 17, f"{prefix}-a": 0}
    # the page is spent by the topic before: the cursor names the unknown topic
    spent = same(d, body(f"{prefix}-a", missing, limit=3))
    assert spent["next_cursor"] == {"topic_name": missing, "partition_index": 0}
    assert same(d, body(f"{prefix}-a", missing, limit=3,
                        cursor=(missing, 0)))["topics"][0]["error_code"] == 3
    # a page ending inside a topic leaves the unknown one for the next page
    same(d, body(f"{prefix}-a", missing, limit=2))
    same(d, body(missing, limit=1))


def test_internal_topics_as_on_kafka(d):
    """``__consumer_offsets`` in pages; an internal name that is no topic is
    unknown and flagged internal all the same."""
    pages = _pages(d, body("__consumer_offsets"), 7)
    assert all(t["is_internal"] for page in pages for t in page["topics"])
    same(d, body("__consumer_offsets", "__share_group_state", limit=3))
    absent = same(d, body("__share_group_state"))["topics"][0]
    assert (absent["error_code"], absent["is_internal"]) == (3, True)


def test_cursors_refused_and_cursor_edge_cases_as_on_kafka(d):
    prefix = f"dtp-cursor-{next(_tags)}"
    made = _topics(d, prefix)
    a, b, c = made
    # refused as a whole: a cursor topic the list does not name (repeats kept in
    # the answer), a negative partition
    refused = same(d, body(a, b, a, cursor=(c, 0)))
    assert {t["error_code"] for t in refused["topics"]} == {42} and len(refused["topics"]) == 3
    same(d, body(b, c, cursor=(a, 0)))
    same(d, body(a, b, cursor=(a, -1)))
    same(d, body(cursor=(a, -1)))
    # names before the cursor's topic are left out; a start past the end gives no
    # partitions; a start near 2^31 (Kafka's int arithmetic)
    same(d, body(a, b, c, cursor=(b, 0)))
    same(d, body(a, b, c, cursor=(a, 2)))
    same(d, body(a, b, c, limit=2, cursor=(a, 10)))
    same(d, body(a, b, c, limit=5, cursor=(a, 2**31 - 3)))
    same(d, body(a, b, c, limit=5, cursor=(a, 2**31 - 1)))
    # limits outside 1..2000
    for limit in (0, -5, 2**31 - 1):
        same(d, body(a, b, c, limit=limit))


def test_every_topic_as_on_kafka(d):
    """An empty list asks for every topic. Both brokers have seen the same topics
    (the reference pair), so the whole listing is compared; then pages from a
    cursor of this test's own, which name only its topics."""
    prefix = f"dtp-all-{next(_tags)}"
    made = _topics(d, prefix)
    everything = same(d, body())
    names = [t["name"] for t in everything["topics"]]
    assert set(made) <= set(names) and "__consumer_offsets" in names
    for limit in (2, 4, 6):
        same(d, body(limit=limit, cursor=(f"{prefix}-a", 0)))
    page = same(d, body(limit=6, cursor=(f"{prefix}-a", 1)))
    assert _partitions([page]) == [(f"{prefix}-a", 1), (f"{prefix}-a", 2),
                                   (f"{prefix}-b", 0), (f"{prefix}-c", 0),
                                   (f"{prefix}-c", 1), (f"{prefix}-c", 2)]
    assert page["next_cursor"] == {"topic_name": f"{prefix}-c", "partition_index": 3}
    # a cursor topic that does not exist: the listing starts at the next name,
    # from partition 0
    before = same(d, body(limit=4, cursor=(f"{prefix}-0", 2)))
    assert _partitions([before])[0] == (f"{prefix}-a", 0)


def test_a_request_decoded_in_a_worker_thread_as_on_kafka(d):
    """A request past broker.server.OFFLOAD_BYTES (its names collapsed off the
    event loop): repeats, unknown names after the cursor's topic, names before it
    left out, and a refusal that names every topic as asked."""
    from kcoord.broker.server import OFFLOAD_BYTES

    prefix = f"dtp-big-{next(_tags)}"
    made = _topics(d, prefix)
    a, b, c = made
    unknown = [f"{prefix}-bu{i:05d}" for i in range(OFFLOAD_BYTES // 16)]  # b < bu < c
    names = [c, *unknown, a, b, *unknown[:100], "bad/name"]
    assert len(str(names)) > OFFLOAD_BYTES
    answer = same(d, body(*names, limit=4, cursor=(b, 0)))
    assert [t["name"] for t in answer["topics"]] == [b, *unknown, c]
    assert answer["next_cursor"] == {"topic_name": c, "partition_index": 3}
    refused = same(d, body(*names, cursor=(f"{prefix}-x", 0)))
    assert len(refused["topics"]) == len(names)


# -- kafka-topics --describe -----------------------------------------------------------

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"


def _describe_session(bootstrap: str, topic: str) -> list[tuple[int, str]]:
    server = ("--bootstrap-server", bootstrap)
    created = kafka.run_tool(TOPIC_COMMAND, *server, "--create", "--topic", topic,
                             "--partitions", "5", "--replication-factor", "1",
                             "--config", "cleanup.policy=compact")
    assert created.returncode == 0, created.stdout + created.stderr
    runs = [
        kafka.run_tool(TOPIC_COMMAND, *server, "--describe", "--topic", topic),
        # pages of two partitions: the admin client follows the cursors
        kafka.run_tool(TOPIC_COMMAND, *server, "--describe", "--topic", topic,
                       "--partition-size-limit-per-response", "2"),
        kafka.run_tool(TOPIC_COMMAND, *server, "--describe", "--topic", f"{topic}-missing"),
    ]
    return [(r.returncode, _masked(r.stdout.replace(topic, "<topic>")),
             [line.replace(topic, "<topic>") for line in r.stderr.splitlines()
              if "Exception" in line or "Error" in line][:1])
            for r in runs]


# Configs the tool shows for Kafka's broker and not for kcoord's, from
# DescribeConfigs (not this API): segment.bytes is one of kcoord's development
# defaults, a static broker setting on the reference (see the differential
# normalizer); min.insync.replicas is the cluster-level default Kafka 4.4's
# controller writes at bootstrap (a DYNAMIC_DEFAULT_BROKER_CONFIG), which kcoord,
# without a metadata log, does not have.
_BROKER_SIDE_CONFIGS = {"segment.bytes", "min.insync.replicas"}


def _masked(text: str) -> str:
    text = re.sub(r"TopicId: \S+", "TopicId: <id>", text)
    return re.sub(r"Configs: (\S*)", lambda m: "Configs: " + ",".join(
        c for c in m.group(1).split(",") if c.split("=")[0] not in _BROKER_SIDE_CONFIGS), text)


def test_kafka_topics_describe_prints_the_same_as_on_kafka(make_broker, scratch_kafka):
    """Kafka 4.4's ``kafka-topics --describe`` asks DescribeTopicPartitions: the same
    lines for a topic of five partitions (whole and in pages of two) and the same
    refusal of an unknown topic, topic ids masked."""
    topic = f"dtp-tool-{uuid.uuid4().hex[:8]}"
    ours = _describe_session(make_broker().bootstrap, topic)
    theirs = _describe_session(scratch_kafka.bootstrap, topic)
    assert ours[0][0] == 0 and "PartitionCount: 5" in ours[0][1]
    assert ours[0][1].count("Partition: ") == 5 and ours[1][1] == ours[0][1]
    assert ours[2][0] != 0
    assert ours == theirs
