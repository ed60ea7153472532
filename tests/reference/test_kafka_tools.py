"""Apache Kafka's own command-line tools, run from the resolved jars against kcoord.

Each tool is run the way its script runs it (``kafka-topics.sh`` is
``java org.apache.kafka.tools.TopicCommand``), against a kcoord of its own
(``make_broker``), and what it prints is checked as a user reads it.
"""

from __future__ import annotations

import json
import time
import re

import pytest

from kcoord.storage.config import LogConfig
from kcoord.storage.log import PartitionLog
from tests.reference import kafka
from tests.storage.helpers import batch


@pytest.fixture(scope="module")
def tools(_reference_pool):
    """The Kafka jars, resolved (and skipped or failed like the reference brokers)."""
    _reference_pool.get(kafka.MAIN_VERSION)
    return kafka


def _run(main_class: str, *args: str) -> str:
    done = kafka.run_tool(main_class, *args)
    assert done.returncode == 0, f"{main_class} {args} exited {done.returncode}:\n" \
                                 f"{done.stdout}\n{done.stderr}"
    return done.stdout


def test_kafka_topics_create_list_describe_delete(tools, make_broker):
    node = make_broker()
    topics = "org.apache.kafka.tools.TopicCommand"
    server = ("--bootstrap-server", node.bootstrap)
    out = _run(topics, *server, "--create", "--topic", "orders", "--partitions", "3",
               "--replication-factor", "1", "--config", "cleanup.policy=compact")
    assert "Created topic orders." in out
    assert "orders" in _run(topics, *server, "--list").split()
    described = _run(topics, *server, "--describe", "--topic", "orders")
    assert re.search(r"Topic: orders\s+TopicId: \S+\s+PartitionCount: 3\s+ReplicationFactor: 1",
                     described)
    assert "cleanup.policy=compact" in described
    for p in range(3):
        assert re.search(rf"Partition: {p}\s+Leader: 1\s+Replicas: 1\s+Isr: 1", described)
    bad = kafka.run_tool(topics, *server, "--create", "--topic", "orders", "--partitions", "1")
    assert bad.returncode != 0 and "already exists" in bad.stdout + bad.stderr
    _run(topics, *server, "--delete", "--topic", "orders")
    assert "orders" not in _run(topics, *server, "--list").split()


def test_kafka_configs_describe_topic_and_broker(tools, make_broker):
    node = make_broker()
    node.call(lambda: node.broker.topics.create("configured", 1, {"retention.ms": "1234"}))
    configs = "org.apache.kafka.tools.ConfigCommand"
    server = ("--bootstrap-server", node.bootstrap)
    out = _run(configs, *server, "--describe", "--entity-type", "topics",
               "--entity-name", "configured")
    assert "retention.ms=1234" in out
    everything = _run(configs, *server, "--describe", "--all", "--entity-type", "topics",
                      "--entity-name", "configured")
    assert "segment.bytes=67108864" in everything and "cleanup.policy=delete" in everything
    broker = _run(configs, *server, "--describe", "--all", "--entity-type", "brokers",
                  "--entity-name", "1")
    assert "num.partitions=1" in broker
    assert "group.initial.rebalance.delay.ms=0" in broker


def test_kafka_configs_sets_and_deletes_a_broker_logger_s_level(tools, make_broker):
    """kafka-configs --entity-type broker-loggers: a logger's level set while the
    broker runs, described, and deleted (it follows the root's again)."""
    from kcoord.broker import logs

    node = make_broker()
    configs = "org.apache.kafka.tools.ConfigCommand"
    server = ("--bootstrap-server", node.bootstrap)
    entity = ("--entity-type", "broker-loggers", "--entity-name", "1")
    root = logs.root_level()
    try:
        _run(configs, *server, "--alter", *entity, "--add-config", "kcoord.groups=DEBUG")
        described = _run(configs, *server, "--describe", *entity)
        assert "kcoord.groups=DEBUG" in described and f"kcoord.topics={root}" in described
        assert f"root={root}" in described
        _run(configs, *server, "--alter", *entity, "--delete-config", "kcoord.groups")
        assert f"kcoord.groups={root}" in _run(configs, *server, "--describe", *entity)
    finally:
        logs.set_level("kcoord.groups", None)


def _configs_session(bootstrap: str, topic: str) -> list[str]:
    """kafka-configs altering a topic: add, describe, delete, describe."""
    configs = "org.apache.kafka.tools.ConfigCommand"
    server = ("--bootstrap-server", bootstrap)
    _run("org.apache.kafka.tools.TopicCommand", *server, "--create", "--topic", topic, "--partitions", "1",
         "--replication-factor", "1")
    entity = ("--entity-type", "topics", "--entity-name", topic)
    outputs = [
        _run(configs, *server, "--alter", *entity, "--add-config",
             "retention.ms=86400000,cleanup.policy=[compact,delete],max.message.bytes=2000000"),
        _run(configs, *server, "--describe", *entity),
        _run(configs, *server, "--alter", *entity, "--delete-config", "retention.ms"),
        _run(configs, *server, "--describe", *entity),
    ]
    bad = kafka.run_tool(configs, *server, "--alter", *entity, "--add-config",
                         "retention.ms=soon")
    outputs.append((bad.returncode, [line for line in (bad.stdout + bad.stderr).splitlines()
                                     if "Invalid value" in line][:1]))
    return [o.replace(topic, "<topic>") if isinstance(o, str) else o for o in outputs]


def test_kafka_configs_alters_a_topic_as_on_kafka(tools, make_broker, scratch_kafka):
    """``kafka-configs --alter`` (IncrementalAlterConfigs) adds and deletes a topic's
    configs, and ``--describe`` shows them, with the same output as on Kafka;
    a bad value is refused with Kafka's words."""
    import uuid

    topic = f"altered-{uuid.uuid4().hex[:8]}"
    ours = _configs_session(make_broker().bootstrap, topic)
    theirs = _configs_session(scratch_kafka.bootstrap, topic)
    assert "retention.ms=86400000" in ours[1] and "cleanup.policy=compact,delete" in ours[1]
    assert "retention.ms" not in ours[3] and "max.message.bytes=2000000" in ours[3]
    assert ours[4][0] != 0 and "retention.ms" in ours[4][1][0]
    assert ours == theirs


def _replica_tools_session(bootstrap: str, topic: str) -> list[str]:
    """kafka-log-dirs, kafka-leader-election, kafka-reassign-partitions --list
    and kafka-transactions describe-producers on one topic."""
    import json

    from confluent_kafka import Producer

    server = ("--bootstrap-server", bootstrap)
    _run("org.apache.kafka.tools.TopicCommand", *server, "--create", "--topic", topic,
         "--partitions", "2", "--replication-factor", "1")
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(5):
        producer.produce(topic, b"x" * 10, partition=0)
    assert producer.flush(10) == 0
    dirs = _run("org.apache.kafka.tools.LogDirsCommand", *server, "--describe",
                "--topic-list", topic)
    described = json.loads(dirs.strip().splitlines()[-1])
    (broker,) = described["brokers"]
    (log_dir,) = broker["logDirs"]
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    election = _run("org.apache.kafka.tools.LeaderElectionCommand", *server,
                    "--election-type", "preferred", "--topic", topic, "--partition", "0")
    reassign = _run("org.apache.kafka.tools.reassign.ReassignPartitionsCommand", *server,
                    "--list")
    producers = _run("org.apache.kafka.tools.TransactionsCommand", *server,
                     "describe-producers", "--topic", topic, "--partition", "0")
    rows = [line.split() for line in producers.strip().splitlines()]
    return [sorted(sizes), sizes[f"{topic}-0"] > 0, log_dir["error"],
            election.replace(topic, "<topic>").strip(), reassign.strip(),
            rows[0], [row[1:3] for row in rows[1:]]]


def test_replica_and_producer_tools_answer_as_on_kafka(tools, make_broker, scratch_kafka):
    """kafka-log-dirs (sizes per partition), kafka-leader-election (nothing to
    elect on one node), kafka-reassign-partitions --list (nothing in progress)
    and kafka-transactions describe-producers (the idempotent producer that
    wrote), with the same results as on Kafka."""
    import uuid

    topic = f"replicas-{uuid.uuid4().hex[:8]}"
    ours = _replica_tools_session(make_broker().bootstrap, topic)
    theirs = _replica_tools_session(scratch_kafka.bootstrap, topic)
    assert ours[0] == [f"{topic}-0", f"{topic}-1"] and ours[1] is True
    assert ours[5][:3] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch"]
    assert ours[6] == [["0", "-1"]]  # epoch 0, no transaction coordinator
    assert ours == theirs


def test_kafka_broker_api_versions(tools, make_broker):
    node = make_broker()
    out = _run("org.apache.kafka.tools.BrokerApiVersionsCommand",
               "--bootstrap-server", node.bootstrap)
    assert f"127.0.0.1:{node.port} (id: 1 rack: null" in out
    assert re.search(r"Metadata\(3\): 0 to 13 \[usable: 13\]", out)
    assert re.search(r"CreateTopics\(19\): 0 to 7 \[usable: 7\]", out)
    assert re.search(r"Produce\(0\): 0 to 13 \[usable: 13\]", out)
    assert re.search(r"Fetch\(1\): 0 to 18 \[usable: 18\]", out)
    assert re.search(r"OffsetForLeaderEpoch\(23\): 0 to 4 \[usable: 4\]", out)
    assert re.search(r"JoinGroup\(11\): 0 to 9 \[usable: 9\]", out)
    assert re.search(r"OffsetCommit\(8\): 0 to 10 \[usable: 10\]", out)
    assert re.search(r"OffsetFetch\(9\): 0 to 10 \[usable: 10\]", out)
    assert re.search(r"DeleteRecords\(21\): 0 to 2 \[usable: 2\]", out)
    assert re.search(r"AddPartitionsToTxn\(24\): 0 to 5 \[usable: 5\]", out)
    assert re.search(r"EndTxn\(26\): 0 to 5 \[usable: 5\]", out)
    assert re.search(r"TxnOffsetCommit\(28\): 0 to 6 \[usable: 6\]", out)
    assert re.search(r"ListTransactions\(66\): 0 to 2 \[usable: 2\]", out)


def test_dump_log_segments_reads_every_segment_kcoord_writes(tools, make_broker, tmp_path):
    """Kafka's DumpLogSegments reads the .log, .index and .timeindex files kcoord
    writes, batch by batch and record by record, with no error."""
    directory = tmp_path / "dumped-0"
    log = PartitionLog(str(directory), LogConfig(segment_bytes=4096, index_interval_bytes=200))
    for i in range(80):
        log.append(batch([f"value-{i}".encode() * 4] * 2, keys=[b"a%d" % i, b"b%d" % i],
                         ts=1_000 + i, codec=i % 2))
    log.close()
    segments = sorted(directory.glob("*.log"))
    assert len(segments) > 1
    files = [str(p) for p in sorted(directory.iterdir())
             if p.suffix in (".log", ".index", ".timeindex")]
    out = _run("org.apache.kafka.tools.DumpLogSegments", "--deep-iteration", "--files",
               ",".join(files))
    assert "Exception" not in out and "corrupt" not in out.lower()
    offsets = [int(m) for m in re.findall(r"\| offset: (\d+)", out)]
    assert offsets == list(range(160))
    assert len(re.findall(r"Dumping .*\.index", out)) == len(segments)


def test_console_producer_console_consumer_and_verifiable_producer(tools, make_broker):
    """The Java client as Kafka's own tools drive it: an idempotent producer by
    default, a consumer that assigns its partition and reads from the start."""
    node = make_broker()
    server = ("--bootstrap-server", node.bootstrap)
    done = kafka.run_tool("org.apache.kafka.tools.ConsoleProducer", *server, "--topic", "console",
                          "--property", "parse.key=true", "--property", "key.separator=:",
                          stdin="apple:1\nbanana:2\ncherry:3\n")
    assert done.returncode == 0, done.stderr
    out = _run("org.apache.kafka.tools.consumer.ConsoleConsumer", *server, "--topic", "console",
               "--partition", "0", "--offset", "earliest", "--max-messages", "3",
               "--property", "print.key=true", "--timeout-ms", "30000")
    assert [line for line in out.splitlines() if "\t" in line] == [
        "apple\t1", "banana\t2", "cherry\t3"]
    events = [json.loads(line) for line in _run(
        "org.apache.kafka.tools.VerifiableProducer", *server, "--topic", "console",
        "--max-messages", "5").splitlines() if line.startswith("{")]
    sent = [e for e in events if e["name"] == "producer_send_success"]
    assert [(e["value"], e["offset"]) for e in sent] == [(str(i), 3 + i) for i in range(5)]
    assert events[-1]["name"] == "tool_data" and events[-1]["acked"] == 5


def test_producer_perf_test_and_dump_log_segments_of_what_it_wrote(tools, make_broker):
    node = make_broker()
    out = _run("org.apache.kafka.tools.ProducerPerformance", "--topic", "perf",
               "--num-records", "5000", "--record-size", "100", "--throughput", "-1",
               "--producer-props", f"bootstrap.servers={node.bootstrap}", "compression.type=lz4")
    assert re.search(r"^5000 records sent", out, re.M)
    node.stop()
    directory = node.config.data_dir / "perf-0"
    files = [str(p) for p in sorted(directory.iterdir()) if p.suffix in (".log", ".index")]
    dumped = _run("org.apache.kafka.tools.DumpLogSegments", "--deep-iteration", "--files",
                  ",".join(files))
    assert "Exception" not in dumped and "corrupt" not in dumped.lower()
    offsets = [int(m) for m in re.findall(r"\| offset: (\d+)", dumped)]
    assert offsets == list(range(5000))
    # An idempotent producer's batches: a producer id and sequences from 0.
    assert re.search(r"baseOffset: 0 .* baseSequence: 0 lastSequence: \d+ producerId: \d+ "
                     r"producerEpoch: 0 partitionLeaderEpoch: 0 .* compresscodec: lz4", dumped)


def test_dump_log_segments_offsets_decoder_reads_kcoord_s_group_records(tools, tmp_path):
    """Kafka's ``DumpLogSegments --offsets-decoder`` decodes the offset commits,
    group metadata and tombstones kcoord writes to ``__consumer_offsets``."""
    from kcoord.protocol import group_records as G
    from kcoord.protocol.records import Record, build_batch

    member = {"member_id": "m-1", "group_instance_id": "static-1", "client_id": "c1",
              "client_host": "/127.0.0.1", "rebalance_timeout": 300000,
              "session_timeout": 45000, "subscription": b"\x00\x01sub",
              "assignment": b"\x00\x01asg"}
    records = [
        (G.offset_commit_key("g1", "orders", 3),
         G.offset_commit_value(42, "meta", 1000, leader_epoch=0)),
        (G.offset_commit_key("g1", "orders", 4),
         G.offset_commit_value(7, "", 1001, expire_timestamp=99999)),
        (G.group_metadata_key("g1"),
         G.group_metadata_value({"protocol_type": "consumer", "generation": 3,
                                 "protocol": "range", "leader": "m-1",
                                 "current_state_timestamp": 1002, "members": [member]})),
        (G.offset_commit_key("g1", "orders", 3), None),
        (G.group_metadata_key("g2"), None),
    ]
    directory = tmp_path / "__consumer_offsets-7"
    log = PartitionLog(str(directory))
    log.append(build_batch([Record(None, 1000 + i, k, v) for i, (k, v) in enumerate(records)]))
    log.close()
    (segment,) = directory.glob("*.log")
    out = _run("org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder", "--files",
               str(segment))
    decoded = [(json.loads(m.group(1)), None if m.group(2) == "<DELETE>" else json.loads(m.group(2)))
               for m in re.finditer(r"key: (\{.*\}) payload: (<DELETE>|\{.*\})$", out, re.M)]
    assert decoded == [
        ({"type": "1", "data": {"group": "g1", "topic": "orders", "partition": 3}},
         {"version": "3", "data": {"offset": 42, "leaderEpoch": 0, "metadata": "meta",
                                   "commitTimestamp": 1000}}),
        ({"type": "1", "data": {"group": "g1", "topic": "orders", "partition": 4}},
         {"version": "1", "data": {"offset": 7, "metadata": "", "commitTimestamp": 1001,
                                   "expireTimestamp": 99999}}),
        ({"type": "2", "data": {"group": "g1"}},
         {"version": "3", "data": {
             "protocolType": "consumer", "generation": 3, "protocol": "range", "leader": "m-1",
             "currentStateTimestamp": 1002, "members": [{
                 "memberId": "m-1", "groupInstanceId": "static-1", "clientId": "c1",
                 "clientHost": "/127.0.0.1", "rebalanceTimeout": 300000,
                 "sessionTimeout": 45000, "subscription": "AAFzdWI=",
                 "assignment": "AAFhc2c="}]}}),
        ({"type": "1", "data": {"group": "g1", "topic": "orders", "partition": 3}}, None),
        ({"type": "2", "data": {"group": "g2"}}, None),
    ]


GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSUMER_PROTOCOL = {"group.coordinator.rebalance.protocols": "classic,consumer"}


def _json_objects(text: str) -> list:
    decoder, found, pos = json.JSONDecoder(), [], text.find("{")
    while pos >= 0:
        value, end = decoder.raw_decode(text, pos)
        found.append(value)
        pos = text.find("{", end)
    return found


def _produce(node, topic: str, count: int, partitions: int = 2) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=node.bootstrap)
    for i in range(count):
        producer.send(topic, value=b"%d" % i, partition=i % partitions)
    producer.flush(30)
    producer.close()


def _produce_more(node, topic: str, count: int, partitions: int) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=node.bootstrap)
    for i in range(count):
        producer.send(topic, value=b"more-%d" % i, partition=i % partitions)
    producer.flush(30)
    producer.close()


def _describe_rows(out: str) -> dict[tuple[str, int], list[str]]:
    """kafka-consumer-groups --describe: {(topic, partition): columns}."""
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[2].isdigit():
            rows[(cols[1], int(cols[2]))] = cols
    return rows


def _two_verifiable_consumers(node, topic: str, group: str, *extra: str) -> list[list[dict]]:
    """Two VerifiableConsumers of 20 messages each, run at once; the events each
    printed (JSON lines)."""
    import subprocess
    import threading

    cmd = ["java", *kafka.TOOL_JVM_OPTS, "-cp", kafka.classpath(),
           "org.apache.kafka.tools.VerifiableConsumer", "--bootstrap-server", node.bootstrap,
           "--topic", topic, "--group-id", group, "--max-messages", "20",
           "--reset-policy", "earliest", *extra]
    outputs: list[list[dict]] = [[], []]

    def run(i):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        outputs[i] = [json.loads(line) for line in done.stdout.splitlines()
                      if line.startswith("{")]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(150)
    return outputs


def test_verifiable_consumers_share_a_group_and_commit(tools, make_broker):
    """Kafka's system-test consumer (the Java client's group protocol): two of them
    split the partitions, read every message and commit."""
    node = make_broker()
    _produce(node, "verified", 40, partitions=4)
    outputs = _two_verifiable_consumers(node, "verified", "verifiers",
                                        "--session-timeout", "10000")
    consumed = sorted((r["partition"], o) for events in outputs for e in events
                      if e["name"] == "records_consumed" for r in e["partitions"]
                      for o in range(r["minOffset"], r["maxOffset"] + 1))
    assert consumed == sorted((p, o) for p in range(4) for o in range(10))
    commits = [e for events in outputs for e in events if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] for e in commits)
    assigned = [e for events in outputs for e in events if e["name"] == "partitions_assigned"]
    assert assigned  # both joined the group and got partitions


def _members(node, group: str) -> set[str]:
    """The member ids of a Stable group (DescribeGroups)."""
    from kcoord.protocol.client import WireClient

    with WireClient.to(node.bootstrap) as client:
        described = client.call(15, 5, {"groups": [group],
                                        "include_authorized_operations": False})
    (found,) = described["groups"]
    assert found["error_code"] == 0 and found["group_state"] == "Stable", found
    return {m["member_id"] for m in found["members"]}


class _VerifiableConsumer:
    """One VerifiableConsumer process with no message limit; ``events`` fills as it
    prints them (JSON lines)."""

    def __init__(self, bootstrap: str, topic: str, group: str):
        import subprocess
        import threading

        self.events: list[dict] = []
        self.proc = subprocess.Popen(
            ["java", *kafka.TOOL_JVM_OPTS, "-cp", kafka.classpath(),
             "org.apache.kafka.tools.VerifiableConsumer", "--bootstrap-server", bootstrap,
             "--topic", topic, "--group-id", group, "--session-timeout", "10000",
             "--reset-policy", "earliest"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def named(self, name: str, since: int = 0) -> list[dict]:
        return [e for e in self.events[since:] if e["name"] == name]

    def holds(self) -> set[int]:
        """What it holds now: eager (range) rebalances revoke all, then assign all."""
        held: set[int] = set()
        for e in self.events:
            parts = {p["partition"] for p in e.get("partitions", ())}
            if e["name"] == "partitions_assigned":
                held |= parts
            elif e["name"] == "partitions_revoked":
                held -= parts
        return held

    def consumed(self, since: int = 0) -> list[tuple[int, int]]:
        return sorted((r["partition"], o) for e in self.named("records_consumed", since)
                      for r in e["partitions"] for o in range(r["minOffset"], r["maxOffset"] + 1))

    def stop(self) -> None:
        import signal
        import subprocess
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # its shutdown hook closes the consumer
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(10)


def test_verifiable_consumer_takes_over_from_one_that_leaves_and_rides_a_broker_restart(
        tools, make_broker, tmp_path):
    """Two of Kafka's system-test consumers share four partitions; one shuts down
    (LeaveGroup) and the other is handed its partitions and reads on from its
    commits; the broker restarts (same port, same data) and the survivor reads
    on and commits, still the same member of its group.

    (Whether it joins again after the restart is the client's own affair: a
    Kafka 4 consumer that finds no broker it can reach re-bootstraps, and if it
    looks at its subscription before the next Metadata answer arrives, the
    topic seems to have lost its partitions and it rejoins, with its member
    id, as it would against Kafka.)"""
    from tests.integration.members import until

    port = kafka.free_port()
    overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{port}"}  # the same after the restart
    node = make_broker(tmp_path / "restarted", overrides=overrides)
    _produce(node, "handover", 40, partitions=4)
    first = _VerifiableConsumer(node.bootstrap, "handover", "handovers")
    second = _VerifiableConsumer(node.bootstrap, "handover", "handovers")
    consumers = (first, second)
    everything = [(p, o) for p in range(4) for o in range(10)]
    try:
        until(lambda: len(first.holds()) == len(second.holds()) == 2
              and sorted(first.consumed() + second.consumed()) == everything
              and {(c["partition"], c["offset"]) for v in consumers
                   for e in v.named("offsets_committed") for c in e["offsets"]}
              >= {(p, 10) for p in range(4)}, 90,
              lambda: f"two consumers sharing four partitions, everything read and committed: "
                      f"{[v.holds() for v in consumers]}, {[v.events[-3:] for v in consumers]}")
        assert all(e["success"] for v in consumers for e in v.named("offsets_committed"))
        left, mark = first.holds(), len(second.events)
        first.stop()
        # A JVM ended by SIGTERM exits 143 once its shutdown hooks have run.
        assert first.events[-1]["name"] == "shutdown_complete"
        until(lambda: second.holds() == {0, 1, 2, 3}, 60,
              lambda: f"the survivor to hold every partition: {second.events[mark:]}")
        handed = [{p["partition"] for p in e["partitions"]} for e in second.events[mark:]
                  if e["name"] == "partitions_assigned"]
        assert handed[-1] == {0, 1, 2, 3} and left <= handed[-1]

        mark = len(second.events)
        _produce_more(node, "handover", 8, partitions=4)
        until(lambda: second.consumed(mark) == [(p, o) for p in range(4) for o in (10, 11)], 60,
              lambda: f"the new messages, from the partitions' commits: {second.events[mark:]}")

        member = _members(node, "handovers")
        assert len(member) == 1
        node.stop()
        node = make_broker(tmp_path / "restarted", overrides=overrides)
        mark = len(second.events)
        _produce_more(node, "handover", 4, partitions=4)
        until(lambda: second.consumed(mark) == [(p, 12) for p in range(4)], 90,
              lambda: f"the messages after the restart: {second.events[mark:]}")
        until(lambda: {(c["partition"], c["offset"]) for e in second.named(
                  "offsets_committed", mark) if e["success"] for c in e["offsets"]}
              >= {(p, 13) for p in range(4)}, 30, "their commits")
        # The group came back with its member: its commits were accepted, and
        # it is still the member it was (one the restart had lost would have
        # been given a new member id when it joined again).
        assert _members(node, "handovers") == member
    finally:
        for v in consumers:
            v.stop()
    assert second.events[-1]["name"] == "shutdown_complete"


def test_kafka_consumer_groups_list_describe_reset_and_delete(tools, make_broker):
    node = make_broker()
    server = ("--bootstrap-server", node.bootstrap)
    _produce(node, "inspected", 10)
    out = _run("org.apache.kafka.tools.consumer.ConsoleConsumer", *server, "--topic",
               "inspected", "--group", "inspectors", "--from-beginning", "--max-messages", "10",
               "--timeout-ms", "30000")
    assert len([line for line in out.splitlines() if line.isdigit()]) == 10
    assert "inspectors" in _run(GROUPS_TOOL, *server, "--list").split()
    assert re.search(r"^inspectors\s+Empty\s*$",
                     _run(GROUPS_TOOL, *server, "--list", "--state"), re.M)
    rows = _describe_rows(_run(GROUPS_TOOL, *server, "--describe", "--group", "inspectors"))
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
    assert {tp: cols[3:6] for tp, cols in rows.items()} == {
        ("inspected", 0): ["5", "5", "0"], ("inspected", 1): ["5", "5", "0"]}
    reset = _run(GROUPS_TOOL, *server, "--reset-offsets", "--group", "inspectors", "--topic",
                 "inspected", "--to-offset", "2", "--execute")
    assert re.search(r"inspectors\s+inspected\s+0\s+2", reset)
    rows = _describe_rows(_run(GROUPS_TOOL, *server, "--describe", "--group", "inspectors"))
    assert [rows[("inspected", p)][3:6] for p in (0, 1)] == [["2", "5", "3"]] * 2
    deleted = _run(GROUPS_TOOL, *server, "--delete-offsets", "--group", "inspectors",
                   "--topic", "inspected:1")
    assert re.search(r"inspected\s+1\s+Successful", deleted)
    rows = _describe_rows(_run(GROUPS_TOOL, *server, "--describe", "--group", "inspectors"))
    assert set(rows) == {("inspected", 0)}
    assert "Deletion of requested consumer groups ('inspectors') was successful." in _run(
        GROUPS_TOOL, *server, "--delete", "--group", "inspectors")
    assert "inspectors" not in _run(GROUPS_TOOL, *server, "--list").split()


# A topic of four partitions holding COUNTS messages, its group's offsets
# committed at COMMITTED before two consumers join that read but never commit:
# the lag per partition is known and stays put.
COUNTS, COMMITTED = (2, 3, 4, 6), (0, 3, 1, 2)


def _tables(out: str) -> list[list[list[str]]]:
    """The tables kafka-consumer-groups prints: blank-line separated, each a
    header row then data rows, split on whitespace (no value holds a space, and
    the one header that does, "COORDINATOR (ID)", is joined)."""
    tables, table = [], []
    for line in out.splitlines() + [""]:
        line = line.replace("COORDINATOR (ID)", "COORDINATOR(ID)")
        if line.strip():
            table.append(line.split())
        elif table:
            tables.append(table)
            table = []
    return tables


def _describe_live_group(bootstrap: str, topic: str, group: str,
                         settings: dict | None = None,
                         second: dict | None = None) -> dict[str, list]:
    """Every ``--describe`` view of ``group`` while two members hold ``topic``, with
    member ids and the coordinator's address replaced by stable names; ``settings``
    go to the members (``group.protocol``).  With ``second``, the second member
    has those settings instead and starts once the first holds every partition."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.structs import OffsetAndMetadata

    from tests.integration.members import ConfluentMember, owned_once, until

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, len(COUNTS), 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for p, count in enumerate(COUNTS):
        for i in range(count):
            producer.send(topic, value=b"%d" % i, partition=p)
    producer.flush(30)
    producer.close()
    simple = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    simple.commit({TopicPartition(topic, p): OffsetAndMetadata(offset, "", -1)
                   for p, offset in enumerate(COMMITTED)})
    simple.close()
    members = []
    for name in "ab":
        extra = second if second is not None and name == "b" else settings
        if name == "b" and second is not None:
            until(lambda: owned_once(members, len(COUNTS)), 60,
                  lambda: f"the first member alone: {sorted(members[0].assignment)}")
        members.append(ConfluentMember(bootstrap, group, topic, commit=False, extra={
            "client.id": f"client-{name}", **(extra or {})}).start())
    try:
        unread = {(p, o) for p, count in enumerate(COUNTS) for o in range(COMMITTED[p], count)}
        until(lambda: owned_once(members, len(COUNTS)) and all(m.member_id for m in members)
              and {(p, o) for m in members for p, o, _v in m.seen} == unread, 60,
              lambda: f"two members reading on from the commits: "
                      f"{[(sorted(m.assignment), m.seen) for m in members]}")
        server = ("--bootstrap-server", bootstrap)
        views = {
            "offsets": _run(GROUPS_TOOL, *server, "--describe", "--group", group),
            "members": _run(GROUPS_TOOL, *server, "--describe", "--group", group, "--members",
                            "--verbose"),
            "state": _run(GROUPS_TOOL, *server, "--describe", "--group", group, "--state"),
        }
        names = {m.member_id: f"<member of {m.settings['extra']['client.id']}>" for m in members}
        held = {m.settings["extra"]["client.id"]: sorted(m.assignment) for m in members}
    finally:
        for m in members:
            m.stop()
    assert all(m.error is None for m in members)
    coordinator = f"127.0.0.1:{bootstrap.rsplit(':', 1)[1]}"
    parsed = {}
    for view, out in views.items():
        for member_id, name in names.items():
            out = out.replace(member_id, name.replace(" ", "_"))
        parsed[view] = _tables(out.replace(coordinator, "<coordinator>"))
    parsed["held"] = held
    return parsed


def test_kafka_consumer_groups_describes_live_members_as_kafka_does(
        tools, make_broker, scratch_kafka):
    """``--describe`` (offsets and lag per partition, with the member holding it),
    ``--describe --members --verbose`` and ``--describe --state`` of a group
    with two live members: what the consumers hold and what was committed, and
    the same tables as Kafka prints for the same group."""
    import uuid

    suffix = uuid.uuid4().hex[:8]  # the reference Kafka is shared by the whole run
    topic, group = f"described-{suffix}", f"describers-{suffix}"
    kcoord = _describe_live_group(make_broker().bootstrap, topic, group)
    kafka_ = _describe_live_group(scratch_kafka.bootstrap, topic, group)
    owner = {p: f"<member_of_{client}>" for client, parts in kcoord["held"].items()
             for p in parts}
    client_of = {p: client for client, parts in kcoord["held"].items() for p in parts}

    (offsets,) = kcoord["offsets"]
    assert offsets[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                          "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert sorted(offsets[1:], key=lambda row: int(row[2])) == [
        [group, topic, str(p), str(COMMITTED[p]), str(COUNTS[p]), str(COUNTS[p] - COMMITTED[p]),
         owner[p], "/127.0.0.1", client_of[p]] for p in range(len(COUNTS))]

    (members,) = kcoord["members"]
    # Kafka 4's tool prints the epochs of the new consumer protocol too ("-" for
    # a classic group) and the assignment as topic:partitions.
    assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                          "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                          "TARGET-ASSIGNMENT"]
    assert sorted(members[1:], key=lambda row: row[3]) == [
        [group, f"<member_of_{client}>", "/127.0.0.1", client, str(len(parts)), "-",
         f"{topic}:" + ",".join(map(str, parts)), "-", "-"]
        for client, parts in sorted(kcoord["held"].items())]

    (state,) = kcoord["state"]
    assert state == [["GROUP", "COORDINATOR(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                     [group, "<coordinator>", "(1)", "range", "Stable", "2"]]

    # Kafka prints the same tables for the same group. The order of the rows
    # follows the order of the members in DescribeGroups, which in Kafka is that
    # of a hash map: compared sorted.
    for view in ("offsets", "members", "state"):
        assert [[t[0], *sorted(t[1:])] for t in kcoord[view]] == \
            [[t[0], *sorted(t[1:])] for t in kafka_[view]], view


def test_kafka_consumer_groups_describes_a_consumer_protocol_group_as_kafka_does(
        tools, make_broker, scratch_kafka):
    """The same views of a group of the consumer group protocol (KIP-848), whose
    committed offsets were made before it had members (an empty classic group
    that becomes a consumer group): epochs, current and target assignments, the
    assignor and the state, as Kafka prints them."""
    import uuid

    suffix = uuid.uuid4().hex[:8]
    topic, group = f"described848-{suffix}", f"describers848-{suffix}"
    settings = {"group.protocol": "consumer"}
    kcoord = _describe_live_group(make_broker(overrides=CONSUMER_PROTOCOL).bootstrap, topic,
                                  group, settings)
    kafka_ = _describe_live_group(scratch_kafka.bootstrap, topic, group, settings)
    (members,) = kcoord["members"]
    assert sorted(members[1:], key=lambda row: row[3]) == [
        [group, f"<member_of_{client}>", "/127.0.0.1", client, str(len(parts)), "3",
         f"{topic}:" + ",".join(map(str, parts)), "3", f"{topic}:" + ",".join(map(str, parts))]
        for client, parts in sorted(kcoord["held"].items())]
    (state,) = kcoord["state"]
    assert state[1][3:] == ["uniform", "Stable", "2"]
    # Which of the two clients joins first is a race, and with it which one gets
    # which partitions: the columns naming the member are left out.
    def anonymous(table):
        named = [i for i, column in enumerate(table[0]) if column in ("CONSUMER-ID",
                                                                      "CLIENT-ID")]
        rows = [[c for i, c in enumerate(row) if i not in named] for row in table]
        return [rows[0], *sorted(rows[1:])]

    for view in ("offsets", "members", "state"):
        ours = [anonymous(t) for t in kcoord[view]]
        theirs = [anonymous(t) for t in kafka_[view]]
        assert ours == theirs, f"{view}:\n{ours}\n{theirs}"


def test_kafka_consumer_groups_describes_a_group_in_migration_as_kafka_does(
        tools, make_broker, scratch_kafka):
    """A classic group that a consumer-protocol member joins (online migration):
    the same views as Kafka prints for it, the classic member among the
    consumer group's members with its partitions."""
    import uuid

    suffix = uuid.uuid4().hex[:8]
    topic, group = f"migrating-{suffix}", f"migrators-{suffix}"
    second = {"group.protocol": "consumer"}
    kcoord = _describe_live_group(make_broker().bootstrap, topic, group, None, second)
    kafka_ = _describe_live_group(scratch_kafka.bootstrap, topic, group, None, second)
    (members,) = kcoord["members"]
    assert sorted(row[3] for row in members[1:]) == ["client-a", "client-b"]
    assert sum(int(row[4]) for row in members[1:]) == len(COUNTS)
    for view in ("offsets", "members", "state"):
        assert [[t[0], *sorted(t[1:])] for t in kcoord[view]] == \
            [[t[0], *sorted(t[1:])] for t in kafka_[view]], view


def test_consumer_perf_test_consumes_in_a_group(tools, make_broker):
    node = make_broker()
    _produce(node, "perf-read", 3000, partitions=3)
    out = _run("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server",
               node.bootstrap, "--topic", "perf-read", "--messages", "3000",
               "--group", "perf-readers", "--timeout", "60000")
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, ...
    line = out.strip().splitlines()[-1].split(", ")
    assert int(line[4]) == 3000


def test_offsets_topic_read_through_fetch_and_dumped_from_disk(tools, make_broker):
    """What kcoord writes to __consumer_offsets for a real consumer group is read
    by Kafka's own decoders: over Fetch (the console consumer's offsets
    formatter, as lag monitors read it) and from the segment files."""
    node = make_broker()
    server = ("--bootstrap-server", node.bootstrap)
    _produce(node, "watched", 4)
    _run("org.apache.kafka.tools.consumer.ConsoleConsumer", *server, "--topic", "watched",
         "--group", "watchers", "--from-beginning", "--max-messages", "4",
         "--timeout-ms", "30000")
    partition = node.call(lambda: node.broker.groups.partition_for("watchers"))
    out = _run("org.apache.kafka.tools.consumer.ConsoleConsumer", *server, "--topic",
               "__consumer_offsets", "--partition", str(partition), "--offset", "earliest",
               "--formatter", "org.apache.kafka.tools.consumer.OffsetsMessageFormatter",
               "--timeout-ms", "10000")
    commits = _json_objects(out)  # the formatter prints them with no separator
    assert {(c["key"]["data"]["topic"], c["key"]["data"]["partition"],
             c["value"]["data"]["offset"]) for c in commits
            if c["key"]["data"].get("group") == "watchers"} == {("watched", 0, 2),
                                                                 ("watched", 1, 2)}
    node.stop()
    directory = node.config.data_dir / f"__consumer_offsets-{partition}"
    (segment,) = directory.glob("*.log")
    dumped = _run("org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder", "--files",
                  str(segment))
    assert re.search(r'"group":"watchers".*"protocolType":"consumer"', dumped)
    assert re.search(r'"group":"watchers","topic":"watched","partition":1.*"offset":2', dumped)


def test_verifiable_consumers_with_the_consumer_protocol_share_a_group(tools, make_broker):
    """The Java client's consumer group protocol (KIP-848, ``--group-protocol
    consumer``): two consumers get their partitions from the broker's assignor,
    read every message once and commit."""

    node = make_broker(overrides=CONSUMER_PROTOCOL)
    _produce(node, "kip848", 40, partitions=4)
    outputs = _two_verifiable_consumers(node, "kip848", "kip848-g",
                                        "--group-protocol", "consumer")
    consumed = sorted((r["partition"], o) for events in outputs for e in events
                      if e["name"] == "records_consumed" for r in e["partitions"]
                      for o in range(r["minOffset"], r["maxOffset"] + 1))
    assert set(consumed) == {(p, o) for p in range(4) for o in range(10)}
    commits = [e for events in outputs for e in events if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] for e in commits), commits
    assigned = [e for events in outputs for e in events if e["name"] == "partitions_assigned"]
    assert assigned


def test_console_consumer_with_the_consumer_protocol_reads_in_a_group(tools, make_broker):
    """Kafka's console consumer in a group of the consumer group protocol (served
    by default, as on Kafka 4): it is given both partitions, reads every message
    and the group's offsets are committed."""
    node = make_broker()
    _produce(node, "console848", 10)
    server = ("--bootstrap-server", node.bootstrap)
    out = _run("org.apache.kafka.tools.consumer.ConsoleConsumer", *server, "--topic",
               "console848", "--group", "console848-g", "--from-beginning",
               "--command-property", "group.protocol=consumer", "--max-messages", "10",
               "--timeout-ms", "30000")
    assert sorted(int(line) for line in out.split() if line.isdigit()) == list(range(10))
    described = _run(GROUPS_TOOL, *server, "--describe", "--group", "console848-g")
    rows = [line.split() for line in described.splitlines() if "console848 " in line]
    assert sorted((row[2], row[3]) for row in rows) == [("0", "5"), ("1", "5")]


def test_dump_log_segments_decodes_consumer_group_records(tools, make_broker):
    """The records of a consumer group (types 3 to 8) that kcoord writes are read
    by Kafka's ``DumpLogSegments --offsets-decoder`` as Kafka's own."""
    from confluent_kafka import Consumer
    from kcoord.broker.groups.placement import coordinator_partition

    node = make_broker(overrides=CONSUMER_PROTOCOL)
    _produce(node, "dumped", 4, partitions=2)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "dumped-g",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    consumer.subscribe(["dumped"])
    read = 0
    for _ in range(200):
        message = consumer.poll(0.1)
        read += message is not None and not message.error()
        if read == 4:
            break
    consumer.commit(asynchronous=False)
    consumer.close()
    partition = coordinator_partition("dumped-g", 50)
    segments = sorted((node.data_dir / f"__consumer_offsets-{partition}").glob("*.log"))
    out = _run("org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder", "--files",
               *map(str, segments))
    decoded = [(json.loads(m.group(1)), None if m.group(2) == "<DELETE>" else json.loads(m.group(2)))
               for m in re.finditer(r"key: (\{.*\}) payload: (<DELETE>|\{.*\})$", out, re.M)]
    types = {key["type"] for key, _value in decoded}
    assert {"3", "5", "6", "7", "8", "1"} <= types, out
    member = next(v for k, v in decoded if k["type"] == "5" and v is not None)
    assert member["data"]["subscribedTopicNames"] == ["dumped"]
    current = [v for k, v in decoded if k["type"] == "8" and v is not None][-1]
    assert sum(len(t["partitions"]) for t in current["data"]["assignedPartitions"]) == 2
    gone = [k for k, v in decoded if v is None and k["type"] in ("5", "7", "8")]
    assert len(gone) == 3  # the member left: its three records are tombstoned


def test_kafka_delete_records_moves_the_log_start(tools, make_broker, scratch_kafka, tmp_path):
    """``kafka-delete-records.sh --offset-json-file`` and ``kafka-get-offsets.sh``
    print the same for kcoord as for Kafka 4.4."""
    import uuid

    def session(node, topic: str) -> list[str]:
        _produce(node, topic, 12, partitions=2)
        spec = tmp_path / f"{topic}.json"
        spec.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "offset": 4},
            {"topic": topic, "partition": 1, "offset": -1}]}))
        out = _run("org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server",
                   node.bootstrap, "--offset-json-file", str(spec))
        offsets = [sorted(_run("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server",
                               node.bootstrap, "--topic", topic, "--time", t).split())
                   for t in ("-2", "-1", "earliest", "latest")]
        return [line.replace(topic, "<topic>") for line in sorted(out.splitlines())] + [
            " ".join(o).replace(topic, "<topic>") for o in offsets]

    ours = session(make_broker(), "trimmed")
    theirs = session(scratch_kafka, f"trimmed-{uuid.uuid4().hex[:8]}")
    assert "Records delete operation completed:" in ours
    assert "partition: <topic>-0\tlow_watermark: 4" in ours
    assert "partition: <topic>-1\tlow_watermark: 6" in ours
    assert ours[-4:] == ["<topic>:0:4 <topic>:1:6", "<topic>:0:6 <topic>:1:6"] * 2
    assert ours == theirs


def _transactions_session(bootstrap: str, topic: str, txn_id: str) -> dict:
    """kafka-producer-perf-test with a transactional id, then kafka-transactions
    list, describe and describe-producers, as a user runs them."""
    server = ("--bootstrap-server", bootstrap)
    perf = _run("org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                "--num-records", "2000", "--record-size", "50", "--throughput", "-1",
                "--transactional-id", txn_id, "--transaction-duration-ms", "100",
                "--producer-props", f"bootstrap.servers={bootstrap}")
    listed = _run("org.apache.kafka.tools.TransactionsCommand", *server, "list")
    rows = [line.split() for line in listed.strip().splitlines()]
    mine = [row for row in rows[1:] if row[0] == txn_id]
    described = _run("org.apache.kafka.tools.TransactionsCommand", *server, "describe",
                     "--transactional-id", txn_id)
    drows = [[cell.strip() for cell in line.split("\t")] for line in described.splitlines()
             if line.strip()]
    producers = _run("org.apache.kafka.tools.TransactionsCommand", *server,
                     "describe-producers", "--topic", topic, "--partition", "0")
    prows = [line.split() for line in producers.strip().splitlines()]
    consumed = _run("org.apache.kafka.tools.consumer.ConsoleConsumer", *server, "--topic", topic,
                    "--from-beginning", "--isolation-level", "read_committed",
                    "--max-messages", "2000", "--timeout-ms", "30000")
    return {
        "sent": re.search(r"^2000 records sent", perf, re.M) is not None,
        "list_header": rows[0],
        "listed": [(row[0], row[-1]) for row in mine],
        "describe_header": drows[0],
        "described": dict(zip(drows[0], drows[1])),
        "producers_header": prows[0],
        "producer_rows": len(prows) - 1,
        "producer_txn_start": [row[-1] for row in prows[1:]],
        "read_committed": len([line for line in consumed.splitlines() if line.strip()]),
    }


def test_transaction_tools_answer_as_on_kafka(tools, make_broker, scratch_kafka):
    """kafka-producer-perf-test --transactional-id writes in transactions; then
    kafka-transactions lists and describes the id, describe-producers shows the
    producer with no open transaction, and a read_committed console consumer
    reads all 2,000 records: as on Kafka."""
    import uuid

    suffix = uuid.uuid4().hex[:8]
    ours = _transactions_session(make_broker().bootstrap, f"perf-txn-{suffix}",
                                 f"perf-{suffix}")
    theirs = _transactions_session(scratch_kafka.bootstrap, f"perf-txn-{suffix}",
                                   f"perf-{suffix}")
    assert ours["sent"] and ours["read_committed"] == 2000
    assert ours["listed"] == [(f"perf-{suffix}", "CompleteCommit")]
    assert ours["described"]["TransactionState"] == "CompleteCommit"
    assert ours["producer_txn_start"] == ["None"]
    # transaction.version 2 (Kafka 4.4's default level, and kcoord's): every end
    # bumps the epoch; at level 1 the Java producer keeps to the first protocol
    # and its epoch stays.
    assert int(ours["described"]["ProducerEpoch"]) > 0
    first = _transactions_session(
        make_broker(overrides={"kcoord.transaction.version": "1"}).bootstrap,
        f"perf-txn1-{suffix}", f"perf1-{suffix}")
    assert first["described"]["ProducerEpoch"] == "0" and first["read_committed"] == 2000
    # ProducerEpoch too: at transaction.version 2 it counts the transactions, which
    # --transaction-duration-ms makes depend on how fast each broker ran
    for volatile in ("ProducerId", "ProducerEpoch", "CurrentTransactionStartTimeMs",
                     "TransactionDurationMs"):
        ours["described"].pop(volatile, None)
        theirs["described"].pop(volatile, None)
    assert ours == theirs


def test_dump_log_segments_reads_transactions_kcoord_writes(tools, make_broker):
    """DumpLogSegments shows kcoord's end markers as Kafka writes them, and its
    transaction log decoder reads ``__transaction_state``."""
    from tests.broker import txn_ops as T
    from kcoord.protocol.client import WireClient
    from tests.broker.wire_ops import create_topic

    node = make_broker()
    with WireClient.to(node.bootstrap) as wire:
        create_topic(wire, "dumped-txn")
        T.find_coordinator(wire, "dump-txn")
        answer = T.init_producer(wire, "dump-txn")
        pid, epoch = answer["producer_id"], answer["producer_epoch"]
        T.add_partitions(wire, "dump-txn", pid, epoch, [("dumped-txn", 0)])
        T.produce(wire, "dump-txn", "dumped-txn", 0, T.txn_batch(pid, epoch, 0, [b"a", b"b"]))
        assert T.end_txn_settled(wire, "dump-txn", pid, epoch, False) == 0
    node.stop()
    data = node.config.data_dir / "dumped-txn-0"
    dumped = _run("org.apache.kafka.tools.DumpLogSegments", "--deep-iteration", "--files",
                  str(sorted(data.glob("*.log"))[0]))
    assert re.search(rf"count: 2 baseSequence: 0 lastSequence: 1 producerId: {pid} "
                     rf"producerEpoch: {epoch} partitionLeaderEpoch: 0 isTransactional: true "
                     r"isControl: false", dumped)
    assert re.search(rf"count: 1 baseSequence: -1 lastSequence: -1 producerId: {pid} "
                     rf"producerEpoch: {epoch} partitionLeaderEpoch: 0 isTransactional: true "
                     r"isControl: true", dumped)
    assert "| offset: 2 " in dumped and "endTxnMarker: ABORT coordinatorEpoch: 0" in dumped
    # the aborted transaction's .txnindex entry, and the producer snapshot the
    # clean shutdown left, as Kafka's tool reads them
    index = _run("org.apache.kafka.tools.DumpLogSegments", "--files",
                 str(data / "00000000000000000000.txnindex"))
    assert f"version: 0 producerId: {pid} firstOffset: 0 lastOffset: 2 lastStableOffset: 3" \
        in index
    snapshot = _run("org.apache.kafka.tools.DumpLogSegments", "--files",
                    str(data / "00000000000000000003.snapshot"))
    assert re.search(rf"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: 0 "
                     r"currentTxnFirstOffset: OptionalLong.empty .* firstSequence: 0 "
                     r"lastSequence: 1 lastOffset: 1 offsetDelta: 1", snapshot)
    state = [p for p in node.config.data_dir.glob("__transaction_state-*")
             if any(f.stat().st_size for f in p.glob("*.log"))]
    (folder,) = state
    decoded = _run("org.apache.kafka.tools.DumpLogSegments", "--transaction-log-decoder",
                   "--files", str(sorted(folder.glob("*.log"))[0]))
    assert "Exception" not in decoded
    assert decoded.count('key: {"type":"0","data":{"transactionalId":"dump-txn"}}') == 4
    statuses = re.findall(r'"transactionStatus":"(\w+)"', decoded)
    assert statuses == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort"]


def _copier_session(bootstrap: str, suffix: str) -> dict:
    """Kafka's TransactionalMessageCopier (its exactly-once system tests' tool)
    copies 1,000 records with random aborts, committing its input offsets in each
    transaction; then kafka-transactions find-hanging looks for transactions
    left open."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTP

    source, sink, group = f"copy-in-{suffix}", f"copy-out-{suffix}", f"copier-{suffix}"
    feed = Producer({"bootstrap.servers": bootstrap})
    for i in range(1000):
        feed.produce(source, f"record-{i}".encode(), partition=0)
    assert feed.flush(30) == 0
    copied = kafka.run_tool(
        "org.apache.kafka.tools.TransactionalMessageCopier", "--broker-list", bootstrap,
        "--input-topic", source, "--input-partition", "0", "--output-topic", sink,
        "--transactional-id", f"copier-{suffix}", "--consumer-group", group,
        "--transaction-size", "50", "--enable-random-aborts", "--use-group-metadata",
        "--max-messages", "1000")
    assert copied.returncode == 0, copied.stdout[-2000:] + copied.stderr[-2000:]
    events = [json.loads(line) for line in copied.stdout.splitlines() if line.startswith("{")]
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{suffix}",
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                       "enable.partition.eof": True})
    reader.assign([CTP(sink, 0)])
    values, done = [], False
    deadline = time.monotonic() + 60
    while not done and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is None:
            continue
        if message.error():
            done = True
        else:
            values.append(message.value().decode())
    reader.close()
    owner = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed = owner.committed([CTP(source, 0)], 10)[0].offset
    owner.close()
    hanging = _run("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
                   bootstrap, "find-hanging", "--broker-id", "1")
    return {"values": values,
            "last_event": (events[-1]["stage"], events[-1]["totalProcessed"]) if events else None,
            "hanging": hanging.strip().splitlines(), "committed": committed}


def test_transactional_message_copier_copies_exactly_once_as_on_kafka(
        tools, make_broker, scratch_kafka):
    import uuid

    suffix = uuid.uuid4().hex[:8]
    ours = _copier_session(make_broker().bootstrap, suffix)
    theirs = _copier_session(scratch_kafka.bootstrap, suffix)
    for side, run in (("kcoord", ours), ("Kafka", theirs)):
        assert sorted(run["values"]) == sorted(f"record-{i}" for i in range(1000)), side
        assert run["values"] == [f"record-{i}" for i in range(1000)], side  # in order
        assert run["committed"] == 1000, side  # the input offsets, with the output
    assert ours["last_event"] == theirs["last_event"] == ("ShutdownComplete", 1000)
    assert len(ours["hanging"]) == 1  # the header alone: nothing hangs
    assert ours["hanging"] == theirs["hanging"]


def _abort_session(bootstrap: str, topic: str, txn_id: str) -> dict:
    """A transaction left open (its producer gone quiet), found and aborted with
    kafka-transactions, then what the tools and a read_committed reader see."""
    from kcoord.protocol.client import WireClient
    from tests.broker import txn_ops as T

    server = ("--bootstrap-server", bootstrap)
    _run("org.apache.kafka.tools.TopicCommand", *server, "--create", "--topic", topic,
         "--partitions", "1", "--replication-factor", "1")
    with WireClient.to(bootstrap) as wire:
        deadline = time.monotonic() + 60
        while True:  # Kafka: NOT_COORDINATOR while its new state topic's leaders settle
            assert T.find_coordinator(wire, txn_id)[1]["error_code"] == 0
            init = T.init_producer(wire, txn_id)
            if init["error_code"] != 16 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert init["error_code"] == 0, init
        pid, epoch = init["producer_id"], init["producer_epoch"]
        added = T.add_partitions(wire, txn_id, pid, epoch, [(topic, 0)])
        assert added == {(topic, 0): 0}, added
        assert T.produce(wire, txn_id, topic, 0,
                         T.txn_batch(pid, epoch, 0, [b"h1", b"h2"]))["error_code"] == 0
        held = T.latest_offset(wire, topic, committed=True)
        hanging = _run("org.apache.kafka.tools.TransactionsCommand", *server, "find-hanging",
                       "--broker-id", "1", "--max-transaction-timeout", "0")
        aborted = _run("org.apache.kafka.tools.TransactionsCommand", *server, "abort",
                       "--topic", topic, "--partition", "0", "--start-offset", "0")
        producers = _run("org.apache.kafka.tools.TransactionsCommand", *server,
                         "describe-producers", "--topic", topic, "--partition", "0")
        committed = T.fetch(wire, topic, committed=True)
        released = T.latest_offset(wire, topic, committed=True)
        # The coordinator still holds the transaction open: its producer ends it.
        T.end_txn_settled(wire, txn_id, pid, epoch, False)
    rows = [line.split() for line in producers.strip().splitlines()]
    return {
        "held": held, "released": released,
        "hanging": [row.split()[:2] + row.split()[3:4]
                    for row in hanging.strip().splitlines()[1:]],
        "aborted": aborted.strip(),
        "producers_header": rows[0], "producers": [row[1:3] + row[-1:] for row in rows[1:]],
        "aborted_transactions": [t["first_offset"] for t in committed["aborted_transactions"]],
    }


def test_kafka_transactions_abort_ends_a_hanging_transaction_as_on_kafka(
        tools, make_broker, scratch_kafka):
    """kafka-transactions abort --start-offset ends a transaction open on a
    partition with an abort marker (WriteTxnMarkers, which kcoord did not
    serve): the last stable offset moves past it, describe-producers shows no
    open transaction, read_committed readers are told it was aborted; as on
    Kafka."""
    import uuid

    suffix = uuid.uuid4().hex[:8]
    ours = _abort_session(make_broker().bootstrap, f"hang-{suffix}", f"hang-txn-{suffix}")
    theirs = _abort_session(scratch_kafka.bootstrap, f"hang-{suffix}", f"hang-txn-{suffix}")
    assert ours["held"] == 0 and ours["released"] == 3, ours
    assert ours["producers"] and ours["producers"][0][-1] == "None", ours
    assert ours["aborted_transactions"] == [0], ours
    # its coordinator still has it open: not hanging for find-hanging, on both
    assert ours["hanging"] == [], ours
    assert ours == theirs
