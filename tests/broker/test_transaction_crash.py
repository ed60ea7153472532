"""A broker killed (SIGKILL) in the middle of transactions, then started again
from the same data dir: every acknowledged step of a transaction is still
there.  An open transaction keeps holding the last stable offset and can
still be committed; one whose commit was acknowledged gets its markers; offsets
committed in an open transaction stay pending, then count once it commits;
an aborted transaction's records stay hidden from read_committed readers."""

from __future__ import annotations

import time

from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode
from tests.broker import txn_ops as T
from tests.broker.wire_ops import create_topic
from tests.support import BrokerProcess

E = ErrorCode


def _txn_offset_commit(wire, txn_id, group, pid, epoch, topic, offset):
    answer = wire.call(28, 3, {
        "transactional_id": txn_id, "group_id": group, "producer_id": pid,
        "producer_epoch": epoch, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}]}]})
    return answer["topics"][0]["partitions"][0]["error_code"]


def _fetch_offset(wire, group, topic, stable=True):
    """The group's offset, once its partition is loaded after a start."""
    for _ in range(500):
        answer = wire.call(9, 7, {"group_id": group, "require_stable": stable,
                                  "topics": [{"name": topic, "partition_indexes": [0]}]})
        if answer["error_code"] != E.COORDINATOR_LOAD_IN_PROGRESS:
            break
        time.sleep(0.02)
    assert answer["error_code"] == E.NONE, answer
    part = answer["topics"][0]["partitions"][0]
    return part["error_code"], part["committed_offset"]


def test_transactions_survive_a_kill(tmp_path):
    data = tmp_path / "data"
    node = BrokerProcess(data).start()
    try:
        with WireClient.to(node.bootstrap) as wire:
            create_topic(wire, "open")
            create_topic(wire, "aborted")
            T.find_coordinator(wire, "keeps-open")
            # an open transaction with records and offsets
            opened = T.init_producer(wire, "keeps-open")
            pid, epoch = opened["producer_id"], opened["producer_epoch"]
            assert T.add_partitions(wire, "keeps-open", pid, epoch, [("open", 0)]) == {
                ("open", 0): E.NONE}
            assert wire.call(25, 3, {"transactional_id": "keeps-open", "producer_id": pid,
                                     "producer_epoch": epoch, "group_id": "g"})[
                "error_code"] == E.NONE
            assert T.produce(wire, "keeps-open", "open", 0,
                             T.txn_batch(pid, epoch, 0, [b"o1", b"o2"]))["error_code"] == 0
            assert _txn_offset_commit(wire, "keeps-open", "g", pid, epoch, "open", 17) == 0
            # an aborted transaction, complete
            other = T.init_producer(wire, "aborts")
            opid, oepoch = other["producer_id"], other["producer_epoch"]
            T.add_partitions(wire, "aborts", opid, oepoch, [("aborted", 0)])
            T.produce(wire, "aborts", "aborted", 0, T.txn_batch(opid, oepoch, 0, [b"gone"]))
            assert T.end_txn_settled(wire, "aborts", opid, oepoch, False) == E.NONE
            assert _fetch_offset(wire, "g", "open") == (E.UNSTABLE_OFFSET_COMMIT, -1)
            assert T.latest_offset(wire, "open", committed=True) == 0
    finally:
        node.kill()

    node = BrokerProcess(data).start()
    try:
        with WireClient.to(node.bootstrap) as wire:
            # still open: the last stable offset held, the offsets pending
            assert T.latest_offset(wire, "open", committed=True) == 0
            assert T.latest_offset(wire, "open", committed=False) == 2
            assert _fetch_offset(wire, "g", "open") == (E.UNSTABLE_OFFSET_COMMIT, -1)
            for _ in range(500):  # once the coordinator's partitions are loaded
                described = wire.call(65, 0, {"transactional_ids": ["keeps-open", "aborts"]})[
                    "transaction_states"]
                if all(d["error_code"] != E.COORDINATOR_LOAD_IN_PROGRESS for d in described):
                    break
                time.sleep(0.02)
            assert [(d["error_code"], d["transaction_state"], d["producer_id"],
                     d["producer_epoch"]) for d in described] == [
                (E.NONE, "Ongoing", pid, epoch), (E.NONE, "CompleteAbort", opid, oepoch)], \
                [e for e in node.events if e.get("level") in ("warning", "error")]
            # the abort is still known to read_committed readers
            aborted = T.fetch(wire, "aborted", committed=True)
            assert aborted["aborted_transactions"] == [
                {"producer_id": opid, "first_offset": 0}]
            # the same producer ends its transaction after the restart
            assert T.produce(wire, "keeps-open", "open", 0,
                             T.txn_batch(pid, epoch, 2, [b"o3"]))["error_code"] == 0
            assert T.end_txn_settled(wire, "keeps-open", pid, epoch, True) == E.NONE
            assert T.latest_offset(wire, "open", committed=True) == 4
            assert _fetch_offset(wire, "g", "open") == (E.NONE, 17)
    finally:
        node.kill()

    # and once more: what the commit made stays
    node = BrokerProcess(data).start()
    try:
        with WireClient.to(node.bootstrap) as wire:
            assert _fetch_offset(wire, "g", "open") == (E.NONE, 17)
            assert T.latest_offset(wire, "open", committed=True) == 4
            assert T.fetch(wire, "open", committed=True)["aborted_transactions"] == []
    finally:
        node.terminate()


def test_a_commit_acknowledged_before_a_kill_gets_its_markers_after_it(tmp_path):
    """EndTxn is answered once PrepareCommit is durable; a kill before the
    markers are written leaves them to the coordinator when it loads again."""
    data = tmp_path / "data"
    node = BrokerProcess(data).start()
    try:
        with WireClient.to(node.bootstrap) as wire:
            create_topic(wire, "prepared", partitions=1)
            T.find_coordinator(wire, "prepared")
            answer = T.init_producer(wire, "prepared")
            pid, epoch = answer["producer_id"], answer["producer_epoch"]
            T.add_partitions(wire, "prepared", pid, epoch, [("prepared", 0)])
            T.produce(wire, "prepared", "prepared", 0, T.txn_batch(pid, epoch, 0, [b"x"]))
    finally:
        node.kill()
    # Make the log say PrepareCommit, as a kill between the answer and the
    # markers leaves it: append the record the coordinator writes.
    from kcoord.broker.transactions.metadata import TxnState
    from kcoord.protocol import txn_records
    from kcoord.storage.log import PartitionLog
    from kcoord.broker.groups.placement import coordinator_partition

    folder = data / f"__transaction_state-{coordinator_partition('prepared', 50)}"
    plog = PartitionLog(str(folder))
    key = txn_records.encode_key("prepared")
    value = txn_records.encode_value({
        "producer_id": pid, "producer_epoch": epoch, "transaction_timeout_ms": 60_000,
        "transaction_status": int(TxnState.PREPARE_COMMIT),
        "transaction_partitions": [{"topic": "prepared", "partition_ids": [0]}],
        "transaction_last_update_timestamp_ms": 1, "transaction_start_timestamp_ms": 1})
    plog.append_own([(key, value)], now_ms=2)
    plog.close()
    node = BrokerProcess(data).start()
    try:
        with WireClient.to(node.bootstrap) as wire:
            code = T.end_txn(wire, "prepared", pid, epoch, True)
            for _ in range(200):
                if code == E.NONE:
                    break
                code = T.end_txn(wire, "prepared", pid, epoch, True)
            assert code == E.NONE  # CompleteCommit: a retry
            assert T.latest_offset(wire, "prepared", committed=True) == 2
    finally:
        node.terminate()


def _copy(bootstrap: str, stop, total: int, progress: list) -> None:
    """An exactly-once copy loop as applications write it (confluent-kafka):
    consume from where the group's committed offset says, produce, commit the
    offsets with the output in one transaction.  Returns on the first error
    (the broker was killed) or when the input is copied."""
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka import TopicPartition as CTP

    consumer = producer = None
    try:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier",
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "socket.timeout.ms": 3000})
        consumer.assign([CTP("in", 0)])
        # (short timeouts: a producer left with records and a transaction for a
        # killed broker gives up on them, when it is closed, within seconds
        # instead of holding its thread for the default minute or more)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "copier-1",
                             "transaction.timeout.ms": 5000, "socket.timeout.ms": 3000,
                             "message.timeout.ms": 3000})
        producer.init_transactions(10)
        deadline = time.monotonic() + 60
        if consumer.committed([CTP("in", 0)], 10)[0].offset >= total:
            return
        while not stop.is_set() and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(10, 0.5) if not m.error()]
            if not batch:
                continue
            producer.begin_transaction()
            for message in batch:
                producer.produce("out", message.value(), partition=0)
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 5)
            producer.commit_transaction(5)
            progress.append(batch[-1].offset())
            if batch[-1].offset() + 1 >= total:
                return
    except KafkaException:
        return  # the broker went away: this instance stops, as an application's would
    finally:
        if producer is not None:
            producer.purge()
        if consumer is not None:
            try:
                consumer.close()
            except Exception:  # noqa: BLE001 - closing after a kill
                pass


def _read_committed(bootstrap: str) -> list[bytes]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker",
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                       "enable.partition.eof": True})
    reader.assign([CTP("out", 0)])
    values = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is None:
                continue
            if message.error():
                break
            values.append(message.value())
    finally:
        reader.close()
    return values


def test_a_copy_loop_killed_at_random_points_copies_every_record_exactly_once(tmp_path):
    import os
    import random
    import threading

    from confluent_kafka import Producer

    seed = int(os.environ.get("KCOORD_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    total = 4000
    data = tmp_path / "data"
    node = BrokerProcess(data).start()
    with WireClient.to(node.bootstrap) as wire:
        create_topic(wire, "in")
        create_topic(wire, "out")
    feed = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(total):
        feed.produce("in", b"record-%05d" % i, partition=0)
    assert feed.flush(30) == 0
    interrupted = 0  # rounds killed with the copy under way
    try:
        for _round in range(3):
            stop, progress = threading.Event(), []
            # A daemon: librdkafka can hold a call (send_offsets_to_transaction)
            # well past its timeout once its broker is gone; the instance is
            # abandoned then, as a crashed application's would be (the next
            # broker listens on another port: it cannot reach it).
            copier = threading.Thread(target=_copy, args=(node.bootstrap, stop, total, progress),
                                      daemon=True)
            copier.start()
            deadline = time.monotonic() + 20
            while not progress and copier.is_alive() and time.monotonic() < deadline:
                time.sleep(0.01)  # under way
            time.sleep(rng.uniform(0.0, 0.5))
            node.kill()
            stop.set()
            copier.join(15)
            interrupted += bool(progress) and progress[-1] + 1 < total
            node = BrokerProcess(data).start()
        stop, progress = threading.Event(), []
        _copy(node.bootstrap, stop, total, progress)  # to the end, undisturbed
        values = _read_committed(node.bootstrap)
    finally:
        node.kill()
    assert interrupted, f"seed {seed}: no kill landed while the copy was under way"
    assert values == [b"record-%05d" % i for i in range(total)], f"seed {seed}"
