"""SIGKILL campaign through the broker: topic creations and deletions that were
acknowledged survive a crash, deleted topics never come back, and every topic
comes back with its id and its partition folders.

A client creates and deletes topics over the wire (CreateTopics, DeleteTopics)
while the broker is killed at a random moment; the broker then restarts on the
same data dir.  The seed is printed on failure; ``KCOORD_CRASH_SEED`` replays.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time

from kcoord.protocol.errors import ErrorCode
from kcoord.storage.manager import read_partition_metadata
from kcoord.protocol.client import WireClient
from tests.support import BrokerProcess

ROUNDS = 3


def _work(port: int, rng: random.Random, acked: dict, deleted: set, stop: threading.Event) -> None:
    """Create and delete topics until the broker dies; record what was acknowledged."""
    try:
        client = WireClient("127.0.0.1", port, timeout=10)
        n = 0
        while not stop.is_set() and n < 5_000:
            n += 1
            live = [name for name, state in acked.items() if state is not None]
            if live and rng.random() < 0.4:
                name = rng.choice(live)
                answer = client.call(20, 4, {"topic_names": [name], "timeout_ms": 5000})
                if answer["responses"][0]["error_code"] == ErrorCode.NONE:
                    deleted.add((name, acked[name][0]))
                    acked[name] = None
            else:
                name = f"t{rng.randrange(40)}"
                partitions = rng.choice((1, 2, 3))
                answer = client.call(19, 7, {
                    "topics": [{"name": name, "num_partitions": partitions,
                                "replication_factor": 1, "assignments": [], "configs": []}],
                    "timeout_ms": 5000, "validate_only": False})["topics"][0]
                if answer["error_code"] == ErrorCode.NONE:
                    acked[name] = (answer["topic_id"], partitions)
    except (OSError, EOFError, ConnectionError):
        pass  # the broker was killed


def test_acknowledged_topic_operations_survive_sigkill(tmp_path):
    seed = int(os.environ.get("KCOORD_CRASH_SEED") or time.time_ns() % 1_000_000)
    rng = random.Random(seed)
    data = tmp_path / "data"
    acked: dict[str, tuple | None] = {}
    deleted: set = set()  # (name, topic id) of every acknowledged deletion
    for round_ in range(ROUNDS):
        broker = BrokerProcess(data).start()
        stop = threading.Event()
        worker = threading.Thread(target=_work, args=(broker.port, rng, acked, deleted, stop), daemon=True)
        worker.start()
        time.sleep(rng.uniform(0.3, 1.2))
        broker.kill()
        stop.set()
        worker.join(15)
        assert not worker.is_alive()

        again = BrokerProcess(data).start()
        try:
            client = WireClient("127.0.0.1", again.port)
            listed = {t["name"]: t for t in client.call(3, 12, {
                "topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})["topics"]}
            client.close()
            context = f"seed {seed}, round {round_}"
            for name, topic in listed.items():
                # A deleted topic never comes back (a new one of the same name may).
                assert (name, topic["topic_id"]) not in deleted, (context, name)
            for name, state in acked.items():
                if state is None:
                    continue
                topic_id, partitions = state
                if name not in listed:
                    continue  # deleted by a request the kill cut short
                if listed[name]["topic_id"] != topic_id:
                    continue  # deleted and created again by requests the kill cut short
                assert len(listed[name]["partitions"]) == partitions, context
                for p in range(partitions):
                    folder = data / f"{name}-{p}"
                    assert folder.is_dir(), (context, name, p)
                    assert read_partition_metadata(str(folder)) is not None, (context, name, p)
            for entry in os.listdir(data):
                m = re.fullmatch(r"(.+)-(\d+)", entry)
                if m and (data / entry).is_dir():
                    # every partition folder belongs to a listed topic
                    assert m.group(1) in listed, (context, entry)
            # What survived is what the broker now answers: carry it into the next round.
            for name in list(acked):
                if name in listed:
                    acked[name] = (listed[name]["topic_id"], len(listed[name]["partitions"]))
                elif name != "__consumer_offsets":
                    acked[name] = None
        finally:
            assert again.terminate() == 0
    # The run did something: topics were acknowledged (the random deletes may
    # have taken every one of them by the end).
    assert acked, f"seed {seed}"

