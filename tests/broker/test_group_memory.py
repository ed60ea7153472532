"""What a classic group's members hold alike (client id, host, protocol type and
names) is held once, not once per member: each JoinGroup decodes its own copy of
those strings, and a broker with thousands of members kept them all."""

from __future__ import annotations

from kcoord.protocol.client import WireClient
from tests.broker.group_harness import subscription
from tests.support import BrokerThread


def _join(port: int, group: str, instance: str) -> dict:
    with WireClient("127.0.0.1", port, client_id="same-client") as client:
        return client.call(11, 9, {
            "group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000,
            "member_id": "", "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription("t")}], "reason": None})


def test_members_share_the_strings_they_hold_alike(tmp_path):
    with BrokerThread(tmp_path) as node:
        for group, instance in (("first", "a"), ("second", "b")):
            assert _join(node.port, group, instance)["error_code"] == 0

        def members():
            groups = node.broker.groups
            return [member for group_id in ("first", "second")
                    for member in groups.runtime.shard(groups.partition_for(group_id))
                    .membership.groups[group_id].members.values()]

        one, two = node.call(members)
        assert one.client_id == "same-client" and one.client_id is two.client_id
        assert one.client_host is two.client_host
        assert one.protocol_type is two.protocol_type
        assert one.protocols[0][0] is two.protocols[0][0]
        assert one.protocols[0][1] == two.protocols[0][1]
