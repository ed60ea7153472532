"""Client quotas: set and described as Kafka's ClientQuotaControlManager and
ClientQuotasImage do, kept across a restart, and enforced: a client over its
byte rate is answered a throttle time and its connection muted meanwhile."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from kcoord.broker.security.quotas import FETCH, PRODUCE, ClientQuotas
from kcoord.protocol.client import WireClient

INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35


def _entity(**kinds):
    return [{"entity_type": k.replace("_", "-"), "entity_name": v} for k, v in kinds.items()]


def _alter(client, *entries, validate_only=False):
    answer = client.call(49, 1, {"entries": [
        {"entity": entity, "ops": [{"key": k, "value": v if v is not None else 0.0,
                                    "remove": v is None} for k, v in ops.items()]}
        for entity, ops in entries], "validate_only": validate_only})
    return [(e["error_code"], e["error_message"]) for e in answer["entries"]]


def _describe(client, components, strict=False):
    return client.call(48, 1, {"components": components, "strict": strict})


def _as_dict(answer):
    return {tuple((e["entity_type"], e["entity_name"]) for e in entry["entity"]):
            {v["key"]: v["value"] for v in entry["quota_values"]}
            for entry in answer["entries"] or []}


def test_quotas_are_set_checked_described_and_kept(make_broker, tmp_path):
    node = make_broker(data_dir=tmp_path / "d")
    with WireClient.to(node.bootstrap) as client:
        assert _alter(client,
                      (_entity(user="alice"), {"producer_byte_rate": 1024.0}),
                      (_entity(user=None), {"consumer_byte_rate": 2048.0}),
                      (_entity(user="alice", client_id="app"), {"request_percentage": 50.5}),
                      (_entity(client_id=None), {"producer_byte_rate": 4096.0})) == [
            (0, None)] * 4
        refused = _alter(client,
                         (_entity(user="bob"), {"bogus": 1.0}),
                         (_entity(user="bob2"), {"producer_byte_rate": 0.0}),
                         (_entity(user="bob3"), {"producer_byte_rate": 1.5}),
                         ([], {"producer_byte_rate": 1.0}),
                         (_entity(user=""), {"producer_byte_rate": 1.0}),
                         (_entity(ip="10.0.0.1", user="bob"), {"producer_byte_rate": 1.0}))
        assert refused == [
            (INVALID_REQUEST, "Invalid configuration key bogus"),
            (INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0"),
            (INVALID_REQUEST, "producer_byte_rate cannot be a fractional value."),
            (INVALID_REQUEST, "Invalid empty client quota entity"),
            (INVALID_REQUEST, "Empty user not supported"),
            (INVALID_REQUEST, "Invalid quota entity combination, IP entity shouldnot be "
                              "combined with User or ClientId")]
        # an entity named twice: one answer
        assert _alter(client, (_entity(user="dan"), {"producer_byte_rate": 1.0}),
                      (_entity(user="dan"), {"consumer_byte_rate": 1.0})) == [
            (INVALID_REQUEST, "Ignoring duplicate entity")]
        assert _alter(client, (_entity(user="dan"), {"producer_byte_rate": None})) == [
            (0, None)]
        # validate_only changes nothing
        assert _alter(client, (_entity(user="carol"), {"producer_byte_rate": 1.0}),
                      validate_only=True) == [(0, None)]
        everything = _as_dict(_describe(client, []))
        assert everything == {
            (("user", "alice"),): {"producer_byte_rate": 1024.0},
            (("user", None),): {"consumer_byte_rate": 2048.0},
            (("client-id", "app"), ("user", "alice")): {"request_percentage": 50.5},
            (("client-id", None),): {"producer_byte_rate": 4096.0}}
        alice = _as_dict(_describe(client, [{"entity_type": "user", "match_type": 0,
                                             "match": "alice"}]))
        assert set(alice) == {(("user", "alice"),), (("client-id", "app"), ("user", "alice"))}
        strict = _as_dict(_describe(client, [{"entity_type": "user", "match_type": 0,
                                              "match": "alice"}], strict=True))
        assert set(strict) == {(("user", "alice"),)}
        defaults = _as_dict(_describe(client, [{"entity_type": "user", "match_type": 1,
                                                "match": None}]))
        assert set(defaults) == {(("user", None),)}
        clients = _as_dict(_describe(client, [{"entity_type": "client-id", "match_type": 2,
                                               "match": None}]))
        assert set(clients) == {(("client-id", "app"), ("user", "alice")),
                                (("client-id", None),)}
        bad = _describe(client, [{"entity_type": "group", "match_type": 2, "match": None}])
        assert (bad["error_code"], bad["error_message"]) == (
            UNSUPPORTED_VERSION, "Unsupported entity type group")
        # removing the last quota of an entity removes the entity
        assert _alter(client, (_entity(user=None), {"consumer_byte_rate": None})) == [(0, None)]
    node.stop()
    again = make_broker(data_dir=tmp_path / "d")
    with WireClient.to(again.bootstrap) as client:
        kept = _as_dict(_describe(client, []))
    assert set(kept) == {(("user", "alice"),), (("client-id", "app"), ("user", "alice")),
                         (("client-id", None),)}


def test_the_most_specific_quota_applies_and_throttles_by_kafka_s_formula(tmp_path):
    quotas = ClientQuotas(tmp_path, window_ms=1000, samples=11)
    quotas._set({
        '[["user", "alice"]]': {PRODUCE: 1000.0},
        '[["client-id", "app"], ["user", "alice"]]': {PRODUCE: 500.0},
        '[["client-id", null]]': {PRODUCE: 100.0, FETCH: 10.0}})
    assert quotas.quota_for("alice", "app", PRODUCE)[1] == 500.0
    assert quotas.quota_for("alice", "other", PRODUCE)[1] == 1000.0
    assert quotas.quota_for("bob", "other", PRODUCE)[1] == 100.0
    assert quotas.quota_for("bob", "other", "request_percentage") is None
    # 15,000 bytes at once against 1,000 bytes/s measured over 10 windows of
    # 1 s (the minimum span): rate 1,500/s, throttle (1500-1000)/1000 * 10 s
    assert quotas.record("alice", "other", PRODUCE, 15_000, now_ms=0) == 5_000
    # within the quota: no throttle
    assert quotas.record("carol", "x", FETCH, 50, now_ms=0) == 0
    # alice's quota is hers alone, shared by her client ids, not by bob
    assert quotas.record("alice", "second", PRODUCE, 1, now_ms=1) > 0
    assert quotas.record("bob", "other", PRODUCE, 1, now_ms=1) == 0


def test_a_producer_over_its_byte_rate_is_throttled(make_broker):
    node = make_broker()
    with WireClient.to(node.bootstrap) as client:
        assert _alter(client, (_entity(client_id="slow"), {"producer_byte_rate": 2048.0})) == [
            (0, None)]
    throttled = []
    producer = Producer({"bootstrap.servers": node.bootstrap, "client.id": "slow",
                         "linger.ms": 0, "throttle_cb": lambda event: throttled.append(
                             event.throttle_time)})
    deadline = time.monotonic() + 20
    for i in range(20):
        producer.produce("throttled", b"x" * 10_000)
        producer.flush(10)
        if throttled or time.monotonic() > deadline:
            break
    producer.poll(0.5)
    # librdkafka tells the application, as with Kafka
    assert throttled and max(throttled) > 0
    other = Producer({"bootstrap.servers": node.bootstrap, "client.id": "fast",
                      "throttle_cb": lambda event: throttled.append(("fast", event))})
    before = len(throttled)
    other.produce("throttled", b"y" * 10_000)
    assert other.flush(10) == 0
    other.poll(0.2)
    assert len(throttled) == before  # another client id has no quota


@pytest.mark.parametrize("version", [0, 1])
def test_quota_apis_answer_every_version(broker, version):
    with WireClient.to(broker.bootstrap) as client:
        answer = client.call(49, version, {"entries": [
            {"entity": _entity(user="v"), "ops": [
                {"key": "request_percentage", "value": 25.0, "remove": False}]}],
            "validate_only": True})
        assert answer["entries"][0]["error_code"] == 0
        described = client.call(48, version, {"components": [], "strict": False})
        assert described["error_code"] == 0


def test_a_client_over_its_request_percentage_is_throttled(make_broker):
    """request_percentage: the time a client's requests take on the event loop,
    as a percentage of one second; Metadata of many topics takes a client with a
    tiny quota over it, and the answer says how long to wait."""
    node = make_broker()
    with WireClient.to(node.bootstrap) as client:
        assert _alter(client, (_entity(client_id="busy"), {"request_percentage": 0.001})) == [
            (0, None)]
    for i in range(20):
        node.call(lambda i=i: node.broker.topics.create(f"many-{i}", 4, {}))
    throttle = 0
    with WireClient.to(node.bootstrap, client_id="busy") as busy:
        for _ in range(20):  # until the first throttled answer (the connection is muted then)
            throttle = busy.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})[
                "throttle_time_ms"]
            if throttle:
                break
    assert throttle > 0
    with WireClient.to(node.bootstrap, client_id="idle") as other:
        assert other.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})[
            "throttle_time_ms"] == 0


def test_rates_forget_windows_older_than_the_measured_span(tmp_path):
    """11 windows of 1 s: an amount recorded more than 11 s ago no longer
    counts; until 10 whole windows have passed the span is counted as 10 s."""
    quotas = ClientQuotas(tmp_path, window_ms=1000, samples=11)
    quotas._set({'[["client-id", "c"]]': {PRODUCE: 100.0}})
    assert quotas.record("u", "c", PRODUCE, 2_000, now_ms=0) == 10_000  # 200/s over 10 s
    # 5 s later: the same 2,000 bytes over the 10 s minimum span, plus 1
    assert quotas.record("u", "c", PRODUCE, 1, now_ms=5_000) == 10_009  # 200.1/s
    # 30 s later the first windows are gone: 1 byte over 10 s is under the quota
    assert quotas.record("u", "c", PRODUCE, 1, now_ms=30_000) == 0
    # past the minimum span the real one counts: 11 windows of 100 B over 12.5 s
    for second in range(40, 51):
        quotas.record("u", "c", PRODUCE, 100, now_ms=second * 1000)
    rate = quotas._rates[(PRODUCE, None, "c")]
    observed, window = rate.measure(51_500)
    assert (len(rate.starts), round(window), round(observed, 1)) == (11, 11_500, 95.7)
