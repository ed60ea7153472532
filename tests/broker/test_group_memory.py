"""What a classic group's members hold alike (client id, host, protocol type and
names, a subscription) is held once, not once per member: each JoinGroup decodes
its own copy, and a broker with thousands of members kept them all.  Groups that
subscribe alike share their set of topics, members their timeouts.  A Stable
group holds no set of its own for pending members or syncs, nor a mapping of
static members while it has none."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from kcoord.protocol.client import WireClient
from tests.broker.group_harness import Harness, subscription
from tests.support import BrokerThread


def _join_and_sync(port: int, group: str, instance: str) -> None:
    with WireClient("127.0.0.1", port, client_id="same-client") as client:
        joined = client.call(11, 9, {
            "group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000,
            "member_id": "", "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription("t")}], "reason": None})
        assert joined["error_code"] == 0
        member = joined["member_id"]
        synced = client.call(14, 5, {
            "group_id": group, "generation_id": joined["generation_id"], "member_id": member,
            "group_instance_id": instance, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": b"\x00" * 40}]})
        assert synced["error_code"] == 0


def test_members_share_the_strings_they_hold_alike(tmp_path):
    with BrokerThread(tmp_path) as node:
        for group, instance in (("first", "a"), ("second", "b")):
            _join_and_sync(node.port, group, instance)

        def groups():
            service = node.broker.groups
            return [service.runtime.shard(service.partition_for(group_id))
                    .membership.groups[group_id] for group_id in ("first", "second")]

        first, second = node.call(groups)
        assert first.state.value == second.state.value == "Stable"
        # Nothing pending once Stable: no set of either group's own.
        assert first.pending_sync is second.pending_sync and not first.pending_sync
        assert first.pending_members is second.pending_members and not first.pending_members
        [one], [two] = first.members.values(), second.members.values()
        assert one.client_id == "same-client" and one.client_id is two.client_id
        assert one.client_host is two.client_host
        assert one.protocol_type is two.protocol_type
        assert one.protocols[0][0] is two.protocols[0][0]
        assert one.protocols[0][1] == two.protocols[0][1]
        assert first.subscribed == {"t"} and first.subscribed is second.subscribed
        # Each request decodes its own 30,000: one object is kept for both.
        assert one.session_timeout_ms == two.session_timeout_ms == 30_000
        assert one.session_timeout_ms is two.session_timeout_ms
        assert one.rebalance_timeout_ms is two.rebalance_timeout_ms


def test_members_that_subscribe_alike_share_one_list_of_protocols():
    h = Harness()
    first, second = h.stable_group("g", 2)
    group = h.core.groups["g"]
    one, two = group.members.values()
    assert one.protocols == two.protocols and one.protocols is two.protocols
    # Still after a rebalance, where each joins again with a new copy.
    h.join("g", first)
    h.join("g", second)
    assert group.generation == 2 and one.protocols is two.protocols
    # A member subscribing otherwise keeps its own, and so does one that changes.
    other, _ticket = h.join_new("g", protocols=[("range", subscription("u"))])
    assert group.members[other].protocols == [("range", subscription("u"))]
    assert group.members[other].protocols is not one.protocols
    assert one.protocols == [("range", subscription("t"))]


def test_a_group_without_static_members_holds_no_mapping_of_its_own():
    h = Harness()
    h.stable_group("a", 2)
    h.stable_group("b", 1)
    a, b = h.core.groups["a"], h.core.groups["b"]
    assert a.static_members == {} and a.static_members is b.static_members
    # The shared one is read-only: a bug writing into it cannot reach other groups.
    for write in (lambda m: m.__setitem__("i", "m"), lambda m: m.update(i="m"),
                  lambda m: m.setdefault("i", "m")):
        with pytest.raises(TypeError):
            write(a.static_members)
    assert b.static_members == {}
    # A group copies and pickles as any other (the copy shares the empty mapping).
    assert pickle.loads(pickle.dumps(b)).static_members is b.static_members
    assert copy.deepcopy(b) == b and json.dumps(b.static_members) == "{}"
    # A static member gives its group a mapping of its own, until it leaves.
    ticket = h.join("a", instance="i1")
    h.advance(30_000)
    static = h.answer(ticket)["member_id"]
    assert a.static_members == {"i1": static} and b.static_members == {}
    assert h.leave("a", (static, "i1", None))[0] == 0
    assert a.static_members == {} and a.static_members is b.static_members
    # Renewed: the next static member has a mapping of its own again.
    ticket = h.join("a", instance="i2")
    h.advance(30_000)
    assert a.static_members == {"i2": h.answer(ticket)["member_id"]}
    assert b.static_members == {}


def test_empty_consumer_groups_share_their_empty_subscription():
    h = Harness()
    for group in ("a", "b"):
        [member] = h.stable_group(group, 1)
        h.leave(group, member)
    a, b = h.core.groups["a"], h.core.groups["b"]
    assert a.state.value == b.state.value == "Empty"
    assert a.subscribed_topics() == frozenset()
    assert a.subscribed_topics() is b.subscribed_topics()


def test_the_numbers_kept_for_sharing_are_bounded(monkeypatch):
    from kcoord.broker.groups import group as G
    monkeypatch.setattr(G, "_SHARED_NUMBERS", {})
    monkeypatch.setattr(G, "SHARED_MAX", 2)
    first = G.shared_number(int("45000"))
    assert G.shared_number(int("45000")) is first
    G.shared_number(int("30000"))
    late = int("60000")
    assert G.shared_number(late) is late and len(G._SHARED_NUMBERS) == 2
    assert G.shared_number(int("60000")) is not late


def test_the_strings_kept_for_sharing_are_bounded(monkeypatch):
    # Clients choose these strings: a client sending new ones again and again
    # must not grow what the broker keeps.
    from kcoord.broker.groups import group as G
    monkeypatch.setattr(G, "_SHARED", {})
    monkeypatch.setattr(G, "SHARED_MAX", 3)
    first = G.shared("".join(["client-", "a"]))
    assert G.shared("".join(["client-", "a"])) is first
    for name in ("b", "c", "d", "e"):
        G.shared("client-" + name)
    assert len(G._SHARED) == 3
    late = "".join(["client-", "e"])
    assert G.shared(late) is late and G.shared("".join(["client-", "e"])) is not late
    long = "x" * (G.SHARED_CHARS + 1)
    assert G.shared(long) is long and long not in G._SHARED
    assert G.shared(None) is None
    # Sets of topic names: only small ones, of short names, and within the bound.
    # (a table of their own: subscriptions never crowd out the strings)
    monkeypatch.setattr(G, "_SHARED_TOPICS", {})
    topics = G.shared_topics({"orders", "payments"})
    assert G.shared_topics({"payments", "orders"}) is topics and len(G._SHARED) == 3
    many = {f"t{i}" for i in range(G.SHARED_TOPICS + 1)}
    assert G.shared_topics(many) == many and frozenset(many) not in G._SHARED_TOPICS
    assert G.shared_topics({long}) == {long} and frozenset({long}) not in G._SHARED_TOPICS
    monkeypatch.setattr(G, "SHARED_MAX", 1)
    assert G.shared_topics({"audit"}) == {"audit"} and len(G._SHARED_TOPICS) == 1
