"""Transactions over the wire, request by request, as a transactional producer
and a read_committed consumer send them: the coordinator's answers at each
step, the last stable offset, aborted data hidden from read_committed
fetches, and the partition leader's check that a transaction includes the
partition it writes to."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import pytest

from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.headers import frame_request
from kcoord.protocol.messages import ALL_APIS
from kcoord.protocol.records import batch_header, decode_batch, iter_entries
from tests.broker import txn_ops as T
from tests.broker.wire_ops import create_topic

E = ErrorCode


def _values(part) -> list[bytes]:
    """The values of the data batches (not the markers)."""
    data = part["records"]
    return [r.value for pos, _size, _magic in iter_entries(data)
            if not batch_header(data, pos).is_control
            for r in decode_batch(data, pos).records]


def _begin(wire, txn_id: str, timeout_ms: int = 60_000):
    first, last = T.find_coordinator(wire, txn_id)
    assert last["error_code"] == E.NONE, last
    answer = T.init_producer(wire, txn_id, timeout_ms)
    assert answer["error_code"] == E.NONE, answer
    return answer["producer_id"], answer["producer_epoch"]


def test_the_first_transactional_lookup_makes_the_state_topic(wire):
    first, last = T.find_coordinator(wire, "lookup-1")
    # As Kafka: the topic is being made, the client asks again.
    assert first["error_code"] in (E.COORDINATOR_NOT_AVAILABLE, E.NONE)
    assert last["error_code"] == E.NONE and last["node_id"] >= 0
    topics = wire.call(3, 9, {"topics": None, "allow_auto_topic_creation": False})["topics"]
    state = [t for t in topics if t["name"] == "__transaction_state"]
    assert state and state[0]["is_internal"] and len(state[0]["partitions"]) == 50


def test_commit_and_abort_as_a_read_committed_consumer_sees_them(wire):
    create_topic(wire, "txw-data", partitions=1)
    pid, epoch = _begin(wire, "txw-1")
    assert epoch == 0
    assert T.add_partitions(wire, "txw-1", pid, epoch, [("txw-data", 0)]) == {
        ("txw-data", 0): E.NONE}
    assert T.produce(wire, "txw-1", "txw-data", 0,
                     T.txn_batch(pid, epoch, 0, [b"c1", b"c2"]))["error_code"] == E.NONE
    # open: the last stable offset holds at the transaction's first offset
    assert T.latest_offset(wire, "txw-data", committed=True) == 0
    assert T.latest_offset(wire, "txw-data", committed=False) == 2
    assert _values(T.fetch(wire, "txw-data", committed=True)) == []
    assert T.end_txn_settled(wire, "txw-1", pid, epoch, True) == E.NONE
    # the marker follows the data: last stable offset past it
    assert T.latest_offset(wire, "txw-data", committed=True) == 3
    # a second transaction, aborted
    assert T.add_partitions(wire, "txw-1", pid, epoch, [("txw-data", 0)])[("txw-data", 0)] == 0
    assert T.produce(wire, "txw-1", "txw-data", 0,
                     T.txn_batch(pid, epoch, 2, [b"a1"]))["error_code"] == E.NONE
    assert T.end_txn_settled(wire, "txw-1", pid, epoch, False) == E.NONE
    committed = T.fetch(wire, "txw-data", committed=True)
    assert committed["last_stable_offset"] == committed["high_watermark"] == 5
    assert committed["aborted_transactions"] == [{"producer_id": pid, "first_offset": 3}]
    # the records are all there; the consumer drops the aborted ones itself
    assert _values(committed) == [b"c1", b"c2", b"a1"]
    plain = T.fetch(wire, "txw-data", committed=False)
    assert plain["aborted_transactions"] is None


def test_requests_sent_right_behind_an_end_find_the_transaction_complete(wire, broker):
    """The EndTxn answer leaves once the Prepare state is durable, before the
    markers are written (as on Kafka); yet a request served after that answer,
    even one sent in the same write on the same connection, finds the
    transaction complete: the last stable offset past the commit marker, its
    state CompleteCommit, and the same end again answered as a retry of a
    finished one, not CONCURRENT_TRANSACTIONS; and so does a request on another
    connection sent as soon as the answer arrives."""
    create_topic(wire, "txw-behind", partitions=1)
    pid, epoch = _begin(wire, "txw-behind")
    assert T.add_partitions(wire, "txw-behind", pid, epoch, [("txw-behind", 0)]) == {
        ("txw-behind", 0): E.NONE}
    assert T.produce(wire, "txw-behind", "txw-behind", 0,
                     T.txn_batch(pid, epoch, 0, [b"b1", b"b2"]))["error_code"] == E.NONE
    end = {"transactional_id": "txw-behind", "producer_id": pid, "producer_epoch": epoch,
           "committed": True}
    described = {"transactional_ids": ["txw-behind"]}
    requests = [(26, 3, end),
                (65, 0, described),
                (2, 5, {"replica_id": -1, "isolation_level": 1, "topics": [
                    {"name": "txw-behind", "partitions": [
                        {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]}),
                (26, 3, end)]
    first = wire.correlation_id + 1
    wire.send_raw(b"".join(frame_request(ALL_APIS[api], version, first + i, "behind", body)
                           for i, (api, version, body) in enumerate(requests)))
    wire.correlation_id = first + len(requests) - 1
    assert wire.receive(26, 3, first)["error_code"] == E.NONE
    with WireClient.to(broker.bootstrap) as other:
        state = other.call(65, 0, described)["transaction_states"][0]["transaction_state"]
    assert state == "CompleteCommit"
    assert wire.receive(65, 0, first + 1)["transaction_states"][0]["transaction_state"] == \
        "CompleteCommit"
    assert wire.receive(2, 5, first + 2)["topics"][0]["partitions"][0]["offset"] == 3
    assert wire.receive(26, 3, first + 3)["error_code"] == E.NONE
    assert _values(T.fetch(wire, "txw-behind", committed=True)) == [b"b1", b"b2"]


@pytest.mark.parametrize("version, code, message", [
    (9, E.INVALID_TXN_STATE, "Partition was not added to the transaction"),
    (10, E.INVALID_TXN_STATE, "Partition was not added to the transaction"),
    (11, E.TRANSACTION_ABORTABLE, None),
])
def test_a_write_to_a_partition_not_in_the_transaction_is_refused(wire, version, code,
                                                                   message):
    topic = f"txw-unadded-{version}"
    create_topic(wire, topic, partitions=2)
    pid, epoch = _begin(wire, f"txw-unadded-{version}")
    T.add_partitions(wire, f"txw-unadded-{version}", pid, epoch, [(topic, 0)])
    refused = T.produce(wire, f"txw-unadded-{version}", topic, 1,
                        T.txn_batch(pid, epoch, 0, [b"x"]), version=version)
    assert refused["error_code"] == code
    if version >= 8:
        assert refused["error_message"] == message
    assert T.fetch(wire, topic, 1, committed=False)["high_watermark"] == 0
    # without a transactional id at all: Kafka's authorization answer
    assert T.produce(wire, None, topic, 0, T.txn_batch(pid, epoch, 0, [b"x"]))[
        "error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_plain_batch_during_the_producers_transaction_is_refused(wire):
    create_topic(wire, "txw-plain")
    pid, epoch = _begin(wire, "txw-plain")
    T.add_partitions(wire, "txw-plain", pid, epoch, [("txw-plain", 0)])
    assert T.produce(wire, "txw-plain", "txw-plain", 0,
                     T.txn_batch(pid, epoch, 0, [b"t"]))["error_code"] == E.NONE
    assert T.produce(wire, "txw-plain", "txw-plain", 0,
                     T.txn_batch(pid, epoch, 1, [b"p"], transactional=False))[
        "error_code"] == E.INVALID_TXN_STATE


def test_add_partitions_refuses_unknown_and_internal_topics_before_the_coordinator(wire):
    create_topic(wire, "txw-add")
    pid, epoch = _begin(wire, "txw-add")
    answer = T.add_partitions(wire, "txw-add", pid, epoch,
                              [("txw-add", 0), ("txw-add", 7), ("__consumer_offsets", 0)])
    assert answer == {("txw-add", 0): E.OPERATION_NOT_ATTEMPTED,
                      ("txw-add", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
                      ("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED}
    # nothing was added: EndTxn finds no transaction
    assert T.end_txn(wire, "txw-add", pid, epoch, True) == E.INVALID_TXN_STATE


def test_the_coordinator_answers_each_state_as_kafka(wire):
    create_topic(wire, "txw-states")
    pid, epoch = _begin(wire, "txw-states")
    assert T.end_txn(wire, "txw-states", pid, epoch, True) == E.INVALID_TXN_STATE  # Empty
    assert T.end_txn(wire, "txw-states", pid + 1, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert T.end_txn(wire, "txw-states", pid, epoch + 1, True) == E.PRODUCER_FENCED
    assert T.end_txn(wire, "txw-states", pid, epoch + 1, True, version=1) == \
        E.INVALID_PRODUCER_EPOCH
    assert T.end_txn(wire, "nobody", pid, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert T.add_partitions(wire, "txw-states", pid, epoch + 1, [("txw-states", 0)]) == {
        ("txw-states", 0): E.PRODUCER_FENCED}
    assert T.add_partitions(wire, "txw-states", pid, epoch + 1, [("txw-states", 0)],
                            version=1) == {("txw-states", 0): E.INVALID_PRODUCER_EPOCH}
    T.add_partitions(wire, "txw-states", pid, epoch, [("txw-states", 0)])
    assert T.end_txn_settled(wire, "txw-states", pid, epoch, True) == E.NONE
    # CompleteCommit: a retried commit is fine, an abort is not
    assert T.end_txn(wire, "txw-states", pid, epoch, True) == E.NONE
    assert T.end_txn(wire, "txw-states", pid, epoch, False) == E.INVALID_TXN_STATE
    # too long a timeout
    assert wire.call(22, 4, {"transactional_id": "txw-states",
                             "transaction_timeout_ms": 900_001})["error_code"] == \
        E.INVALID_TRANSACTION_TIMEOUT


def test_a_new_producer_instance_fences_the_old_and_aborts_its_transaction(wire):
    create_topic(wire, "txw-fence")
    pid, epoch = _begin(wire, "txw-fence")
    T.add_partitions(wire, "txw-fence", pid, epoch, [("txw-fence", 0)])
    T.produce(wire, "txw-fence", "txw-fence", 0, T.txn_batch(pid, epoch, 0, [b"zombie"]))
    # the new instance's first InitProducerId is told to ask again while the
    # old transaction is aborted, then gets the id with an epoch bumped twice
    told = wire.call(22, 4, {"transactional_id": "txw-fence", "transaction_timeout_ms": 60_000})
    assert told["error_code"] == E.CONCURRENT_TRANSACTIONS
    again = T.init_producer(wire, "txw-fence")
    assert (again["error_code"], again["producer_id"], again["producer_epoch"]) == (
        E.NONE, pid, epoch + 2)
    # the old instance is fenced everywhere
    assert T.end_txn(wire, "txw-fence", pid, epoch, True) == E.PRODUCER_FENCED
    assert T.produce(wire, "txw-fence", "txw-fence", 0,
                     T.txn_batch(pid, epoch, 1, [b"late"]))["error_code"] == \
        E.INVALID_PRODUCER_EPOCH
    part = T.fetch(wire, "txw-fence", committed=True)
    assert part["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]
    assert part["last_stable_offset"] == part["high_watermark"] == 2


def test_a_retried_epoch_bump_gets_the_same_answer(wire):
    pid, epoch = _begin(wire, "txw-kip360")
    bumped = T.init_producer(wire, "txw-kip360", producer_id=pid, producer_epoch=epoch)
    assert (bumped["producer_id"], bumped["producer_epoch"]) == (pid, epoch + 1)
    retried = T.init_producer(wire, "txw-kip360", producer_id=pid, producer_epoch=epoch)
    assert (retried["producer_id"], retried["producer_epoch"]) == (pid, epoch + 1)
    stale = T.init_producer(wire, "txw-kip360", producer_id=pid + 1, producer_epoch=epoch)
    assert stale["error_code"] == E.PRODUCER_FENCED
    assert T.init_producer(wire, "txw-kip360", producer_id=pid + 1, producer_epoch=epoch,
                           version=3)["error_code"] == E.INVALID_PRODUCER_EPOCH


def test_offsets_committed_in_a_transaction_count_only_once_it_commits(wire):
    create_topic(wire, "txw-offsets")
    pid, epoch = _begin(wire, "txw-offsets")
    group = "txw-offsets-group"
    assert wire.call(25, 3, {"transactional_id": "txw-offsets", "producer_id": pid,
                             "producer_epoch": epoch, "group_id": group})["error_code"] == 0

    def txn_commit(offset, version=3):
        answer = wire.call(28, version, {
            "transactional_id": "txw-offsets", "group_id": group, "producer_id": pid,
            "producer_epoch": epoch, "topics": [{"name": "txw-offsets", "partitions": [
                {"partition_index": 0, "committed_offset": offset,
                 "committed_metadata": ""}]}]})
        return answer["topics"][0]["partitions"][0]["error_code"]

    def fetched(stable=True):
        answer = wire.call(9, 7, {"group_id": group, "require_stable": stable, "topics": [
            {"name": "txw-offsets", "partition_indexes": [0]}]})
        part = answer["topics"][0]["partitions"][0]
        return part["error_code"], part["committed_offset"]

    assert txn_commit(42) == E.NONE
    assert fetched() == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert fetched(stable=False) == (E.NONE, -1)
    assert T.end_txn_settled(wire, "txw-offsets", pid, epoch, True) == E.NONE
    assert fetched() == (E.NONE, 42)
    # the next transaction's commit is dropped by its abort
    wire.call(25, 3, {"transactional_id": "txw-offsets", "producer_id": pid,
                      "producer_epoch": epoch, "group_id": group})
    assert txn_commit(99) == E.NONE
    assert T.end_txn_settled(wire, "txw-offsets", pid, epoch, False) == E.NONE
    assert fetched() == (E.NONE, 42)
    # without AddOffsetsToTxn first: refused, by version
    assert txn_commit(7, version=3) == E.INVALID_TXN_STATE
    assert txn_commit(7, version=4) == E.TRANSACTION_ABORTABLE


def test_the_tools_see_each_transaction(wire):
    create_topic(wire, "txw-tools", partitions=2)
    pid, epoch = _begin(wire, "txw-tools-open")
    T.add_partitions(wire, "txw-tools-open", pid, epoch, [("txw-tools", 1), ("txw-tools", 0)])
    T.produce(wire, "txw-tools-open", "txw-tools", 1, T.txn_batch(pid, epoch, 0, [b"x"]))
    done_pid, _e = _begin(wire, "txw-tools-idle")
    described = wire.call(65, 0, {"transactional_ids": [
        "txw-tools-open", "txw-tools-idle", "txw-tools-nobody", ""]})["transaction_states"]
    open_, idle, nobody, empty = described
    assert (open_["error_code"], open_["transaction_state"], open_["producer_id"],
            open_["producer_epoch"], open_["transaction_timeout_ms"]) == (
        E.NONE, "Ongoing", pid, epoch, 60_000)
    assert open_["transaction_start_time_ms"] > 0
    assert open_["topics"] == [{"topic": "txw-tools", "partitions": [0, 1]}]
    assert (idle["transaction_state"], idle["transaction_start_time_ms"], idle["topics"]) == (
        "Empty", -1, [])
    assert nobody["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
    assert empty["error_code"] == E.INVALID_REQUEST

    def listed(**filters):
        body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                "transactional_id_pattern": None, **filters}
        answer = wire.call(66, 2, body)
        return answer["error_code"], answer["unknown_state_filters"], sorted(
            (t["transactional_id"], t["transaction_state"]) for t in answer["transaction_states"]
            if t["transactional_id"].startswith("txw-tools"))

    assert listed() == (0, [], [("txw-tools-idle", "Empty"), ("txw-tools-open", "Ongoing")])
    assert listed(state_filters=["Ongoing", "Nonsense"]) == (
        0, ["Nonsense"], [("txw-tools-open", "Ongoing")])
    assert listed(producer_id_filters=[done_pid]) == (0, [], [("txw-tools-idle", "Empty")])
    assert listed(transactional_id_pattern="txw-tools-o.*") == (
        0, [], [("txw-tools-open", "Ongoing")])
    assert listed(transactional_id_pattern="txw-tools-o") == (0, [], [])  # the whole id
    assert listed(transactional_id_pattern="(")[0] == E.INVALID_REGULAR_EXPRESSION
    assert listed(duration_filter=3_600_000) == (0, [], [("txw-tools-idle", "Empty")])
    producers = wire.call(61, 0, {"topics": [{"name": "txw-tools", "partition_indexes": [1]}]})
    (active,) = producers["topics"][0]["partitions"][0]["active_producers"]
    assert (active["producer_id"], active["current_txn_start_offset"],
            active["coordinator_epoch"]) == (pid, 0, -1)
    assert T.end_txn_settled(wire, "txw-tools-open", pid, epoch, True) == E.NONE
    producers = wire.call(61, 0, {"topics": [{"name": "txw-tools", "partition_indexes": [1]}]})
    (active,) = producers["topics"][0]["partitions"][0]["active_producers"]
    assert (active["current_txn_start_offset"], active["coordinator_epoch"]) == (-1, 0)


def test_an_abandoned_transaction_is_aborted_at_its_timeout(make_broker):
    """A producer that stops in the middle of a transaction: the coordinator's
    sweep aborts it once its timeout has passed, read_committed readers move
    past it, and the producer is fenced."""
    from kcoord.protocol.client import WireClient

    node = make_broker(overrides={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    with WireClient.to(node.bootstrap) as wire:
        create_topic(wire, "abandoned")
        pid, epoch = _begin(wire, "abandoned", timeout_ms=300)
        T.add_partitions(wire, "abandoned", pid, epoch, [("abandoned", 0)])
        T.produce(wire, "abandoned", "abandoned", 0, T.txn_batch(pid, epoch, 0, [b"x"]))
        assert T.latest_offset(wire, "abandoned", committed=True) == 0
        for _ in range(300):  # bounded: 6 s for a 300 ms timeout and 100 ms sweeps
            if T.latest_offset(wire, "abandoned", committed=True) == 2:
                break
            time.sleep(0.02)
        assert T.latest_offset(wire, "abandoned", committed=True) == 2
        part = T.fetch(wire, "abandoned", committed=True)
        assert part["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]
        assert T.end_txn(wire, "abandoned", pid, epoch, True) == E.PRODUCER_FENCED


def test_metadata_allowed_to_create_makes_the_state_topic_as_kafka(make_broker):
    """A Metadata request naming ``__transaction_state`` with auto-creation makes
    it with its own settings (50 partitions, compacted), answering that it does
    not exist yet, as Kafka does; ``__share_group_state`` is not made."""
    from kcoord.protocol.client import WireClient

    node = make_broker()
    with WireClient.to(node.bootstrap) as wire:
        names = [{"name": "__transaction_state"}, {"name": "__share_group_state"}]
        first = wire.call(3, 9, {"topics": names, "allow_auto_topic_creation": True})
        assert [(t["name"], t["error_code"], t["is_internal"]) for t in first["topics"]] == [
            ("__transaction_state", E.UNKNOWN_TOPIC_OR_PARTITION, True),
            ("__share_group_state", E.UNKNOWN_TOPIC_OR_PARTITION, True)]
        for _ in range(100):
            again = wire.call(3, 9, {"topics": names, "allow_auto_topic_creation": False})
            if again["topics"][0]["error_code"] == E.NONE:
                break
            time.sleep(0.02)
        state, share = again["topics"]
        assert (state["error_code"], len(state["partitions"])) == (E.NONE, 50)
        assert share["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
        configs = wire.call(32, 4, {"resources": [{
            "resource_type": 2, "resource_name": "__transaction_state",
            "configuration_keys": ["cleanup.policy", "compression.type"]}],
            "include_synonyms": False, "include_documentation": False})
        assert {c["name"]: c["value"] for c in configs["results"][0]["configs"]} == {
            "cleanup.policy": "compact", "compression.type": "uncompressed"}


def _markers(wire, pid: int, epoch: int, partitions, *, commit: bool = False,
             coordinator_epoch: int = 0, version: int = 1) -> dict:
    """WriteTxnMarkers for one producer: ``{(topic, partition): error}``."""
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    answer = wire.call(27, version, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
        "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
        "coordinator_epoch": coordinator_epoch, "transaction_version": 0}]})
    (marker,) = answer["markers"]
    assert marker["producer_id"] == pid
    return {(t["name"], p["partition_index"]): p["error_code"]
            for t in marker["topics"] for p in t["partitions"]}


@pytest.mark.parametrize("version", [1, 2])
def test_an_abort_marker_from_a_tool_ends_a_hanging_transaction(wire, version):
    """What Admin.abortTransaction (kafka-transactions abort) sends to the
    partition leader: the open transaction ends there, read_committed readers
    move past it and are told it was aborted; a marker of an older producer
    epoch or coordinator epoch is refused, an unknown partition too."""
    topic, txn_id = f"txw-hang-{version}", f"txw-hang-{version}"
    create_topic(wire, topic, partitions=1)
    _begin(wire, txn_id)
    pid, epoch = _begin(wire, txn_id)  # a second instance: epoch 1
    assert epoch == 1
    assert T.add_partitions(wire, txn_id, pid, epoch, [(topic, 0)])[(topic, 0)] == E.NONE
    assert T.produce(wire, txn_id, topic, 0,
                     T.txn_batch(pid, epoch, 0, [b"h1", b"h2"]))["error_code"] == E.NONE
    assert T.latest_offset(wire, topic, committed=True) == 0  # held by the open transaction
    answer = _markers(wire, pid, epoch, [(topic, 0), (topic, 7), ("txw-no-such", 0)],
                      version=version)
    assert answer == {(topic, 0): E.NONE, (topic, 7): E.UNKNOWN_TOPIC_OR_PARTITION,
                      ("txw-no-such", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert T.latest_offset(wire, topic, committed=True) == 3  # past the marker
    committed = T.fetch(wire, topic, committed=True)
    assert committed["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]
    producers = wire.call(61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
    (state,) = producers["topics"][0]["partitions"][0]["active_producers"]
    assert state["producer_id"] == pid and state["current_txn_start_offset"] == -1
    # fencing, as the partition's producer state decides it
    assert _markers(wire, pid, 0, [(topic, 0)]) == {(topic, 0): E.INVALID_PRODUCER_EPOCH}
    assert _markers(wire, pid, epoch, [(topic, 0)], coordinator_epoch=5) == {(topic, 0): E.NONE}
    assert _markers(wire, pid, epoch, [(topic, 0)], coordinator_epoch=4) == {
        (topic, 0): E.TRANSACTION_COORDINATOR_FENCED}


def _offsets(wire, topic: str, timestamp: int, *, committed: bool, replica_id: int = -1):
    answer = wire.call(2, 7, {"replica_id": replica_id, "isolation_level": 1 if committed else 0,
                              "topics": [{"name": topic, "partitions": [
                                  {"partition_index": 0, "timestamp": timestamp,
                                   "current_leader_epoch": -1}]}]})
    part = answer["topics"][0]["partitions"][0]
    return part["offset"], part["timestamp"]


def test_list_offsets_finds_no_record_past_the_last_stable_offset(wire):
    """The largest timestamp and a lookup by time answer only offsets below the
    last fetchable one (Kafka's Partition.fetchOffsetForTimestamp): under
    read_committed the newest records, of a transaction still open, are not
    found; read_uncommitted and a broker's own replica id find them."""
    topic, txn_id = "txw-lso-lookup", "txw-lso-lookup"
    create_topic(wire, topic, partitions=1)
    old = 1_700_000_000_000
    from kcoord.protocol.records import Record, build_batch
    assert wire.call(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                            "topic_data": [{"name": topic, "partition_data": [{
                                "index": 0, "records": build_batch(
                                    [Record(0, old, None, b"before")])}]}]}
                     )["responses"][0]["partition_responses"][0]["error_code"] == E.NONE
    pid, epoch = _begin(wire, txn_id)
    assert T.add_partitions(wire, txn_id, pid, epoch, [(topic, 0)])[(topic, 0)] == E.NONE
    assert T.produce(wire, txn_id, topic, 0,
                     T.txn_batch(pid, epoch, 0, [b"o1", b"o2"]))["error_code"] == E.NONE
    newest, newest_ts = _offsets(wire, topic, -3, committed=False)
    assert newest == 1 and newest_ts > old
    assert _offsets(wire, topic, -3, committed=True) == (-1, -1)
    assert _offsets(wire, topic, old + 1, committed=True) == (-1, -1)
    assert _offsets(wire, topic, old + 1, committed=False)[0] == 1
    assert _offsets(wire, topic, old, committed=True) == (0, old)  # below the LSO: found
    # a broker asking (replica id 5): the log end counts, not the isolation level
    assert _offsets(wire, topic, -3, committed=True, replica_id=5)[0] == 1
    assert _offsets(wire, topic, -1, committed=True, replica_id=5)[0] == 3
    assert _offsets(wire, topic, -1, committed=True)[0] == 1
    assert T.end_txn_settled(wire, txn_id, pid, epoch, True) == E.NONE
    # committed: found (the newest is now the commit marker, stamped last)
    ended = _offsets(wire, topic, -3, committed=True)
    assert ended[0] == 3 and ended == _offsets(wire, topic, -3, committed=False)
    # records put out of reach by DeleteRecords: the largest timestamp is still read
    moved = wire.call(21, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": -1}]}], "timeout_ms": 5000})
    assert moved["topics"][0]["partitions"][0]["error_code"] == E.NONE
    assert _offsets(wire, topic, -3, committed=False) == ended


def test_a_read_committed_fetch_waiting_at_the_last_stable_offset_wakes_on_an_abort_marker(
        broker, wire):
    topic, txn_id = "txw-hang-wake", "txw-hang-wake"
    create_topic(wire, topic, partitions=1)
    pid, epoch = _begin(wire, txn_id)
    assert T.add_partitions(wire, txn_id, pid, epoch, [(topic, 0)])[(topic, 0)] == E.NONE
    assert T.produce(wire, txn_id, topic, 0,
                     T.txn_batch(pid, epoch, 0, [b"w1"]))["error_code"] == E.NONE
    from kcoord.protocol.client import WireClient
    with WireClient.to(broker.bootstrap) as reader:
        reader.send(1, 11, {
            "replica_id": -1, "max_wait_ms": 10_000, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
        time.sleep(0.2)  # parked: nothing below the last stable offset yet
        began = time.monotonic()
        assert _markers(wire, pid, epoch, [(topic, 0)]) == {(topic, 0): E.NONE}
        part = reader.receive(1, 11)["responses"][0]["partitions"][0]
        assert time.monotonic() - began < 5  # woken by the marker, not by max_wait_ms
    assert part["last_stable_offset"] == 2
    assert part["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]


def test_a_marker_for_a_group_coordinator_not_ready_is_not_leader_or_follower(
        broker, wire, monkeypatch):
    """As Kafka's KafkaApis maps it, for the sender to retry (Admin.abortTransaction
    gives up on the coordinator's own errors); a ready one writes it."""
    groups = broker.broker.groups
    real = groups.complete_transaction
    for code in (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR,
                 E.COORDINATOR_NOT_AVAILABLE):
        async def not_ready(*_args, code=code):
            return code
        monkeypatch.setattr(groups, "complete_transaction", not_ready)
        assert _markers(wire, 4242, 0, [("__consumer_offsets", 3)]) == {
            ("__consumer_offsets", 3): E.NOT_LEADER_OR_FOLLOWER}
    monkeypatch.setattr(groups, "complete_transaction", real)
    assert _markers(wire, 4242, 0, [("__consumer_offsets", 3)]) == {
        ("__consumer_offsets", 3): E.NONE}


def test_a_marker_naming_many_partitions_is_answered_for_each_and_others_are_served(
        broker, wire):
    """Markers for 20,000 partitions of an unknown topic: every one answered
    UNKNOWN_TOPIC_OR_PARTITION, in order, and the loop serves another client
    meanwhile (the handler gives way every PARTITIONS_PER_TURN partitions)."""
    from kcoord.broker.apis import k027_write_txn_markers as k027

    served = []
    real = k027.asyncio.sleep

    def counting(delay):
        # asyncio.sleep is the module's, shared by the whole loop: count only
        # the turns the handler gives (the caller of this call)
        if sys._getframe(1).f_code is k027.write_txn_markers.__code__:
            served.append(delay)
        return real(delay)

    k027.asyncio.sleep = counting
    try:
        answer = _markers(wire, 99, 0, [("txw-no-such-many", p) for p in range(20_000)])
    finally:
        k027.asyncio.sleep = real
    assert list(answer) == [("txw-no-such-many", p) for p in range(20_000)]
    assert set(answer.values()) == {E.UNKNOWN_TOPIC_OR_PARTITION}
    assert len(served) == 20_000 // k027.PARTITIONS_PER_TURN


def test_a_marker_reaching_a_resigned_group_coordinator_still_commits_the_offsets(
        make_broker, tmp_path):
    """A transaction answered just before a stop can get its __consumer_offsets
    marker after the group coordinator has resigned that partition: the marker
    is appended all the same (Kafka writes markers to the log, not through the
    coordinator), so after the restart the offsets committed in it count."""
    data = tmp_path / "stopping"
    node = make_broker(data)
    group = "txw-stop-group"
    with WireClient.to(node.bootstrap) as wire:
        create_topic(wire, "txw-stop")
        pid, epoch = _begin(wire, "txw-stop")
        assert wire.call(25, 3, {"transactional_id": "txw-stop", "producer_id": pid,
                                 "producer_epoch": epoch, "group_id": group})["error_code"] == 0
        answer = wire.call(28, 3, {
            "transactional_id": "txw-stop", "group_id": group, "producer_id": pid,
            "producer_epoch": epoch, "topics": [{"name": "txw-stop", "partitions": [
                {"partition_index": 0, "committed_offset": 7, "committed_metadata": ""}]}]})
        assert answer["topics"][0]["partitions"][0]["error_code"] == E.NONE
    groups = node.broker.groups
    partition = groups.partition_for(group)
    node.call(groups.unload)  # the broker stops
    assert node.call(groups.complete_transaction, partition, pid, epoch, True, 0) == E.NONE
    node.stop()
    node = make_broker(data)
    with WireClient.to(node.bootstrap) as wire:
        for _ in range(250):  # bounded: 5 s for the partitions to load
            answer = wire.call(9, 7, {"group_id": group, "require_stable": True, "topics": [
                {"name": "txw-stop", "partition_indexes": [0]}]})
            if answer["error_code"] != E.COORDINATOR_LOAD_IN_PROGRESS:
                break
            time.sleep(0.02)
        part = answer["topics"][0]["partitions"][0]
        assert (part["error_code"], part["committed_offset"]) == (E.NONE, 7)


def test_a_clean_stop_completes_the_transactions_it_answered(make_broker, tmp_path):
    """EndTxn answered just before a clean stop, with markers that wait for an
    fsync (kcoord.fsync.policy=batch): the stop writes them and the Complete
    state before the coordinators resign, so the restarted broker finds the
    transaction complete and writes no second marker."""
    data = tmp_path / "clean"
    overrides = {"kcoord.fsync.policy": "batch"}
    node = make_broker(data, overrides=overrides)
    with WireClient.to(node.bootstrap) as wire:
        create_topic(wire, "txw-clean")
        pid, epoch = _begin(wire, "txw-clean")
        assert T.add_partitions(wire, "txw-clean", pid, epoch, [("txw-clean", 0)]) == {
            ("txw-clean", 0): E.NONE}
        T.produce(wire, "txw-clean", "txw-clean", 0, T.txn_batch(pid, epoch, 0, [b"a", b"b"]))
        assert T.end_txn(wire, "txw-clean", pid, epoch, True) == E.NONE
    node.stop()  # at once: the markers are still being written
    node = make_broker(data, overrides=overrides)
    with WireClient.to(node.bootstrap) as wire:
        for _ in range(250):  # bounded: 5 s for the partitions to load
            states = wire.call(65, 0, {"transactional_ids": ["txw-clean"]})
            state = states["transaction_states"][0]
            if state["error_code"] != E.COORDINATOR_LOAD_IN_PROGRESS:
                break
            time.sleep(0.02)
        assert state["transaction_state"] == "CompleteCommit"
        # two records and one marker: none written again at the start
        assert T.latest_offset(wire, "txw-clean", committed=False) == 3
        assert T.latest_offset(wire, "txw-clean", committed=True) == 3


def test_a_marker_the_topic_asks_an_fsync_of_is_fsynced_before_the_transaction_completes(
        wire, broker, monkeypatch):
    """flush.messages=1 on a topic (fsync policy never): the commit marker is
    fsynced, as the topic asks, before the Complete state is written; otherwise
    a power loss could keep the Complete state and lose the marker, and the next
    start would write none: the transaction open in the partition forever."""
    create_topic(wire, "txw-flushed", configs=[("flush.messages", "1")])
    pid, epoch = _begin(wire, "txw-flushed")
    assert T.add_partitions(wire, "txw-flushed", pid, epoch, [("txw-flushed", 0)]) == {
        ("txw-flushed", 0): E.NONE}
    T.produce(wire, "txw-flushed", "txw-flushed", 0, T.txn_batch(pid, epoch, 0, [b"a"]))
    flusher = broker.broker.logs.get("txw-flushed", 0).flusher
    fsync, gate = flusher.flush_async, threading.Event()

    async def held():
        await asyncio.get_running_loop().run_in_executor(None, gate.wait, 10)
        await fsync()

    monkeypatch.setattr(flusher, "flush_async", held)
    described = {"transactional_ids": ["txw-flushed"]}
    try:
        assert T.end_txn(wire, "txw-flushed", pid, epoch, True) == E.NONE
        state = wire.call(65, 0, described)["transaction_states"][0]
        assert state["transaction_state"] == "PrepareCommit"  # the marker's fsync is held
    finally:
        gate.set()
    for _ in range(250):  # bounded: 5 s
        state = wire.call(65, 0, described)["transaction_states"][0]
        if state["transaction_state"] != "PrepareCommit":
            break
        time.sleep(0.02)
    assert state["transaction_state"] == "CompleteCommit"
    assert T.latest_offset(wire, "txw-flushed", committed=True) == 2
    assert _values(T.fetch(wire, "txw-flushed", committed=True)) == [b"a"]
