"""`make bench` runs: ``python -m benchmarks`` in quick mode exits 0 and prints every figure."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support import REPO


@pytest.mark.timeout(600)  # the subprocess has its own bound (540 s): a guard against a hang
def test_benchmarks_run_quick_and_print_their_figures():
    env = {**os.environ, "KCOORD_BENCH_QUICK": "1"}
    result = subprocess.run([sys.executable, "-m", "benchmarks"], cwd=REPO, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=540)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "QUICK mode" in out

    # Server throughput next to the echo server, with the ratio.
    assert re.search(r"echo server .* [\d,]+ req/s", out), out
    assert re.search(r"ApiVersions v3 .* [\d,]+ req/s .*ratio to echo \d+\.\d+", out), out
    assert re.search(r"Metadata v1, all topics .* [\d,]+ req/s .*ratio to echo \d+\.\d+", out), out
    # Start-up to the first answered request.
    assert re.search(r"startup to first answer +\d+ ms", out), out
    # Codec: parse and build of typical messages, and the hand-written baseline.
    for label in ("Metadata v9 request", "CreateTopics v5 request", "ApiVersions v3 response",
                  "hand-written struct: Metadata v9 request"):
        assert re.search(re.escape(label) + r".* parse +\d+\.\d+ µs +build +\d+\.\d+ µs", out), out
    assert re.search(r"construct / hand-written .* parse \d+\.\d+x, build \d+\.\d+x", out), out
    # Topic operations: cost at two sizes and the loop's worst wait.
    assert re.search(r"create one topic: +\d+\.\d+ ms at 10 topics, +\d+\.\d+ ms at", out), out
    assert re.search(r"worst wait of another client meanwhile \d+\.\d+ ms", out), out
    # Data plane: kcoord next to librdkafka's mock cluster, and the loop's worst wait.
    for label in ("produce 20,000 x 100 B", "consume 20,000 x 100 B",
                  "end-to-end latency p50", "end-to-end latency p99"):
        assert re.search(re.escape(label) + r" +kcoord +\d+\.\d+ .* mock +\d+\.\d+ +\(kcoord/mock",
                         out), out
    assert re.search(r"while producing 100 B messages: \d+\.\d+ ms", out), out
    # Consumer groups: kcoord next to the mock cluster, replay and memory.
    for label in ("first assignment, 1 consumer", "sync commits/s, 1 connection",
                  "sync commits/s, 8 connections"):
        assert re.search(re.escape(label) + r" +kcoord +\d+\.\d+ .* mock +\d+\.\d+ +"
                         r"\(kcoord/mock", out), out
    assert re.search(r"heartbeats/s, 20 members +kcoord +\d+\.\d+", out), out
    assert re.search(r"memory per 1,000 groups of 3 members: \d+\.\d+ MiB \(resident set, .*"
                     r"a group in each of the 50 __consumer_offsets partitions, their logs "
                     r"and those groups took -?\d+\.\d+ MiB\)", out), out
    assert re.search(r"Python objects held per 1,000 groups of 3 members: \d+\.\d+ MiB", out), out
    assert re.search(r"start-up replay of [\d,]+ __consumer_offsets records: \d+\.\d+ s \(goal "
                     r"for 1M: under 3 s\); worst wait of another client meanwhile \d+\.\d+ ms", out), out
    assert re.search(r"while 8 connections commit: \d+\.\d+ ms", out), out
    assert re.search(r"sync commits/s with kcoord.fsync.policy=batch .*: [\d,]+ over 1 connection "
                     r"\(\d+\.\d+ of never\), [\d,]+ over 8", out), out
    assert re.search(r"while a group of [\d,]+ members completes its join \(the leader's answer "
                     r"\d+ KiB\): \d+\.\d+ ms", out), out
    assert re.search(r"during one JoinGroup of 50,000 protocols \(\d+\.\d+ MiB, answered in \d+ "
                     r"ms\): \d+\.\d+ ms", out), out
    assert re.search(r"sync commits/s against a server that only answers: [\d,]+ over 1 "
                     r"connection \(the client's ceiling; mock/ceiling \d+\.\d+, "
                     r"kcoord/ceiling \d+\.\d+; goal 0\.7\), [\d,]+ over 8 .*kcoord/ceiling "
                     r"\d+\.\d+, goal 0\.6\)", out), out
    assert re.search(r"3 consumers started together +kcoord +\d+\.\d+ ms", out), out
    assert re.search(r"the same answers from one event loop \(a Python process of its own, "
                     r"uvloop, no work\): [\d,]+ over 1 connection \(\d+\.\d+ of the ceiling\), "
                     r"[\d,]+ over 8 \(\d+\.\d+\); its CPU per commit \d+ µs over 1, \d+ µs over 8",
                     out), out
    assert re.search(r"broker CPU per synchronous commit: \d+ µs over 1 connection, \d+ µs over "
                     r"8 \(goal, issue #21: at most 30", out), out
    assert re.search(r"while __consumer_offsets is compacted under a commit storm \(\d+ "
                     r"compactions, the longest \d+ ms\): \d+\.\d+ ms", out), out
    for linger in (-1, 0, 5):
        assert re.search(rf"group.coordinator.append.linger.ms={linger} +3 consumers started "
                         r"together +\d+\.\d+ ms, sync commits/s +[\d,]+ over 1 connection, "
                         r"+[\d,]+ over 8 \(starts: median of \d+, \d+ under 500 ms\)", out), out
    # The consumer group protocol next to Kafka (when Java and Maven are there).
    if "consumer group protocol next to Apache Kafka: skipped" not in out:
        for label in ("first assignment, 1 consumer", "first assignment, 10 consumers",
                      "rebalance when 1 of 10 leaves", "steady heartbeats (one member)",
                      "memory per 1,000 groups of 3"):
            assert re.search(re.escape(label) + r".* kcoord +[\d,.]+ .* Kafka +[\d,.]+ .* "
                             r"ratio +\d+\.\d+", out), out
    # Transactions (issue #23): kcoord next to Kafka, which may be reported unavailable.
    assert "transactions: confluent-kafka through kcoord" in out, out
    section = out.split("transactions: confluent-kafka through kcoord", 1)[-1].split("\n\n")[0]
    kafka_figure = (r"n/a" if "(Apache Kafka unavailable" in section
                    else r"-?[\d,]+\.?\d* (txn/s|ms|MB/s) +ratio +-?\d+\.\d+")
    for label, unit in (("transactions/s, 1 partition", "txn/s"),
                        ("transactions/s, 8 partitions", "txn/s"),
                        ("latency p50, from commit returning", "ms"),
                        ("latency p99, from commit returning", "ms"),
                        ("latency p50, from commit called", "ms"),
                        ("latency p99, from commit called", "ms"),
                        ("read_uncommitted", "MB/s"), ("read_committed", "MB/s")):
        assert re.search(re.escape(label) + rf" +kcoord +-?[\d,]+\.?\d* {unit} +Kafka +"
                         + kafka_figure, section), out
    assert re.search(r"read_committed / read_uncommitted, kcoord +\d+\.\d+ +goal >= 0\.9",
                     section), out
    # ... and next to what the client reaches against a server that only answers.
    kafka_share = (r"" if "(Apache Kafka unavailable" in section
                   else r", Kafka \d+\.\d+, twice Kafka's rate \d+\.\d+")
    for partitions in ("1 partition", "8 partitions"):
        assert re.search(rf"against a server that only answers, {partitions}: [\d,]+ txn/s "
                         rf"\(the client's ceiling\); kcoord \d+\.\d+ of it{kafka_share}\n",
                         section), out
    # TLS and SASL (issue #26): SASL_SSL next to PLAINTEXT on kcoord (and Kafka if there).
    assert "SASL_SSL (TLS + SCRAM-SHA-512) next to PLAINTEXT" in out, out
    for label, unit in (("connection to first answer", "ms"), ("produce 2,000 x 1 KiB", "MB/s"),
                        ("consume 2,000 x 1 KiB", "MB/s")):
        assert re.search(re.escape(label) + rf" +kcoord +PLAINTEXT +\d+\.\d+ {unit} +SASL_SSL +"
                         rf"\d+\.\d+ {unit} +cost +\d+\.\d+", out), out
    assert re.search(r"of which the client's own SCRAM computation \d+\.\d+ ms \(PBKDF2, the "
                     r"same for both brokers\): a broker answering PLAINTEXT in \d+\.\d+ ms has "
                     r"a cost of at least \d+\.\d+", out), out
    # The fixture: time to a first produce, memory, a suite with and without sharing.
    assert re.search(r"to the first acknowledged produce: in-process \d+ ms .*imports included, "
                     r"\d+ ms\), as a child process \d+ ms", out), out
    assert re.search(r"memory of one in-process broker: \d+\.\d+ MiB", out), out
    assert re.search(r"a suite of \d+ tests, .*: \d+\.\d+ s with a fresh broker per test, "
                     r"\d+\.\d+ s sharing", out), out
    # Pipeline: the data source next to plain-Python decoding of the same log.
    assert re.search(r"plain Python, 1 core: +[\d,]+ records/s", out), out
    assert re.search(r"per record \(the query's fixed cost and the JIT taken out\): +[\d,]+ "
                     r"records/s per core",
                     out), out
    assert re.search(r"whole query: +[\d,]+ records/s per core \([\d,]+ records/s on the clock\)",
                     out), out
    # Each process's CPU per record is the large query's less the small one's:
    # on a busy machine the difference can come out a little below zero.
    assert re.search(r"CPU per record: plain Python \d+\.\d+ us; data source: jvm -?\d+\.\d+ us, "
                     r"python workers -?\d+\.\d+ us, jvm jit compiler -?\d+\.\d+ us; the query's "
                     r"fixed cost \(a 500-record log\): jvm \d+ ms, python workers \d+ ms, "
                     r"jvm jit compiler \d+ ms", out), out
    assert re.search(r"per core at least 80% of plain Python: \d+\.\d+x per record, "
                     r"\d+\.\d+x for the whole query", out), out
    assert "FAILED" not in out
