"""Scripted raw-wire group sessions, played against kcoord and Apache Kafka at once.

A script names its connections ("a", "b" ...): each is one TCP connection per
broker.  A step is sent on both brokers, and its answers are normalized and
compared field by field.  A request may be sent now and its answer read later
(``send``/``receive``), for a JoinGroup parked until other members join.

Member ids are random on each broker (``<client id>-<UUID>``): the first one a
broker hands out becomes ``<member-0>`` on that side, the next ``<member-1>``,
and a request may name a member by its label, which each side translates back
to its own id.  So both brokers must hand out the same ids in the same order.
"""

from __future__ import annotations

import re
import time
from typing import Any

from kcoord.protocol.client import WireClient
from tests.reference.differential import Differential, Normalizer, Side, differences

_MEMBER_ID = re.compile(r"^.+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# the member ids a consumer group hands a classic member (Uuid.toString())
_CONSUMER_GROUP_MEMBER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")
_LABEL = re.compile(r"^<member-\d+>$")


def _member_order(answer: dict) -> dict:
    """Kafka keeps a group's members in a hash map: a JoinGroup leader's member list
    and a DescribeGroups member list come in no meaningful order.  Sorted by label
    (the order the members joined in)."""
    lists = [answer] + list(answer.get("groups") or [])
    for holder in lists:
        members = holder.get("members")
        if members and isinstance(members[0], dict) and "member_id" in members[0] \
                and "error_code" not in members[0]:
            holder["members"] = sorted(members, key=lambda m: m["member_id"])
    return answer


class _Actor:
    def __init__(self, side: Side):
        self.side = side
        self.conns: dict[str, WireClient] = {}
        self.labels: dict[str, str] = {}  # member id -> label
        self.ids: dict[str, str] = {}  # label -> member id

    def conn(self, name: str) -> WireClient:
        if name not in self.conns:
            self.conns[name] = WireClient.to(self.side.bootstrap, client_id=f"ref-{name}")
        return self.conns[name]

    def to_wire(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.to_wire(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.to_wire(v) for v in value]
        if isinstance(value, str) and _LABEL.match(value):
            return self.ids[value]
        return value

    def from_wire(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: self.from_wire(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.from_wire(v, key) for v in value]
        if isinstance(value, str) and (_MEMBER_ID.match(value) or (
                key == "member_id" and _CONSUMER_GROUP_MEMBER_ID.match(value))):
            if value not in self.labels:
                label = f"<member-{len(self.labels)}>"
                self.labels[value] = label
                self.ids[label] = value
            return self.labels[value]
        return value

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


class GroupScript:
    def __init__(self, d: Differential):
        self.actors = [_Actor(d.kcoord), _Actor(d.kafka)]
        self.kafka_name = d.kafka.name
        self._pending: dict[str, tuple[int, int]] = {}

    def __enter__(self) -> "GroupScript":
        return self

    def __exit__(self, *exc) -> None:
        for actor in self.actors:
            actor.close()

    def ready(self, *groups: str, timeout: float = 60) -> None:
        """Wait until each broker has loaded the ``__consumer_offsets`` partitions of
        these groups: Kafka answers COORDINATOR_LOAD_IN_PROGRESS for a while after
        a partition gets its leader."""
        body = {"require_stable": False, "groups": [
            {"group_id": g, "member_id": None, "member_epoch": -1, "topics": []}
            for g in groups]}
        for actor in self.actors:
            deadline = time.monotonic() + timeout
            while True:
                answer = actor.conn("ready").call(9, 8, body)
                if all(g["error_code"] == 0 for g in answer["groups"]):
                    break
                assert time.monotonic() < deadline, (actor.side.name, answer)
                time.sleep(0.05)

    def wait_state(self, group: str, state: str, timeout: float = 30) -> None:
        """Wait until both brokers show the group in ``state``: a request sent on
        one connection is not ordered with the next one sent on another."""
        for actor in self.actors:
            deadline = time.monotonic() + timeout
            while True:
                answer = actor.conn("ready").call(15, 0, {"groups": [group]})
                if answer["groups"][0]["group_state"] == state:
                    break
                assert time.monotonic() < deadline, (actor.side.name, answer)
                time.sleep(0.02)

    def send(self, conn: str, api_key: int, version: int, body) -> None:
        """``body``: a request, or a function of the side giving it (topic ids)."""
        for actor in self.actors:
            request = body(actor.side) if callable(body) else body
            actor.conn(conn).send(api_key, version, actor.to_wire(request))
        self._pending[conn] = (api_key, version)

    def receive(self, conn: str, *, compare: bool = True) -> dict:
        api_key, version = self._pending.pop(conn)
        answers = []
        for actor in self.actors:
            raw = actor.conn(conn).receive(api_key, version)
            answers.append(_member_order(actor.from_wire(Normalizer(actor.side)(api_key, raw))))
        ours, theirs = answers
        if compare:
            found = differences(ours, theirs)
            assert not found, (f"api {api_key} v{version} on {conn}: kcoord and "
                               f"{self.kafka_name} differ:\n  " + "\n  ".join(found))
        return ours

    def call(self, conn: str, api_key: int, version: int, body: dict, **kw) -> dict:
        self.send(conn, api_key, version, body)
        return self.receive(conn, **kw)

    def both(self, conn: str, api_key: int, version: int, body: dict) -> tuple[dict, dict]:
        """Both normalized answers, kcoord's first, for the test to compare itself."""
        self.send(conn, api_key, version, body)
        api_key, version = self._pending.pop(conn)
        return tuple(_member_order(actor.from_wire(Normalizer(actor.side)(
            api_key, actor.conn(conn).receive(api_key, version)))) for actor in self.actors)
