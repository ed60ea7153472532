"""SIGKILL during a produce storm: every acknowledged record is there after the
restart, at the offset it was acknowledged with, and an idempotent producer's
retry of an acknowledged batch is still answered as a duplicate.

Three connections produce to three partitions (plain and idempotent
producers, several codecs, batches of varying size) while the broker, started
as users start it, is killed at a random moment under the default fsync policy
(``never``: what a process crash must not lose).  The seed is printed on
failure; ``KCOORD_CRASH_SEED`` replays.
"""

from __future__ import annotations

import os
import random
import threading
import time

from kcoord.protocol import compression
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import Record, build_batch, decode_record_set
from kcoord.protocol.client import WireClient
from tests.support import BrokerProcess, create_topic_offline, kill_during

ROUNDS = 3
PARTITIONS = 3
TOPIC = "storm"
CODECS = (compression.NONE, compression.GZIP, compression.LZ4, compression.ZSTD)


class Producer:
    """One connection producing to one partition; remembers what was acknowledged."""

    def __init__(self, partition: int, rng: random.Random, idempotent: bool):
        self.partition = partition
        self.rng = rng
        self.idempotent = idempotent
        self.producer_id = -1
        self.sequence = 0
        self.acked: dict[int, bytes] = {}  # offset -> value
        self.last_acked: tuple[bytes, int] | None = None  # (batch, base offset)
        self.counter = 0

    def _batch(self) -> tuple[bytes, list[bytes]]:
        count = self.rng.randint(1, 40)
        values = [b"p%d-%d-%s" % (self.partition, self.counter + i,
                                  b"x" * self.rng.randint(0, 300)) for i in range(count)]
        self.counter += count
        records = [Record(None, 1_700_000_000_000, b"k%d" % i, v) for i, v in enumerate(values)]
        extra = {}
        if self.idempotent:
            extra = {"producer_id": self.producer_id, "producer_epoch": 0,
                     "base_sequence": self.sequence}
        return build_batch(records, compression_type=self.rng.choice(CODECS), **extra), values

    def run(self, port: int, stop: threading.Event) -> None:
        try:
            client = WireClient("127.0.0.1", port, timeout=10)
            if self.idempotent and self.producer_id < 0:
                self.producer_id = client.call(22, 4, {"transactional_id": None,
                                                      "transaction_timeout_ms": 1000})[
                    "producer_id"]
            for _ in range(20_000):
                if stop.is_set():
                    return
                batch, values = self._batch()
                answer = client.call(0, 9, {
                    "transactional_id": None, "acks": self.rng.choice((1, -1)),
                    "timeout_ms": 5000, "topic_data": [{"name": TOPIC, "partition_data": [
                        {"index": self.partition, "records": batch}]}]})
                part = answer["responses"][0]["partition_responses"][0]
                assert part["error_code"] == ErrorCode.NONE, part
                for i, value in enumerate(values):
                    self.acked[part["base_offset"] + i] = value
                self.last_acked = (batch, part["base_offset"])
                self.sequence += len(values)
        except (OSError, EOFError, ConnectionError):
            pass  # the broker was killed


def _read_all(client: WireClient, partition: int) -> dict[int, bytes]:
    found, offset = {}, 0
    while True:
        answer = client.call(1, 11, {
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 8 << 20, "topics": [
                {"topic": TOPIC, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                 "partition_max_bytes": 4 << 20}]}]})
        part = answer["responses"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.NONE, part
        if not part["records"]:
            return found
        for batch in decode_record_set(part["records"]):
            for record in batch.records:
                found[record.offset] = record.value
                offset = record.offset + 1


def test_acknowledged_records_survive_sigkill_during_a_produce_storm(tmp_path):
    seed = int(os.environ.get("KCOORD_CRASH_SEED") or time.time_ns() % 1_000_000)
    rng = random.Random(seed)
    data = tmp_path / "data"
    producers = [Producer(p, random.Random(rng.random()), idempotent=p != 0)
                 for p in range(PARTITIONS)]
    create_topic_offline(data, TOPIC, PARTITIONS)
    for round_ in range(ROUNDS):
        context = f"seed {seed}, round {round_}"
        kill_during(data, producers, rng, context)

        again = BrokerProcess(data).start()
        try:
            with WireClient("127.0.0.1", again.port) as client:
                for producer in producers:
                    stored = _read_all(client, producer.partition)
                    missing = [o for o in producer.acked if stored.get(o) != producer.acked[o]]
                    assert not missing, (context, producer.partition, missing[:5])
                    assert sorted(stored) == list(range(len(stored))), context
                    if producer.idempotent and producer.last_acked is not None:
                        batch, base = producer.last_acked
                        retry = client.call(0, 9, {
                            "transactional_id": None, "acks": -1, "timeout_ms": 5000,
                            "topic_data": [{"name": TOPIC, "partition_data": [
                                {"index": producer.partition, "records": batch}]}]})
                        part = retry["responses"][0]["partition_responses"][0]
                        assert (part["error_code"], part["base_offset"]) == (0, base), context
                    # Records written but not acknowledged before the kill may stay;
                    # the next round carries on from what the log holds.
                    producer.acked = stored
                    if producer.idempotent:
                        # Its only writer: one sequence number per stored record.
                        producer.sequence = len(stored)
        finally:
            assert again.terminate() == 0, context
    assert all(p.acked for p in producers), f"seed {seed}: nothing was acknowledged"

