"""The pipeline's jobs on a store real clients wrote, read while the broker runs:
``offsets`` equals OffsetFetch, ``lag`` equals end offset minus committed offset,
``history`` holds every commit, a torn tail changes nothing, and the commands
write what they say."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

from kcoord.pipeline import jobs
from kcoord.pipeline.cli import COMMANDS
from kcoord.protocol import group_records as G
from kcoord.protocol.records import Record, build_batch, build_control_batch
from tests.pipeline.conftest import _produce, next_millisecond


# What conftest's session was started with, which no job may change.
TEST_SETTINGS = {"spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false",
                 "spark.app.name": "kcoord tests", "spark.master": "local[2]"}


def _settings(spark):
    return {k: spark.conf.get(k) for k in TEST_SETTINGS}


def test_a_job_run_in_a_running_session_uses_it_as_it_is(spark):
    again = jobs.session("local[1]", "another app", conf={"spark.sql.shuffle.partitions": "5"})
    assert again is spark
    assert _settings(spark) == TEST_SETTINGS


def _dirs(store):
    return [str(store.data_dir)]


def _offsets(spark, dirs):
    return {(r.group, r.topic, r.partition): (r.committed_offset, r.metadata)
            for r in jobs.offsets(spark, dirs).collect()}


def test_offsets_equal_what_the_live_broker_answers_to_offset_fetch(spark, store):
    got = _offsets(spark, _dirs(store))
    assert got == store.fetched
    groups = {g for g, _t, _p in got}
    assert groups == {"billing", "audit", "trimmed"}  # "gone" was deleted
    assert ("trimmed", "orders", 1) not in got and ("trimmed", "orders", 2) in got  # OffsetDelete
    assert got[("audit", "payments", 0)] == (12, "audit-12")


def test_lag_is_the_end_offset_minus_the_committed_offset_for_every_partition(spark, store):
    per_partition, per_group = jobs.lag(spark, _dirs(store))
    rows = {(r.group, r.topic, r.partition): r for r in per_partition.collect()}
    assert set(rows) == set(store.fetched)
    for key, (committed, _meta) in store.fetched.items():
        end = store.end_offsets[key[1:]]
        assert (rows[key].committed_offset, rows[key].end_offset, rows[key].lag) == (
            committed, end, end - committed), key
    by_group = {r.group: r for r in per_group.collect()}
    for group in ("billing", "audit", "trimmed"):
        mine = [r.lag for k, r in rows.items() if k[0] == group]
        assert (by_group[group].lag, by_group[group].max_partition_lag,
                by_group[group].partitions) == (sum(mine), max(mine), len(mine))
    assert by_group["billing"].lag >= 60  # the records produced after its last commit


def test_history_holds_every_commit(spark, store):
    got = Counter((r.group, r.topic, r.partition, r.committed_offset)
                  for r in jobs.history(spark, _dirs(store)).collect())
    assert got == Counter(store.commits)


def test_lag_over_time_uses_the_end_offset_at_each_commit(spark, store):
    rows = jobs.lag_history(spark, _dirs(store)).collect()
    assert Counter((r.group, r.topic, r.partition, r.committed_offset) for r in rows) == \
        Counter(store.commits)
    for r in rows:
        if r.group == "billing":
            # Committed before the last 60 records were produced: the 300 first
            # records were all there, the later ones not yet.
            assert r.end_offset == 100, r
            assert r.lag == 100 - r.committed_offset
    now = {(r.topic, r.partition): r.end_offset for r in jobs.end_offsets(spark, _dirs(store)).collect()
           if r.topic != "__consumer_offsets"}
    assert now == store.end_offsets


def test_lag_over_time_follows_the_log_as_it_grows_between_commits(spark, broker, tmp_path):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("ticks", 1, 1), NewTopic("idle", 1, 1)]).values():
        f.result(30)
    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "steady"})

    def commit(topic, offset):
        group.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        next_millisecond()  # records produced next are stamped after this commit

    commit("ticks", 0)  # before the partition has any record
    commit("idle", 0)  # a partition that never gets one
    _produce(broker.bootstrap, "ticks", 10, 1)
    commit("ticks", 6)
    _produce(broker.bootstrap, "ticks", 5, 1)  # the end offset grows from 10 to 15
    commit("ticks", 14)
    group.close()
    del admin
    broker.stop()  # the store as the broker left it
    data = str(tmp_path / "broker-data")  # the broker fixture's store

    def lag_rows(dirs):
        rows = sorted(jobs.lag_history(spark, dirs).collect(), key=lambda r: r.commit_timestamp)
        assert {r.group for r in rows} == {"steady"}
        return [(r.topic, r.committed_offset, r.end_offset, r.lag) for r in rows]

    assert lag_rows([data]) == [("ticks", 0, 0, 0), ("idle", 0, 0, 0),
                                ("ticks", 6, 10, 4), ("ticks", 14, 15, 1)]
    # A store without the partition's folder does not know its end offset at any time.
    partial = tmp_path / "without-ticks"
    shutil.copytree(data, partial, ignore=lambda d, names: ["ticks-0"] if d == data else [])
    assert lag_rows([str(partial)]) == [("ticks", 0, None, None), ("idle", 0, 0, 0),
                                        ("ticks", 6, None, None), ("ticks", 14, None, None)]


def test_a_torn_tail_is_ignored(spark, store, tmp_path):
    copy = tmp_path / "store"
    shutil.copytree(store.data_dir, copy)
    half = build_batch([Record(None, 1, b"k", b"v" * 100)], base_offset=10_000)
    torn = []
    for folder in sorted(copy.iterdir()):
        logs = sorted(folder.glob("*.log")) if folder.is_dir() else []
        if logs and folder.name.startswith(("__consumer_offsets-", "orders-")):
            with open(logs[-1], "ab") as f:
                f.write(half[: len(half) // 2])
            torn.append(folder.name)
    assert any(n.startswith("__consumer_offsets") for n in torn) and "orders-0" in torn
    assert _offsets(spark, [str(copy)]) == store.fetched
    per_partition, _ = jobs.lag(spark, [str(copy)])
    assert {(r.topic, r.partition): r.end_offset for r in per_partition.collect()} == {
        k[1:]: store.end_offsets[k[1:]] for k in store.fetched}


def test_the_same_partitions_in_several_data_dirs_count_once(spark, store, tmp_path):
    replica = tmp_path / "replica"
    shutil.copytree(store.data_dir, replica)
    dirs = [str(store.data_dir), str(replica)]
    assert _offsets(spark, dirs) == store.fetched
    assert Counter((r.group, r.topic, r.partition, r.committed_offset)
                   for r in jobs.history(spark, dirs).collect()) == Counter(store.commits)


def test_the_records_source_reads_every_record_with_its_fields(spark, store):
    from kcoord.pipeline import source

    df = source.load(spark, "records", _dirs(store), topics=["orders"])
    rows = df.collect()
    assert len(rows) == store.end_offsets[("orders", 0)] + store.end_offsets[("orders", 1)] + \
        store.end_offsets[("orders", 2)]
    first = next(r for r in rows if r.partition == 0 and r.offset == 0)
    assert (bytes(first.key), bytes(first.value), [(h.key, bytes(h.value)) for h in first.headers]) == (
        b"k0", b"v0", [("n", b"0")])
    everything = source.load(spark, "records", _dirs(store)).select("topic").distinct().collect()
    assert {r.topic for r in everything} == {"orders", "payments"}  # not __consumer_offsets


@pytest.mark.parametrize("job", sorted(COMMANDS))
def test_each_command_writes_its_output(store, tmp_path, job, capsys, spark):
    from kcoord.broker.cli import main

    out = tmp_path / job
    assert main(["pipeline", job, "--data-dir", str(store.data_dir), "--out", str(out),
                 "--master", "local[2]"]) == 0
    err = capsys.readouterr().err
    assert "kcoord pipeline:" in err and " in " in err  # progress lines with the elapsed time
    assert "starting Spark" not in err  # the tests' session served the job, and is still up:
    assert _settings(spark) == TEST_SETTINGS  # with its own settings, not the CLI's
    assert spark.range(3).count() == 3
    if job == "history":
        written = spark.read.parquet(str(out))
        assert written.count() == len(store.commits)
        assert {p.name for p in out.iterdir() if p.is_dir()} == {
            f"group={g}" for g, *_ in store.commits}
    elif job == "offsets":
        got = {(r.group, r.topic, r.partition): (r.committed_offset, r.metadata)
               for r in spark.read.parquet(str(out)).collect()}
        assert got == store.fetched
    elif job == "lag":
        assert spark.read.parquet(str(out / "partitions")).count() == len(store.fetched)
        assert {r.group for r in spark.read.parquet(str(out / "groups")).collect()} == {
            "billing", "audit", "trimmed"}
        assert spark.read.parquet(str(out / "history")).count() == len(store.commits)
    elif job == "all":  # every job, one session, each into its folder
        assert sorted(p.name for p in out.iterdir()) == ["history", "lag", "offsets", "report"]
        assert spark.read.parquet(str(out / "history")).count() == len(store.commits)
        assert spark.read.parquet(str(out / "offsets")).count() == len(store.fetched)
        assert spark.read.parquet(str(out / "lag" / "partitions")).count() == len(store.fetched)
        assert "billing" in (out / "report" / "report.html").read_text()
    else:
        page = (out / "report.html").read_text()
        assert all(g in page for g in ("billing", "audit", "trimmed"))


def test_the_cli_reads_a_store_split_over_two_data_dirs_counting_each_record_once(
        spark, store, tmp_path, capsys):
    from kcoord.broker.cli import main

    # orders in one folder, payments in the other, __consumer_offsets in both (as
    # replicas on two brokers): the lag needs both, and each commit counts once.
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in store.data_dir.iterdir():
        places = {"__consumer_offsets": (a, b), "orders": (a,), "payments": (b,)}.get(
            folder.name.rpartition("-")[0], ()) if folder.is_dir() else ()
        for place in places:
            shutil.copytree(folder, place / folder.name)
    out = tmp_path / "lag"
    assert main(["pipeline", "lag", "--data-dir", str(a), "--data-dir", str(b), "--out", str(out),
                 "--master", "local[2]"]) == 0
    assert f"computing lag from {a}, {b}" in capsys.readouterr().err
    got = {(r.group, r.topic, r.partition): (r.committed_offset, r.end_offset)
           for r in spark.read.parquet(str(out / "partitions")).collect()}
    assert got == {key: (committed, store.end_offsets[key[1:]])
                   for key, (committed, _meta) in store.fetched.items()}
    assert {t for _g, t, _p in got} == {"orders", "payments"}
    assert Counter((r.group, r.topic, r.partition, r.committed_offset)
                   for r in spark.read.parquet(str(out / "history")).collect()) == Counter(store.commits)


def test_commands_fail_clearly_without_java_or_data(tmp_path, monkeypatch, capsys):
    from kcoord.broker.cli import main

    assert main(["pipeline", "offsets", "--data-dir", str(tmp_path / "nope"), "--out",
                 str(tmp_path / "o")]) == 2
    assert "no such data dir" in capsys.readouterr().err
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["pipeline", "lag", "--data-dir", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "Java 17 or newer is needed" in capsys.readouterr().err


def test_offsets_committed_in_a_transaction_count_only_once_it_commits(spark, tmp_path):
    folder = tmp_path / "__consumer_offsets-3"
    folder.mkdir()

    def commit(partition, offset, base, producer=None):
        txn = {} if producer is None else {"producer_id": producer, "producer_epoch": 0,
                                           "transactional": True}
        return build_batch([Record(None, 1_000 + base, G.offset_commit_key("g", "t", partition),
                                   G.offset_commit_value(offset, "", 1_000 + base))],
                           base_offset=base, **txn)

    def marker(kind, base, producer):  # 0 abort, 1 commit
        return build_control_batch(kind, producer_id=producer, producer_epoch=0,
                                   coordinator_epoch=0, timestamp=1_000 + base, base_offset=base)

    (folder / f"{0:020d}.log").write_bytes(b"".join([
        commit(0, 5, 0),
        commit(0, 9, 1, producer=7), marker(0, 2, 7),  # aborted: 9 never counts
        commit(1, 4, 3, producer=7), commit(1, 6, 4, producer=8),
        marker(1, 5, 7),  # producer 7 commits; producer 8's transaction is still open
    ]))
    dirs = [str(tmp_path)]
    assert _offsets(spark, dirs) == {("g", "t", 0): (5, ""), ("g", "t", 1): (4, "")}
    assert sorted((r.partition, r.committed_offset) for r in jobs.history(spark, dirs).collect()) == [
        (0, 5), (1, 4)]


def test_an_empty_store_gives_empty_results_and_a_report_without_commits(spark, tmp_path):
    from kcoord.pipeline import report

    empty = tmp_path / "data"
    empty.mkdir()
    (empty / "meta.properties").write_text("node.id=1\n")
    dirs = [str(empty)]
    assert jobs.offsets(spark, dirs).count() == 0
    per_partition, per_group = jobs.lag(spark, dirs)
    assert per_partition.count() == per_group.count() == 0
    page = open(report.write(spark, dirs, str(tmp_path / "out"))).read()
    assert "0 groups, 0 partitions with committed offsets" in page and "no commits" in page
