"""kcoord and Apache Kafka answer the same scripted requests the same way.

Every request is sent at every version kcoord serves to a reference Kafka that
serves it too: Kafka 3.9 for all of them (the versions kcoord advertises and the
topic configs it knows are 3.9's), and Kafka 4.x as well wherever 4.x still
serves the version and its answer has not changed shape (Metadata, DeleteTopics,
DescribeCluster). Topic names carry the version and a test tag so that the
shared brokers never see one twice.
"""

from __future__ import annotations

import uuid

import pytest

from kcoord.broker.apis import REGISTRY, advertised_versions
from kcoord.broker.config import BROKER_CONFIGS, DYNAMIC_BROKER_CONFIGS
from kcoord.protocol.client import WireClient
from tests.reference.differential import Differential, differences

# What a broker with the default configuration serves (the consumer group
# protocol, KIP-848, is advertised only when enabled).
SERVED = {key: (low, high) for key, low, high in advertised_versions()
          if REGISTRY[key].advertised_if is None}
MAIN_RANGES = {3: (0, 13), 19: (2, 7), 20: (1, 6), 32: (1, 4), 60: (0, 2)}


def versions(key: int) -> list[int]:
    low, high = SERVED[key]
    return list(range(low, high + 1))


# The newest version Kafka 3.9 serves, where kcoord serves a newer one too.
LEGACY_MAX = {3: 12, 60: 1}


def references(key: int) -> list[tuple[str, int]]:
    """(reference, version) pairs: every served version against each Kafka serving it."""
    pairs = [("legacy", v) for v in versions(key) if v <= LEGACY_MAX.get(key, v)]
    if key in (3, 20, 60):
        low, high = MAIN_RANGES[key]
        pairs += [("main", v) for v in versions(key) if low <= v <= high]
    return pairs


def _topic(name, partitions=1, replication=1, configs=(), assignments=()):
    return {"name": name, "num_partitions": partitions, "replication_factor": replication,
            "assignments": list(assignments),
            "configs": [{"name": k, "value": v} for k, v in configs]}


def _create(d: Differential, version: int, *topics, validate_only=False):
    return d.same(19, version, {"topics": list(topics), "timeout_ms": 10000,
                                "validate_only": validate_only})


def _metadata_names(names, version):
    if version >= 10:
        return [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
    return [{"name": n} for n in names]


# -- ApiVersions ---------------------------------------------------------------------


# What Kafka 4.4 serves and kcoord does not, each with the work that owns it. A
# real client only sends an API its broker advertises; these are the ones kcoord
# leaves out, on purpose and for now (docs/deviations.md, the README's table).
NOT_SERVED = {
    **dict.fromkeys((38, 39, 40, 41), "delegation tokens"),
    **dict.fromkeys((76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92), "share groups"),
    **dict.fromkeys((88, 89, 93), "streams groups"),
    # KRaft's quorum and the controller's own APIs: one node, no metadata log
    **dict.fromkeys((55, 57, 64, 80, 81, 94), "KRaft controller"),
    34: "one log dir: nothing to move between dirs",
    **dict.fromkeys((71, 72), "client telemetry"),
}
# Versions below Kafka 4.x's minimum (KIP-896) that kcoord still answers, as 3.9
# does, for old clients; OffsetCommit and OffsetFetch v0 kept offsets in
# ZooKeeper, which a KRaft 3.9 advertises and refuses: kcoord does not advertise
# them (a decision).
OLDER_MINIMUM = {0: 0, 1: 0, 2: 0, 8: 0, 9: 0, 19: 0, 20: 0, 23: 0, 32: 0}


def _ranges(bootstrap: str, version: int = 4) -> dict[int, tuple[int, int]]:
    body = {"client_software_name": "kcoord-ref", "client_software_version": "1.0"}
    with WireClient.to(bootstrap) as client:
        answer = client.call(18, version, body)
    assert answer["error_code"] == 0
    return {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}


def test_api_versions_offer_every_version_kafka_4_4_offers(reference_pair):
    """Every API kcoord serves, up to Kafka 4.4's newest version, and every API
    Kafka 4.4 serves that kcoord does not is in ``NOT_SERVED`` with its reason."""
    kcoord, kafka44 = reference_pair("main")
    ours, theirs = _ranges(kcoord.bootstrap), _ranges(kafka44.bootstrap)
    missing = {key: theirs[key] for key in theirs if key not in ours and key not in NOT_SERVED}
    assert not missing, f"Kafka 4.4 serves, kcoord does not: {missing}"
    assert not set(ours) - set(theirs)
    assert not set(ours) & set(NOT_SERVED), "served: take it out of NOT_SERVED"
    expected = {key: (OLDER_MINIMUM.get(key, theirs[key][0]), theirs[key][1]) for key in ours}
    assert ours == expected


def test_api_versions_keep_kafka_3_9_s_older_versions(reference_pair):
    """Below Kafka 4.x's minimum, kcoord answers the versions Kafka 3.9 served."""
    kcoord, kafka39 = reference_pair("legacy")
    ours, theirs = _ranges(kcoord.bootstrap), _ranges(kafka39.bootstrap)
    for key, low in OLDER_MINIMUM.items():
        assert ours[key][0] == theirs[key][0], key


@pytest.mark.parametrize("version", versions(18))
def test_api_versions_answer_as_kafka_4_4(diff, version):
    d = diff("main")
    body = {"client_software_name": "kcoord-ref", "client_software_version": "1.0"}
    ours, theirs = d.ask(18, version, body)
    theirs["api_keys"] = [k for k in theirs["api_keys"] if k["api_key"] not in NOT_SERVED]
    for k in theirs["api_keys"]:
        if k["api_key"] in OLDER_MINIMUM:
            k["min_version"] = OLDER_MINIMUM[k["api_key"]]
    assert not differences(ours, theirs)


def test_api_versions_v5_checks_the_cluster_and_node_as_kafka_4_4(diff):
    """KIP-1242: a client naming another cluster or node is told to bootstrap again;
    naming one without the other is an invalid request."""
    d = diff("main")

    def body(cluster, node):
        def make(side):
            own = side.cluster_id
            return {"client_software_name": "kcoord-ref", "client_software_version": "1.0",
                    "cluster_id": own if cluster == "own" else cluster, "node_id": node}
        return make

    for side in (d.kcoord, d.kafka):  # learn each side's cluster id
        d._ask(side, 3, 12, {"topics": [], "allow_auto_topic_creation": False})
    assert d.kcoord.cluster_id and d.kafka.cluster_id
    for cluster, node, code in [("own", 1, 0), (None, -1, 0), ("own", 2, 129),
                                ("AAAAAAAAAAAAAAAAAAAAAA", 1, 129), (None, 1, 42),
                                ("own", -1, 42), ("", 1, 129)]:
        ours, theirs = d.ask(18, 5, body(cluster, node))
        assert ours["error_code"] == theirs["error_code"] == code, (cluster, node)
        # refused: no API listed, as Kafka lists none
        assert not ours["api_keys"] and not theirs["api_keys"] if code else ours["api_keys"]


def test_api_versions_lists_group_version_as_kafka_4_4_does(reference_pair):
    """Of the feature levels, kcoord lists ``group.version`` and
    ``transaction.version`` (it has no KRaft metadata log for the others:
    docs/deviations.md), as Kafka 4.4 lists them: the consumer group protocol
    enabled, transactions at level 2; without the protocol, group.version
    supported only."""
    body = {"client_software_name": "kcoord-ref", "client_software_version": "1.0"}

    def group_version(answer, name="group.version"):
        return ([f for f in answer["supported_features"] if f["name"] == name],
                [f for f in answer["finalized_features"] if f["name"] == name])

    kcoord, ref = reference_pair("main")
    for version in (3, 4):
        with WireClient.to(kcoord.bootstrap) as ours, WireClient.to(ref.bootstrap) as theirs:
            mine, kafkas = ours.call(18, version, body), theirs.call(18, version, body)
        # below v4 a supported feature whose minimum is 0 is left out (KIP-1022)
        assert group_version(mine) == group_version(kafkas), version
        assert group_version(mine)[1] == [{"name": "group.version", "max_version_level": 1,
                                           "min_version_level": 1}]
        assert group_version(mine, "transaction.version") == group_version(
            kafkas, "transaction.version"), version
        assert group_version(mine, "transaction.version")[1] == [
            {"name": "transaction.version", "max_version_level": 2, "min_version_level": 2}]
        assert mine["finalized_features_epoch"] >= 0
    assert [f["name"] for f in mine["supported_features"]] == ["group.version",
                                                               "transaction.version"]
    assert "metadata.version" in {f["name"] for f in kafkas["finalized_features"]}
    legacy, _ref = reference_pair("legacy")  # the consumer group protocol disabled
    with WireClient.to(legacy.bootstrap) as ours:
        mine = ours.call(18, 4, body)
    assert group_version(mine) == ([{"name": "group.version", "min_version": 0,
                                     "max_version": 1}], [])


def _api_versions_frame(version: int) -> bytes:
    """ApiVersions at a version neither broker knows: only the header can be read."""
    import struct
    header = struct.pack(">hhi", 18, version, 7) + struct.pack(">h", 3) + b"ref" + b"\x00"
    body = b"\x03kp\x02v\x00"
    return struct.pack(">i", len(header + body)) + header + body


@pytest.mark.parametrize("which", ["legacy", "main"])
def test_api_versions_unknown_version_fallback_matches_kafka(diff, which):
    d = diff(which)
    frames = []
    for side in (d.kcoord, d.kafka):
        with WireClient.to(side.bootstrap) as client:
            client.send_raw(_api_versions_frame(127))
            frames.append(client.recv_frame())
    ours, theirs = frames
    # Same layout: header v0, error 35, one entry for ApiVersions with the
    # broker's own range (3.9 knows only v0-4, so only the range may differ there).
    assert ours[:12] == theirs[:12] == bytes.fromhex("00000007" "0023" "00000001" "0012")
    assert ours[12:] == bytes.fromhex("0000" "0005")
    if which == "main":
        assert ours == theirs


def test_api_versions_v3_bad_software_name_matches_kafka(diff):
    d = diff("legacy")
    d.same(18, 3, {"client_software_name": "bad name!", "client_software_version": "1"})
    d.same(18, 3, {"client_software_name": "ok", "client_software_version": "-1"})
    # The whole string must match Kafka's pattern: a trailing newline is refused.
    answer = d.same(18, 3, {"client_software_name": "a\n", "client_software_version": "1"})
    assert answer["error_code"] == 42


# -- Metadata ------------------------------------------------------------------------


@pytest.mark.parametrize("which,version", references(3))
def test_metadata_named_unknown_and_all(diff, which, version):
    d = diff(which)
    name = f"md-{which}-{version}"
    d.create_topics(name, partitions=3)
    body = {"topics": _metadata_names([name], version), "allow_auto_topic_creation": False}
    answer = d.same(3, version, body)
    assert [p["partition_index"] for p in answer["topics"][0]["partitions"]] == [0, 1, 2]
    if version >= 4:
        unknown = {"topics": _metadata_names([f"md-missing-{version}"], version),
                   "allow_auto_topic_creation": False}
        assert d.same(3, version, unknown)["topics"][0]["error_code"] == 3
    everything = {"topics": None if version >= 1 else [], "allow_auto_topic_creation": False}
    listing = d.same(3, version, everything)
    assert name in {t["name"] for t in listing["topics"]}
    assert "__consumer_offsets" in {t["name"] for t in listing["topics"]}
    if version >= 1:
        assert d.same(3, version, {"topics": [], "allow_auto_topic_creation": False})["topics"] == []


@pytest.mark.parametrize("which,version", [r for r in references(3) if r[1] >= 10])
def test_metadata_by_topic_id(diff, which, version):
    d = diff(which)
    name = f"md-id-{which}-{version}"
    d.create_topics(name, partitions=2)
    d.same(3, version, {"topics": _metadata_names([name], version),
                        "allow_auto_topic_creation": False})
    if version < 12:
        return
    by_id = lambda side: {"topics": [{"name": None, "topic_id": side.topic_ids[name]}],  # noqa: E731
                          "allow_auto_topic_creation": False}
    answer = d.same(3, version, by_id)
    assert answer["topics"][0]["name"] == name
    unknown = {"topics": [{"name": None, "topic_id": uuid.UUID(int=12345)}],
               "allow_auto_topic_creation": False}
    assert d.same(3, version, unknown)["topics"][0]["error_code"] == 100  # UNKNOWN_TOPIC_ID


@pytest.mark.parametrize("which,version", references(3))
def test_metadata_auto_create(diff, which, version):
    """The Metadata that creates a topic is answered UNKNOWN_TOPIC_OR_PARTITION
    with no partitions, as Kafka (KRaft) answers it while its controller
    creates the topic; the next one lists the topic, on both."""
    d = diff(which)
    name = f"md-auto-{which}-{version}"
    body = {"topics": _metadata_names([name], version), "allow_auto_topic_creation": True}
    first = d.same(3, version, body)
    assert first["topics"][0]["error_code"] == 3 and first["topics"][0]["partitions"] == []
    d.wait_for_topics(d.kafka, [name])
    again = d.same(3, version, body)
    assert again["topics"][0]["error_code"] == 0


# -- CreateTopics ------------------------------------------------------------------


def test_create_topics_segment_bytes_floor_as_kafka_4_4(diff):
    """Kafka 4.x refuses segment.bytes below 1 MiB (3.9: below 14); its internal
    internal.segment.bytes takes small sizes, for tests, and is not listed."""
    d = diff("main")
    topics = [_topic("ct-seg-1", 1, configs=[("segment.bytes", "1")]),
              _topic("ct-seg-below", 1, configs=[("segment.bytes", "1048575")]),
              _topic("ct-seg-floor", 1, configs=[("segment.bytes", "1048576")]),
              _topic("ct-seg-internal", 1, configs=[("internal.segment.bytes", "1024")])]
    answer = _create(d, 4, *topics)
    assert [t["error_code"] for t in answer["topics"]] == [40, 40, 0, 0]
    d.wait_for_topics(d.kafka, ["ct-seg-floor", "ct-seg-internal"])
    # (the config lists of v5+ are Kafka 4.4's, compared in test_differential_alter_configs)
    keys = ["segment.bytes", "internal.segment.bytes"]
    for name in ("ct-seg-floor", "ct-seg-internal"):
        d.same(32, 4, {"resources": [{"resource_type": 2, "resource_name": name,
                                      "configuration_keys": keys}],
                       "include_synonyms": True, "include_documentation": False})
    _create(d, 4, _topic("ct-seg-alter", 1))
    d.wait_for_topics(d.kafka, ["ct-seg-alter"])
    for value in ("1000", "1048576"):
        d.same(44, 1, {"resources": [{"resource_type": 2, "resource_name": "ct-seg-alter",
                                      "configs": [{"name": "segment.bytes",
                                                   "config_operation": 0, "value": value}]}],
                       "validate_only": True})


def _list_item_cases(tag):
    """An empty item of a list: refused as Kafka 4 words it (its ``ValidList``),
    and at v0-1 as Kafka 3.9 does."""
    return [_topic(f"ct-{tag}-{label}", 1, configs=[("cleanup.policy", value)])
            for label, value in (("list-gap", "compact,,delete"), ("list-trail", "delete,"),
                                 ("list-lead", ",delete"), ("list-commas", ","),
                                 ("list-twice-gap", "delete,,delete"),
                                 ("list-bad-first", "Compact,,delete"))]


def _reject_cases(tag):
    return [
        _topic(f"ct-{tag}-zero", 0),
        _topic(f"ct-{tag}-rf2", 1, 2),
        _topic(f"ct-{tag}-rf0", 1, 0),
        _topic(f"ct-{tag}-unknown-config", 1, configs=[("no.such.config", "1")]),
        _topic(f"ct-{tag}-policy", 1, configs=[("cleanup.policy", "bogus")]),
        _topic(f"ct-{tag}-ratio", 1, configs=[("min.cleanable.dirty.ratio", "2")]),
        _topic(f"ct-{tag}-retention", 1, configs=[("retention.ms", "-5")]),
        _topic(f"ct-{tag}-int", 1, configs=[("segment.bytes", "x")]),
        _topic(f"ct-{tag}-underscores", 1, configs=[("segment.bytes", "1_048_576")]),
        _topic(f"ct-{tag}-bool", 1, configs=[("preallocate", "yes")]),
        _topic(f"ct-{tag}-ts-type", 1, configs=[("message.timestamp.type", "Now")]),
        _topic(f"ct-{tag}-gzip", 1, configs=[("compression.gzip.level", "0")]),
        _topic(f"ct-{tag}-remote", 1, configs=[("remote.storage.enable", "true")]),
        _topic(f"ct-{tag}-assign-other-broker", -1, -1,
               assignments=[{"partition_index": 0, "broker_ids": [2]}]),
        _topic("bad name!"),
        _topic("a" * 250),
        _topic("."),
        _topic(".."),
        _topic(""),
        _topic("__consumer_offsets"),
    ]


def newest_reference(key: int) -> list[tuple[str, int]]:
    """(reference, version) pairs: each served version against Kafka 4.4 where it
    serves it, else against Kafka 3.9."""
    low, high = MAIN_RANGES[key]
    return [("main" if low <= v <= high else "legacy", v) for v in versions(key)]


@pytest.mark.parametrize("which,version", newest_reference(19))
def test_create_topics_errors_match_kafka(diff, which, version):
    d = diff(which)
    cases = _reject_cases(f"v{version}") + _list_item_cases(f"v{version}")
    answer = _create(d, version, *cases)
    assert len(answer["topics"]) == len(cases)
    assert all(t["error_code"] != 0 for t in answer["topics"])


@pytest.mark.parametrize("which,version", newest_reference(19))
def test_create_topics_success_existing_and_validate_only(diff, which, version):
    d = diff(which)
    name = f"ct-ok-v{version}"
    # (values as a user may write them: the answer echoes each one as written)
    configs = [("cleanup.policy", "compact , delete"), ("retention.ms", " +1000"),
               ("compression.type", "zstd "), ("max.message.bytes", "05000"),
               ("compression.zstd.level", "5"), ("segment.jitter.ms", "10"),
               ("preallocate", "TRUE"), ("min.cleanable.dirty.ratio", "5e-1")]
    assert _create(d, version, _topic(f"{name}-dry", 4, configs=configs),
                   validate_only=version >= 1)["topics"][0]["error_code"] == 0
    created = _create(d, version, _topic(name, 2, configs=configs),
                      _topic(f"{name}-assigned", -1, -1,
                             assignments=[{"partition_index": 0, "broker_ids": [1]},
                                          {"partition_index": 1, "broker_ids": [1]}]))
    assert [t["error_code"] for t in created["topics"]] == [0, 0]
    again = _create(d, version, _topic(name, 2))
    assert again["topics"][0]["error_code"] == 36  # TOPIC_ALREADY_EXISTS
    if version >= 1:
        dup = _create(d, version, _topic(f"{name}-dup"), _topic(f"{name}-dup"))
        assert dup["topics"][0]["error_code"] == 42


@pytest.mark.parametrize("which,version", [("legacy", 0), ("main", 4), ("main", 5),
                                           ("main", 7)])
def test_create_topics_batch_limits_match_kafka(diff, which, version):
    """Kafka's controller refuses a request for more than 10,000 partitions, or one
    that would write more than 10,000 metadata records, as a whole with
    POLICY_VIOLATION, validate-only or not."""
    d = diff(which)
    tag = f"ct-limit-v{version}"
    validate = version >= 1
    cases = [
        [_topic(f"{tag}-huge", 1_000_000)],
        [_topic(f"{tag}-max", 2**31 - 1)],
        [_topic(f"{tag}-records", 10_000)],
        [_topic(f"{tag}-b", 5_000), _topic(f"{tag}-c", 5_000)],
        [_topic(f"{tag}-d", 4_999), _topic(f"{tag}-e", 5_000)],
        [_topic(f"{tag}-conf", 9_998, configs=[("retention.ms", "1"), ("segment.ms", "100")])],
        [_topic("bad name!", 1), _topic(f"{tag}-f", 10_000)],
    ]
    for topics in cases:
        answer = _create(d, version, *topics, validate_only=validate)
        assert any(t["error_code"] == 44 for t in answer["topics"]), topics
    # A name given twice is refused on its own and does not count.
    dup = _create(d, version, _topic(f"{tag}-g", 6_000), _topic(f"{tag}-g", 6_000),
                  _topic(f"{tag}-h", 1), validate_only=validate)
    assert sorted(t["error_code"] for t in dup["topics"]) == [0, 42]
    if validate:  # (at v0 it would really make 9,999 partitions on both brokers)
        fits = _create(d, version, _topic(f"{tag}-fits", 9_999), validate_only=True)
        assert fits["topics"][0]["error_code"] == 0


@pytest.mark.parametrize("which", ["main", "legacy"])
def test_internal_names_are_created_and_deleted_as_kafka_does(diff, which):
    """``__transaction_state`` and ``__share_group_state``: unknown but flagged
    internal in Metadata, created by CreateTopics with any settings and deleted
    by DeleteTopics.  (Kafka's Metadata auto-creation makes these with their
    internal settings; kcoord, which serves no transactions, does not: neither
    is asked here.)"""
    d = diff(which)
    names = ["__transaction_state", "__share_group_state"]
    meta = {"topics": _metadata_names(names, 9), "allow_auto_topic_creation": False}
    answer = d.same(3, 9, meta)
    assert {(t["name"], t["is_internal"], t["error_code"]) for t in answer["topics"]} == {
        (n, True, 3) for n in names}
    if which != "main":
        return  # (Kafka 4.x is the reference for the controller's side)
    created = _create(d, 4, _topic("__transaction_state", 2,
                                   configs=[("cleanup.policy", "delete")]))
    assert created["topics"][0]["error_code"] == 0
    d.wait_for_topics(d.kafka, ["__transaction_state"])
    deleted = d.same(20, 4, {"topic_names": ["__transaction_state"], "timeout_ms": 10000})
    assert deleted["responses"][0]["error_code"] == 0


# -- DeleteTopics --------------------------------------------------------------------


@pytest.mark.parametrize("which,version", references(20))
def test_delete_topics_by_name_and_id(diff, which, version):
    d = diff(which)
    name = f"dt-{which}-{version}"
    d.create_topics(name, f"{name}-b")
    if version >= 6:
        d.same(3, 12, {"topics": _metadata_names([f"{name}-b"], 12),
                       "allow_auto_topic_creation": False})
        body = lambda side: {"topics": [  # noqa: E731
            {"name": name, "topic_id": uuid.UUID(int=0)},
            {"name": None, "topic_id": side.topic_ids[f"{name}-b"]},
            {"name": None, "topic_id": uuid.UUID(int=777)},
            {"name": f"{name}-missing", "topic_id": uuid.UUID(int=0)},
        ], "timeout_ms": 10000}
    else:
        body = {"topic_names": [name, f"{name}-b", f"{name}-missing"], "timeout_ms": 10000}
    answer = d.same(20, version, body)
    assert sorted(r["error_code"] for r in answer["responses"])[0] == 0
    missing = {"topic_names": [name], "topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
               "timeout_ms": 10000}
    assert d.same(20, version, missing)["responses"][0]["error_code"] == 3


# -- DescribeConfigs -----------------------------------------------------------------


@pytest.mark.parametrize("which,version", newest_reference(32))
def test_describe_configs_topic(diff, which, version):
    d = diff(which)
    name = f"dc-v{version}"
    _create(d, 4, _topic(name, 1, configs=[("retention.ms", "1234"),
                                           ("cleanup.policy", "compact,delete")]))
    d.wait_for_topics(d.kafka, [name])
    for synonyms in (False, True):
        for docs in (False, True):
            for keys in (None, ["retention.ms", "segment.bytes", "no.such.config"]):
                d.same(32, version, {"resources": [
                    {"resource_type": 2, "resource_name": name, "configuration_keys": keys},
                    {"resource_type": 2, "resource_name": f"{name}-missing",
                     "configuration_keys": None},
                    {"resource_type": 2, "resource_name": "bad name!", "configuration_keys": None},
                ], "include_synonyms": synonyms, "include_documentation": docs})


_SECURITY_SET_AT_START = {
    name for name in BROKER_CONFIGS if name.startswith(("ssl.", "sasl."))} | {
    "connections.max.reauth.ms", "connection.failed.authentication.delay.ms"}


@pytest.mark.parametrize("which,version", newest_reference(32))
def test_describe_configs_broker_answers_kafka_values_for_what_kcoord_knows(diff, which, version):
    """Kafka lists every one of its hundreds of broker properties; kcoord lists the
    ones it implements (docs/deviations.md). Each one kcoord lists must be one
    Kafka lists, with the same value, source, synonyms, type and read-only flag."""
    d = diff(which)
    body = {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
            "include_synonyms": version >= 1, "include_documentation": False}
    ours, theirs = d.ask(32, version, body)
    mine = {c["name"]: c for c in ours["results"][0]["configs"]}
    kafkas = {c["name"]: c for c in theirs["results"][0]["configs"]}
    # group.consumer.migration.policy is internal in Kafka 3.9, public in 4.x
    assert set(mine) - set(kafkas) <= {"kcoord.fsync.policy", "kcoord.transaction.version",
                                       "kcoord.offsets.topic.min.compaction.lag.ms",
                                       "group.consumer.migration.policy"}
    assert len(kafkas) > 2 * len(mine)
    # writable: what kcoord changes at run time, as Kafka (compared below), but
    # listeners, which kcoord binds once (docs/deviations.md)
    with WireClient.to(d.kcoord.bootstrap) as client:
        raw = client.call(32, version, body)["results"][0]["configs"]
    assert {c["name"] for c in raw if not c["read_only"]} == \
        DYNAMIC_BROKER_CONFIGS & {c["name"] for c in raw}
    assert next(c for c in raw if c["name"] == "listeners")["read_only"]
    for configs in (mine, kafkas):
        for name, entry in configs.items():
            if name in _DYNAMIC_IN_39_ONLY:
                entry["read_only"] = "<dynamic in 3.9, not in 4.x>"
            if name in _SECURITY_SET_AT_START:
                # Kafka reloads them at run time; kcoord builds its listeners'
                # security once (docs/deviations.md)
                entry["read_only"] = "<set at start>"
            if name in ("listeners", "advertised.listeners", "log.dirs", "log.dir"):
                # Each broker's own addresses and folders (the reference sets
                # advertised.listeners; kcoord's default advertises the listener).
                entry.update(value="<own>", synonyms=[], config_source="<own>")
            if name == "node.id":
                # Kafka has no default node id (KRaft requires one); kcoord's is 1.
                entry["synonyms"] = entry["synonyms"][:1]
    # Kafka 4.4 made the coordinator's append linger adaptive (its default -1,
    # KIP-1224, kcoord's too); 3.9's default was 10 ms.  The consumer group
    # protocol's migration policy and assignment interval are public from 4.x on,
    # and its assignors' default names them ("uniform,range").
    # Those are asked of Kafka 4.4 (which serves no DescribeConfigs v0) as well.
    newer = {"group.coordinator.append.linger.ms", "group.consumer.migration.policy",
             "group.consumer.assignment.interval.ms", "group.consumer.assignors"}
    # The kcoord beside Kafka 3.9 is told to serve 3.9's protocols (classic only);
    # Kafka 4.4 serves streams groups too, which kcoord does not.
    own = newer | {"group.coordinator.rebalance.protocols"}
    theirs["results"][0]["configs"] = [kafkas[n] for n in mine if n in kafkas and n not in own]
    ours["results"][0]["configs"] = [mine[n] for n in mine if n in kafkas and n not in own]
    found = differences(ours, theirs)
    assert not found, "\n".join(found)
    body["resources"][0]["configuration_keys"] = sorted(newer)
    ours, theirs = diff("main").ask(32, max(version, 1), body)
    assert [c["name"] for c in ours["results"][0]["configs"]] == sorted(newer)
    found = differences(ours, theirs)
    assert not found, "\n".join(found)
    # what may change at run time: as Kafka 4.4 says, but listeners (normalized)
    body["resources"][0]["configuration_keys"] = None
    ours, theirs = diff("main").ask(32, max(version, 1), body)
    writable = [{c["name"]: c["read_only"] for c in answer["results"][0]["configs"]}
                for answer in (ours, theirs)]
    common = set(writable[0]) & set(writable[1]) - _SECURITY_SET_AT_START
    assert {n: writable[0][n] for n in common} == {n: writable[1][n] for n in common}
    assert all(writable[0][n] for n in _SECURITY_SET_AT_START & set(writable[0]))
    assert set(writable[0]) - set(writable[1]) == {
        "kcoord.fsync.policy", "kcoord.transaction.version",
        "kcoord.offsets.topic.min.compaction.lag.ms"}


# Broker properties Kafka 3.9 changes at run time and 4.x no longer does; kcoord
# follows 4.x (compared with it above).
_DYNAMIC_IN_39_ONLY = {"advertised.listeners"}


def test_describe_configs_documentation_is_not_kafkas(reference_pair):
    """Kafka's config descriptions are its own text; kcoord answers null for them
    and its own line for its own property (docs/deviations.md)."""
    kcoord, ref = reference_pair("legacy")
    body = {"resources": [{"resource_type": 4, "resource_name": "1",
                           "configuration_keys": ["log.segment.bytes", "kcoord.fsync.policy"]}],
            "include_synonyms": False, "include_documentation": True}
    with WireClient.to(kcoord.bootstrap) as ours, WireClient.to(ref.bootstrap) as theirs:
        mine = {c["name"]: c["documentation"] for c in ours.call(32, 4, body)["results"][0]["configs"]}
        kafkas = {c["name"]: c["documentation"]
                  for c in theirs.call(32, 4, body)["results"][0]["configs"]}
    assert mine["log.segment.bytes"] is None and kafkas["log.segment.bytes"]
    assert mine["kcoord.fsync.policy"] and "kcoord.fsync.policy" not in kafkas


@pytest.mark.parametrize("which,version", newest_reference(32))
def test_describe_configs_named_broker_keys_and_bad_resources(diff, which, version):
    d = diff(which)
    d.same(32, version, {"resources": [
        {"resource_type": 4, "resource_name": "1",
         "configuration_keys": ["num.partitions", "log.segment.bytes", "auto.create.topics.enable",
                                "no.such.property"]},
        {"resource_type": 4, "resource_name": "7", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "", "configuration_keys": None},
    ], "include_synonyms": True})
    unknown_type = d.same(32, version, {"resources": [
        {"resource_type": 2, "resource_name": "__consumer_offsets", "configuration_keys": None},
        {"resource_type": 99, "resource_name": "x", "configuration_keys": None},
    ]})
    assert [r["error_code"] for r in unknown_type["results"]] == [42, 42]


@pytest.mark.parametrize("version", [1, 4])
def test_describe_configs_with_an_empty_key_list_lists_every_config(diff, version):
    """An empty ``configuration_keys`` is no filter, as null (Kafka's ConfigHelper):
    every config of a topic, a group and the broker."""
    d = diff("main")
    topic = f"dc-all-v{version}"
    d.create_topics(topic)

    def body(resource_type, name, keys):
        return {"resources": [{"resource_type": resource_type, "resource_name": name,
                               "configuration_keys": keys}],
                "include_synonyms": True, "include_documentation": False}

    for resource_type, name in ((2, topic), (32, "dc-all-group"), (4, "1")):
        if resource_type == 4:  # kcoord lists the broker configs it has (docs/deviations.md)
            for side in (d.kcoord, d.kafka):
                with WireClient.to(side.bootstrap) as client:
                    every = client.call(32, version, body(4, "1", None))
                    assert client.call(32, version, body(4, "1", [])) == every
                    assert len(every["results"][0]["configs"]) > 100
            continue
        every = d.same(32, version, body(resource_type, name, None))
        assert d.same(32, version, body(resource_type, name, [])) == every
        assert len(every["results"][0]["configs"]) > 20


def test_broker_logger_levels_change_as_on_kafka(diff):
    """IncrementalAlterConfigs of a BROKER_LOGGER (kafka-configs --entity-type
    broker-loggers): the root's level set and described as on Kafka 4.4, and every
    refusal worded as Kafka's (the other loggers are each broker's own)."""
    d = diff("main")

    def describe(keys=("root",), version=4):
        return d.same(32, version, {"resources": [
            {"resource_type": 8, "resource_name": "1", "configuration_keys": list(keys)}],
            "include_synonyms": True, "include_documentation": True})

    def alter(*configs, name="1", validate_only=False):
        return d.same(44, 1, {"resources": [{"resource_type": 8, "resource_name": name,
                                             "configs": [{"name": n, "config_operation": op,
                                                          "value": v} for n, op, v in configs]}],
                              "validate_only": validate_only})["responses"][0]["error_code"]

    found = {}  # each side's root level, put back at the end
    for side in (d.kcoord, d.kafka):
        with WireClient.to(side.bootstrap) as client:
            found[side.name] = client.call(32, 4, {"resources": [
                {"resource_type": 8, "resource_name": "1", "configuration_keys": ["root"]}],
                "include_synonyms": False, "include_documentation": False},
            )["results"][0]["configs"][0]["value"]
    try:
        for refused in [
            [("root", 0, "LOUD")], [("root", 0, "debug")], [("root", 0, "ALL")],
            [("root", 0, "OFF")], [("root", 0, None)], [("root", 1, None)],
            [("root", 2, "DEBUG")], [("root", 3, "DEBUG")], [("no.such.logger", 0, "DEBUG")],
            [("no.such.logger", 1, None)], [("no.such.logger", 2, "DEBUG")],
            [("root", 0, "INFO"), ("root", 0, "WARN")],
        ]:
            assert alter(*refused) != 0, refused
        for name in ("2", "+7", "", "one", "99999999999", "1" * 5000):
            assert alter(("root", 0, "INFO"), name=name) == 42
        # the keys are checked before the node id
        assert alter(("root", 0, "INFO"), ("root", 0, "WARN"), name="2") == 42
        for resource_type in (4, 8):  # DescribeConfigs: ConfigHelper's words for the name
            answer = d.same(32, 4, {"resources": [
                {"resource_type": resource_type, "resource_name": name,
                 "configuration_keys": ["num.partitions"]}
                for name in ("7", "", "x", "01", "+1", "99999999999", "1" * 5000,
                             "0" * 4400 + "1")],
                "include_synonyms": False, "include_documentation": False})
            assert [r["error_code"] for r in answer["results"]] == \
                [42, 0 if resource_type == 4 else 42, 42, 0, 0, 42, 42, 0]
        d.same(33, 2, {"resources": [{"resource_type": 8, "resource_name": "1", "configs": [
            {"name": "root", "value": "INFO"}]}], "validate_only": False})
        for level, name in (("FATAL", "1"), ("TRACE", "01"), ("WARN", "+1")):
            assert alter(("root", 0, level), name=name) == 0
            for version in (1, 4):  # (Kafka 4.4 serves no v0)
                assert describe(version=version)["results"][0]["configs"][0]["value"] == level
        assert alter(("root", 0, "DEBUG"), validate_only=True) == 0
        assert describe()["results"][0]["configs"][0]["value"] == "WARN"
    finally:
        for side in (d.kcoord, d.kafka):
            with WireClient.to(side.bootstrap) as client:
                client.call(44, 1, {"resources": [{"resource_type": 8, "resource_name": "1",
                                                   "configs": [{"name": "root",
                                                                "config_operation": 0,
                                                                "value": found[side.name]}]}],
                                    "validate_only": False})


# -- DescribeCluster -----------------------------------------------------------------


@pytest.mark.parametrize("which,version", references(60))
def test_describe_cluster(diff, which, version):
    d = diff(which)
    for endpoint_type in (1, 2, 3):
        if version == 0 and endpoint_type != 1:
            continue
        for include in (False, True):
            for fenced in (False, True):
                d.same(60, version, {"include_cluster_authorized_operations": include,
                                     "endpoint_type": endpoint_type,
                                     "include_fenced_brokers": fenced})

