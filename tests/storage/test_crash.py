"""SIGKILL campaign through the log manager: every acknowledged record survives.

A child process (``crash_child.py``) works a data dir through ``LogManager``
(appends, compaction, retention, checkpoints, rolls, clean restarts) and is
killed at random moments; each round reopens the dir under another cleanup
policy, sometimes after tearing the tail of a segment as a write cut short
would, and checks what a consumer would read:

* every acknowledged record is there, unless compaction removed it for a newer
  record of the same key, or retention removed it below the log start offset;
* nothing is there that was never written, offsets only go up, the log end is
  past every acknowledged offset and the log start is not past the end;
* every segment file ends at its last whole batch (a crash is always recovered)
  and a read at any offset starts at the batch that holds it (indexes agree
  with the log);
* a clean close and reopen gives the same records.

Some rounds also garble an offset index, which opening must detect and rebuild.

This is the one storage test that waits on the wall clock: the child must be
killed at random moments; each round is bounded.  The seed is printed on
failure; ``KCOORD_CRASH_SEED`` replays a run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from kcoord.protocol import records as R
from kcoord.storage import LogConfig
from kcoord.storage.manager import LogManager
from tests.storage.crash_child import PARTITIONS, config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_child.py")
POLICIES = ("compact", "delete", "compact,delete")
ROUNDS = 6


def _run_and_kill(data_dir: str, seed: int, policy: str, rng: random.Random) -> list[tuple]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    child = subprocess.Popen([sys.executable, CHILD, data_dir, str(seed), policy],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        first = child.stdout.readline()
        assert first, "child died before acknowledging anything"
        time.sleep(rng.uniform(0.15, 0.6))
        os.kill(child.pid, signal.SIGKILL)
        rest = child.stdout.read()
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    acked = []
    for line in (first + rest).decode().splitlines():
        parts = line.split(" ")
        if len(parts) == 4 and parts[3].startswith(f"{parts[0]}{parts[1]}"):
            acked.append((parts[0], int(parts[1]), parts[2], parts[3]))
        # a line cut by the kill was never acknowledged
    return acked


def _tear_a_tail(data_dir: str, rng: random.Random) -> None:
    """Leave half a batch at the end of an active segment, as a cut-short write does."""
    folder = os.path.join(data_dir, f"{rng.choice(PARTITIONS)}-0")
    logs = sorted(f for f in os.listdir(folder) if f.endswith(".log"))
    if logs:
        junk = R.build_batch([R.Record(None, 1, b"torn", b"t" * 200)])
        with open(os.path.join(folder, logs[-1]), "ab") as f:
            f.write(junk[: rng.randrange(1, len(junk) - 1)])


def _garble_an_index(data_dir: str, rng: random.Random) -> None:
    """Overwrite an offset index with random entries: indexes are caches nothing
    checksums, so opening must notice (sanity check) and rebuild them."""
    folder = os.path.join(data_dir, f"{rng.choice(PARTITIONS)}-0")
    indexes = sorted(f for f in os.listdir(folder) if f.endswith(".index"))
    if len(indexes) > 1:
        path = os.path.join(folder, rng.choice(indexes[:-1]))
        size = os.path.getsize(path)
        if size:
            with open(path, "r+b") as f:
                f.write(rng.randbytes(size))


def _records(plog):
    data = b"".join(plog.batches())
    return [(r.offset, r.key.decode(), r.value.decode()) for r in R.iter_records(data)]


def _check_files_and_indexes(plog) -> None:
    for segment in plog.segments:
        end = 0
        for pos, header in segment.headers():
            end = pos + header.size
        assert end == segment.size == os.path.getsize(segment.log_path), segment
    for offset, _k, _v in _records(plog)[::7]:
        data = plog.read(offset, 1)
        header = R.batch_header(data)
        assert header.base_offset <= offset <= header.last_offset, (plog.name, offset)


def _check(manager: LogManager, acked: dict, context: str) -> dict:
    seen = {}
    for topic in PARTITIONS:
        plog = manager.get(topic, 0)
        if plog is None:
            assert not any(t == topic for t, _o in acked), context
            continue
        present = _records(plog)
        offsets = [o for o, _k, _v in present]
        assert offsets == sorted(set(offsets)), (context, topic)
        assert plog.log_start_offset <= plog.log_end_offset, (context, topic)
        newest = {}
        for o, k, v in present:
            assert v.startswith(f"{topic}{o}"), (context, topic, o, v)  # never written otherwise
            newest[k] = max(o, newest.get(k, -1))
        by_offset = {o: (k, v) for o, k, v in present}
        mine = {o: kv for (t, o), kv in acked.items() if t == topic}
        if mine:
            assert plog.log_end_offset > max(mine), (context, topic)
        for offset, (key, value) in mine.items():
            if offset in by_offset:
                assert by_offset[offset] == (key, value), (context, topic, offset)
            elif offset >= plog.log_start_offset:
                # Only compaction may drop it, and only for a newer record of its key.
                assert newest.get(key, -1) > offset, (context, topic, offset, key)
        _check_files_and_indexes(plog)
        seen[topic] = present
    return seen


def test_acknowledged_records_survive_sigkill_under_every_policy(tmp_path):
    seed = int(os.environ.get("KCOORD_CRASH_SEED") or time.time_ns() % 1_000_000)
    rng = random.Random(seed)
    data_dir = str(tmp_path / "data")
    acked: dict[tuple[str, int], tuple[str, str]] = {}
    for round_ in range(ROUNDS):
        policy = POLICIES[round_ % len(POLICIES)]
        for topic, offset, key, value in _run_and_kill(data_dir, rng.randrange(1 << 30), policy, rng):
            acked[(topic, offset)] = (key, value)
        marker = os.path.exists(os.path.join(data_dir, ".kafka_cleanshutdown"))
        if rng.random() < 0.5 and not marker:
            # (A torn write cannot follow a clean close: nothing writes after it.)
            _tear_a_tail(data_dir, rng)
        if rng.random() < 0.5:
            _garble_an_index(data_dir, rng)
        reopen = POLICIES[(round_ + 1) % len(POLICIES)]
        context = f"seed {seed}, round {round_}, written as {policy}, reopened as {reopen}"
        # (The marker may be there: the kill can land after a clean close and
        # before the reopen removed it, with nothing written in between.)
        manager = LogManager(data_dir, config(reopen))
        manager.open_all()
        try:
            first = _check(manager, acked, context)
        except AssertionError as exc:
            raise AssertionError(f"{context}: {exc}") from exc
        manager.close()
        again = LogManager(data_dir, config(reopen))
        assert again.clean_shutdown
        again.open_all()
        assert _check(again, acked, context + ", clean reopen") == first, context
        again.close()
        os.unlink(os.path.join(data_dir, ".kafka_cleanshutdown"))  # the child's next crash
    assert len(acked) > 100, f"seed {seed}"


@pytest.mark.parametrize("policy", POLICIES)
def test_a_torn_tail_is_cut_under_every_policy(tmp_path, policy):
    data_dir = str(tmp_path / "data")
    manager = LogManager(data_dir, config(policy))
    plog = manager.get_or_create("c", 0)
    for i in range(30):
        plog.append(R.build_batch([R.Record(None, 1_000 + i, b"k%d" % (i % 5), b"c%d." % i)]))
    end = plog.log_end_offset
    # SIGKILL in the middle of a write: no close, half a batch at the end.
    junk = R.build_batch([R.Record(None, 1, b"torn", b"t" * 200)])
    with open(plog.segments[-1].log_path, "ab") as f:
        f.write(junk[:100])
    reopened = LogManager(data_dir, LogConfig(cleanup_policy=policy))
    reopened.open_all()
    again = reopened.get("c", 0)
    assert again.log_end_offset == end
    _check_files_and_indexes(again)
    again.append(R.build_batch([R.Record(None, 5_000, b"k", b"after")]))
    assert _records(again)[-1] == (end, "k", "after")
