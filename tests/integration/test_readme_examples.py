"""The README's client examples run as written (against a broker on a free port),
each on its own on a fresh broker and then again on the same broker: each
makes the topic ``orders`` unless it is there; the admin examples list it, and
the produce-and-consume examples print back what they produced."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from kcoord.broker.testing import Kcoord
from tests.support import REPO

# The pytest section's examples (a test file, the embedded broker) are run by
# tests/test_pytest_plugin.py; these are the client examples.
_ALL = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
BLOCKS = [b for b in _ALL
          if not b.startswith("# test_") and "EmbeddedBroker" not in b and
          '"group.protocol": "consumer"' not in b and "transactional.id" not in b
          and "SASL_SSL" not in b]
# The exactly-once example (a transactional consume-transform-produce loop).
EXACTLY_ONCE = [b for b in _ALL if "transactional.id" in b]
# The security section's example (a broker started with --dev-tls).
SASL_SSL = [b for b in _ALL if "SASL_SSL" in b]
# The consumer group protocol's example (a broker started with it enabled).
KIP848 = [b for b in _ALL if '"group.protocol": "consumer"' in b]
CLIENTS = ["kafka-python", "confluent-kafka", "aiokafka"]


def _run(source: str, bootstrap: str) -> str:
    source = source.replace("127.0.0.1:9092", bootstrap)
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_readme_has_an_admin_and_a_produce_consume_example_per_client():
    assert len(BLOCKS) == 2 * len(CLIENTS) + 1  # and the consumer-group example


@pytest.mark.parametrize("index", range(len(CLIENTS)), ids=CLIENTS)
def test_readme_admin_example_runs_alone_and_again(make_broker, index):
    node = make_broker()
    for _run_again in range(2):
        assert "orders" in _run(BLOCKS[index], node.bootstrap)


@pytest.mark.parametrize("index", range(len(CLIENTS)), ids=CLIENTS)
def test_readme_produce_consume_example_runs_alone_and_again(make_broker, index):
    node = make_broker()
    produce_consume = BLOCKS[len(CLIENTS) + index]
    produced = re.search(r'b"(\d+ \w+)"', produce_consume).group(1)
    for times in (1, 2):
        out = _run(produce_consume, node.bootstrap)
        assert out.count(f"b'{produced}'") == times, out  # everything in the topic
    partitions = Kcoord(node.bootstrap)._partitions("orders")
    assert partitions == 3


def test_readme_consumer_group_example_runs_alone_and_again(make_broker):
    """Two consumers share the three partitions of ``orders``, and the lag table
    shows every partition committed up to its end, on a fresh broker and again."""
    node = make_broker()
    for _run_again in range(2):
        out = _run(BLOCKS[2 * len(CLIENTS)], node.bootstrap)
        owned = {name: eval(parts) for name, parts in
                 re.findall(r"^(alice|bob) owns partitions (\[.*\])$", out, re.M)}
        assert sorted(owned["alice"] + owned["bob"]) == [0, 1, 2] and all(owned.values()), out
        assert "group billing: Stable with 2 members" in out, out
        rows = re.findall(r"^orders +(\d) +(\d+) +(\d+) +(\d+)$", out, re.M)
        assert [(p, lag) for p, _c, _e, lag in rows] == [("0", "0"), ("1", "0"), ("2", "0")], \
            out


def test_readme_consumer_protocol_example_runs_alone(make_broker):
    """The consumer group protocol's example, on a fresh broker: the one consumer
    is given every partition of ``orders``."""
    (example,) = KIP848
    node = make_broker()
    for _run_again in range(2):
        out = _run(example, node.bootstrap)
        assert "billing-v2 owns partitions [0, 1, 2]" in out, out


def test_readme_exactly_once_example_runs_alone_and_again(make_broker):
    """Every payment gets one receipt, read back by a read_committed consumer; run
    again, the example goes on from where the first run committed."""
    (block,) = EXACTLY_ONCE
    node = make_broker()
    for _run_again in range(2):
        out = _run(block, node.bootstrap)
        assert out.strip() == repr([b"receipt for payment %d" % n for n in range(5)]), out


def test_readme_sasl_ssl_example(tmp_path):
    """The SASL_SSL example, against ``kcoord serve --dev-tls`` as the README
    starts it: the record it produces over TLS is read back over PLAINTEXT."""
    from confluent_kafka import Consumer

    from tests.support import BrokerProcess

    (block,) = SASL_SSL
    data = tmp_path / "data"
    process = BrokerProcess(data, "--dev-tls").start()
    try:
        started = next(e for e in process.events if e.get("event") == "broker.started")
        sasl_ssl = started["listeners"]["SASL_SSL"].split(" ")[0]
        source = block.replace("127.0.0.1:9094", sasl_ssl).replace(
            "data/dev-tls/ca.pem", str(data / "dev-tls" / "ca.pem"))
        _run(source, process.bootstrap)
        consumer = Consumer({"bootstrap.servers": process.bootstrap, "group.id": "readme",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["events"])
        got = None
        for _ in range(100):
            message = consumer.poll(0.3)
            if message is not None and message.error() is None:
                got = message.value()
                break
        consumer.close()
        assert got == b"hello over TLS"
    finally:
        process.terminate()
