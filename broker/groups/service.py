"""The group coordinator's facade (Kafka's ``GroupCoordinatorService``): every
group handler calls one of its methods, and each goes to the coordinator
runtime (``broker.runtime``) for the shard of the group's
``__consumer_offsets`` partition.

Writes answer through a ticket (a future, often already done); reads and the
heartbeat answer at once.  Requests that span groups (ListGroups,
DeleteGroups, a deleted topic's offsets, the broker's stop) ask every shard
they concern and combine the answers, as Kafka's service fans them out.
"""

from __future__ import annotations

import asyncio

from kcoord.broker.groups.common import CoordinatorConfig, JoinRequest
from kcoord.broker.groups.coordinator import GroupCoordinator
from kcoord.broker.groups.group import Group
from kcoord.broker.groups.loader import load_partition
from kcoord.broker.groups.placement import Placement
from kcoord.broker.runtime.outcome import Outcome
from kcoord.broker.runtime.runtime import ADAPTIVE_LINGER, CoordinatorRuntime, PartitionState
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.layout import OFFSETS_TOPIC

PLACEMENT_CACHE = 100_000  # group ids whose partition is remembered


class GroupService:
    def __init__(self, broker, config: CoordinatorConfig | None = None, clock=None, *,
                 linger_ms: int = ADAPTIVE_LINGER, new_uuid=None):
        self.config = config or CoordinatorConfig()
        self._new_uuid = new_uuid
        self._broker = broker
        self.runtime = CoordinatorRuntime(
            broker, name="groups", topic=OFFSETS_TOPIC, partitions=self.config.partitions,
            new_shard=self._new_shard, load=load_partition, clock=clock, linger_ms=linger_ms)
        self._placement = Placement(self.config.partitions, PLACEMENT_CACHE)

    def _new_shard(self, partition: int, timers, now: int, refusal) -> GroupCoordinator:
        extra = {"new_uuid": self._new_uuid} if self._new_uuid is not None else {}
        shard = GroupCoordinator(self.config, now=now, partition=partition, timers=timers,
                                 refusal=refusal, **extra)
        topics = getattr(self._broker, "topics", None)
        if topics is not None:
            shard.consumer.metadata = topics  # the consumer groups' view of the topics
        return shard

    @property
    def loaded(self) -> asyncio.Event:
        return self.runtime.loaded

    def now(self) -> int:
        return self.runtime.now()

    def partition_for(self, group_id: str) -> int:
        return self._placement(group_id)

    def group(self, group_id: str) -> Group | None:
        """The group as its shard holds it (None if unknown or not served)."""
        return self.runtime.shard(self.partition_for(group_id)).groups.get(group_id)

    # -- one group ---------------------------------------------------------------------

    def join(self, request: JoinRequest) -> asyncio.Future:
        return self.runtime.write(self.partition_for(request.group_id), GroupCoordinator.join,
                                  request)

    def sync(self, group_id, generation, member_id, instance_id, protocol_type, protocol_name,
             assignments) -> asyncio.Future:
        return self.runtime.write(self.partition_for(group_id), GroupCoordinator.sync, group_id,
                                  generation, member_id, instance_id, protocol_type,
                                  protocol_name, assignments)

    def heartbeat(self, group_id, generation, member_id, instance_id) -> ErrorCode:
        partition = self.partition_for(group_id)
        code = self.runtime.read(partition, GroupCoordinator.heartbeat, group_id, generation,
                                 member_id, instance_id, self.now())
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            # a classic member of a consumer group may now have a join deadline
            self.runtime.run(partition, Outcome())
        return code

    def leave(self, group_id, members) -> tuple[ErrorCode, list[ErrorCode]]:
        partition = self.partition_for(group_id)
        code, errors, outcome = self.runtime.read(partition, GroupCoordinator.leave, group_id,
                                                  members, self.now())
        self.runtime.run(partition, outcome)
        return code, errors

    def commit(self, group_id, generation, member_id, instance_id, offsets, *, version,
               retention_ms) -> asyncio.Future:
        return self.runtime.write(self.partition_for(group_id), GroupCoordinator.commit,
                                  group_id, generation, member_id, instance_id, offsets,
                                  version=version, retention_ms=retention_ms)

    async def txn_commit(self, group_id, producer_id, producer_epoch, generation, member_id,
                         instance_id, offsets, version):
        """TxnOffsetCommit: ``{(topic, partition): error}`` once written."""
        partition = self.partition_for(group_id)
        await self._producers_loaded(partition)
        return await self.runtime.write(partition, GroupCoordinator.txn_commit, group_id,
                                        producer_id, producer_epoch, generation, member_id,
                                        instance_id, offsets, version)

    async def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int,
                                   commit: bool, coordinator_epoch: int) -> ErrorCode:
        """A transaction's end marker on one ``__consumer_offsets`` partition; while
        the broker stops, after the coordinator has resigned it, the marker is
        still appended (the next load replays it)."""
        await self._producers_loaded(partition)
        if self.runtime.state.get(partition) is PartitionState.UNLOADED:
            return await self.runtime.append_marker(partition, producer_id, producer_epoch,
                                                    commit, coordinator_epoch)
        return await self.runtime.write(partition, GroupCoordinator.complete_txn, producer_id,
                                        producer_epoch, commit, coordinator_epoch)

    async def _producers_loaded(self, partition: int) -> None:
        """Transactional writes need the partition's producer state: rebuilt in a
        worker after a restart, not on the event loop."""
        plog = self._broker.logs.get(OFFSETS_TOPIC, partition) if self._broker is not None \
            else None
        if plog is not None and not plog.producers_loaded:
            await plog.load_producer_state()

    def open_transaction(self, group_id: str, producer_id: int, producer_epoch: int) -> bool:
        """Whether the group's partition has the producer's transaction open."""
        plog = self._broker.logs.get(OFFSETS_TOPIC, self.partition_for(group_id))
        if plog is None or not plog.producers_loaded:
            return False
        entry = plog.producers.entry(producer_id)
        return entry is not None and entry.epoch == producer_epoch and \
            producer_id in plog.producers.ongoing

    def unstable_offsets(self, group_id: str) -> set:
        return self.runtime.read(self.partition_for(group_id), GroupCoordinator.unstable_offsets,
                                 group_id)

    def fetch_offsets(self, group_id, topics, member_id=None, member_epoch=-1):
        return self.runtime.read(self.partition_for(group_id), GroupCoordinator.fetch_offsets,
                                 group_id, topics, member_id, member_epoch)

    def describe(self, group_id) -> dict:
        return self.runtime.read(self.partition_for(group_id), GroupCoordinator.describe,
                                 group_id)

    def consumer_heartbeat(self, request) -> asyncio.Future:
        return self.runtime.write(self.partition_for(request.group_id),
                                  GroupCoordinator.consumer_heartbeat, request)

    def consumer_describe(self, group_ids, version) -> list[dict]:
        """ConsumerGroupDescribe: each group from its shard, in request order."""
        by_partition: dict[int, list[str]] = {}
        for group_id in dict.fromkeys(group_ids):
            by_partition.setdefault(self.partition_for(group_id), []).append(group_id)
        described = {}
        for partition, ids in by_partition.items():
            for entry in self.runtime.read(partition, GroupCoordinator.consumer_describe,
                                           ids, version):
                described[entry["group_id"]] = entry
        return [dict(described[g]) for g in group_ids]

    def delete_offsets(self, group_id, partitions) -> asyncio.Future:
        return self.runtime.write(self.partition_for(group_id), GroupCoordinator.delete_offsets,
                                  group_id, partitions)

    def writes_in_flight(self, group_ids) -> list[asyncio.Future]:
        """The writes not yet durable on these groups' partitions (OffsetFetch with
        require_stable waits for them, so it sees the commits being written)."""
        return self.runtime.writes_in_flight(self.partition_for(g) for g in group_ids)

    # -- several groups ----------------------------------------------------------------

    def list_groups(self, states, types) -> tuple[ErrorCode, list[dict]]:
        if self.runtime.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        return ErrorCode.NONE, [group for _p, shard in self.runtime.active()
                                for group in shard.list_groups(states, types)]

    def delete_groups(self, names) -> asyncio.Future:
        """``{group id: error}`` once every shard concerned has answered."""
        by_partition: dict[int, list[str]] = {}
        for name in names:
            by_partition.setdefault(self.partition_for(name), []).append(name)
        tickets = [self.runtime.write(p, GroupCoordinator.delete_groups, part)
                   for p, part in by_partition.items()]
        return tickets[0] if len(tickets) == 1 else _merged(self.runtime.loop, tickets)

    def delete_topic_offsets(self, topics: set[str]) -> None:
        """A deleted topic's committed offsets get tombstones in every group."""
        now = self.now()
        for partition, shard in self.runtime.active():
            self.runtime.run(partition, shard.delete_topic_offsets(topics, now))

    # -- the runtime's life ------------------------------------------------------------

    def start(self) -> None:
        self.runtime.start()

    def unload(self) -> int:
        """The broker stops: parked requests (joins and syncs waiting for their
        group) are answered NOT_COORDINATOR; how many."""
        return self.runtime.unload()

    async def stop(self) -> None:
        await self.runtime.stop()


def _merged(loop, tickets: list[asyncio.Future]) -> asyncio.Future:
    """One future for the union of several shards' ``{name: error}`` answers."""
    merged = loop.create_future()

    def settle(_ticket=None) -> None:
        if merged.done() or not all(t.done() for t in tickets):
            return
        answer: dict = {}
        for ticket in tickets:
            answer.update(ticket.result())
        merged.set_result(answer)

    settle()
    for ticket in tickets:
        if not ticket.done():
            ticket.add_done_callback(settle)
    return merged
