"""``kcoord groups`` next to Kafka 4.4's own ``kafka-consumer-groups.sh``
(``ConsumerGroupCommand``), both pointed at the same broker: the same output,
to the byte, for each action a user runs (rows that Kafka's tool prints in hash
order are compared as sets), and the same exit status.  The broker is kcoord,
and for a second run of the comparisons Apache Kafka 4.4 itself (``on_kafka``):
kcoord's tool is a client that must work against either."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kcoord.broker.testing import Kcoord
from kcoord.protocol.client import WireClient
from tests.reference import kafka
from tests.support import REPO

TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


@pytest.fixture(scope="module")
def tools(_reference_pool):
    _reference_pool.get(kafka.MAIN_VERSION)
    return kafka


def _both(bootstrap: str, *args: str):
    theirs = kafka.run_tool(TOOL, "--bootstrap-server", bootstrap, *args)
    return theirs, _ours("--bootstrap-server", bootstrap, *args)


def _ours(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kcoord.broker.cli", "groups", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=60)


def _same(bootstrap: str, *args: str, rows_in_any_order: bool = False) -> str:
    """Both tools' output; with ``rows_in_any_order``, the lines after the header
    (Kafka prints them in hash order) are compared as a multiset."""
    theirs, ours = _both(bootstrap, *args)
    assert ours.returncode == theirs.returncode, (args, theirs, ours)
    if theirs.stderr.startswith("java.util.concurrent.ExecutionException: "):
        # A failed admin call: Kafka's tool prints why on stdout (compared below),
        # then the Java stack trace, whose first line says it again; kcoord's
        # prints the why only.
        why = theirs.stderr.split("\n", 1)[0].split(": ", 1)[1]
        assert f"failed due to {why}" in ours.stdout, (args, theirs.stderr, ours.stdout)
        assert ours.stderr == "", (args, ours.stderr)
    else:
        assert ours.stderr.strip() == theirs.stderr.strip(), (args, theirs.stderr, ours.stderr)
    if rows_in_any_order:
        mine, kafkas = ours.stdout.split("\n"), theirs.stdout.split("\n")
        head = next((i + 1 for i, line in enumerate(kafkas) if line.startswith("GROUP ")), 0)
        assert mine[:head] == kafkas[:head], (args, theirs.stdout, ours.stdout)
        assert sorted(mine[head:]) == sorted(kafkas[head:]), (args, theirs.stdout, ours.stdout)
    else:
        assert ours.stdout == theirs.stdout, (args, theirs.stdout, ours.stdout)
    return ours.stdout


@pytest.fixture(scope="module")
def groups(tools, tmp_path_factory):
    """A kcoord broker holding what ``_prepare`` makes."""
    from tests.support import BrokerThread

    node = BrokerThread(tmp_path_factory.mktemp("groups-tool"), overrides={
        "group.coordinator.rebalance.protocols": "classic,consumer"}).start()
    consumers = _prepare(node.bootstrap)[1]
    yield node
    for c in consumers:
        c.close()
    node.stop()


@pytest.fixture(scope="module")
def on_kafka(scratch_kafka):
    """Apache Kafka 4.4 itself holding what ``_prepare`` makes (the scratch Kafka:
    the paired reference's topics must stay those of its kcoord partner)."""
    orders, consumers = _prepare(scratch_kafka.bootstrap)
    yield SimpleNamespace(bootstrap=scratch_kafka.bootstrap, orders=orders)
    for c in consumers:
        c.close()


@pytest.fixture(params=["kcoord", "kafka"])
def broker_of(request):
    """The broker of ``groups`` (kcoord) or ``on_kafka`` (Apache Kafka 4.4)."""
    return request.getfixturevalue("groups" if request.param == "kcoord" else "on_kafka")


def _settled(condition, what: str, consumers=(), timeout: float = 60) -> None:
    """Poll ``consumers`` until ``condition()`` holds, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.02)
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"{what} did not settle in {timeout} s")


def _prepare(bootstrap: str) -> tuple[str, list]:
    """``orders`` (one partition, 10 records) and ``payments`` (three), and the
    groups: ``billing``, two live members over both topics (one partition
    committed); ``modern``, two members of the consumer group protocol (KIP-848);
    ``static``, one static member; ``old-group``, empty with a committed offset;
    ``epochs``, empty, its offsets committed with leader epochs.  The name of
    ``orders``, and the live consumers (to close)."""
    admin = Kcoord(bootstrap)
    orders = admin.create_topic("orders")
    payments = admin.create_topic("payments", partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(orders, str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    consumers = []

    def join(group, n, **extra):
        for i in range(n):
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                          "client.id": f"{group}-client-{i}", **extra})
            c.subscribe([orders, payments])
            consumers.append(c)
        mine = consumers[-n:]

        def stable():
            described = admin.describe_group(group)
            return described["group_state"] == "Stable" and \
                len(described["members"]) == n and all(c.assignment() for c in mine)
        _settled(stable, group, mine)
        return mine

    join("billing", 2)[0].commit(offsets=[TopicPartition(orders, 0, 4)], asynchronous=False)
    modern = [Consumer({"bootstrap.servers": bootstrap, "group.id": "modern",
                        "group.protocol": "consumer", "auto.offset.reset": "earliest",
                        "enable.auto.commit": False, "client.id": f"modern-client-{i}"})
              for i in range(2)]
    for c in modern:
        c.subscribe([orders, payments])
        consumers.append(c)
    _settled(lambda: sum(len(c.assignment()) for c in modern) == 4 and
             all(c.assignment() for c in modern), "modern", modern)
    modern[0].commit(offsets=[TopicPartition(orders, 0, 3)], asynchronous=False)
    join("static", 1, **{"group.instance.id": "static-instance-1"})
    old = Consumer({"bootstrap.servers": bootstrap, "group.id": "old-group",
                    "enable.auto.commit": False})
    old.commit(offsets=[TopicPartition(orders, 0, 7)], asynchronous=False)
    old.close()
    host, port = bootstrap.rsplit(":", 1)
    with WireClient(host, int(port)) as client:  # the leader epochs --verbose shows
        def committed():
            answer = client.call(8, 9, {
                "group_id": "epochs", "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": payments, "partitions": [
                    {"partition_index": p, "committed_offset": 0, "committed_leader_epoch": e,
                     "committed_metadata": ""} for p, e in ((0, 0), (1, 3))]}]})
            return all(p["error_code"] == 0 for t in answer["topics"] for p in t["partitions"])
        _settled(committed, "the commit of epochs")
    admin.close()
    return orders, consumers


@pytest.mark.parametrize("args", [
    ("--list",),
    ("--list", "--state"),
    ("--list", "--state", "Stable"),
    ("--list", "--type"),
    ("--list", "--type", "consumer"),
    ("--list", "--type", "Classic", "--state"),
    ("--describe", "--group", "billing", "--members"),
    ("--describe", "--group", "billing", "--members", "--verbose"),
    ("--describe", "--group", "static", "--members", "--verbose"),
    ("--describe", "--group", "billing", "--state"),
    ("--describe", "--group", "old-group"),
    ("--describe", "--group", "old-group", "--state"),
    ("--describe", "--group", "old-group", "--members"),
    ("--describe", "--group", "no-such-group"),
    ("--describe", "--group", "no-such-group", "--members"),
    ("--describe", "--group", "no-such-group", "--state"),
    ("--describe", "--group", "modern"),
    ("--describe", "--group", "modern", "--members"),
    ("--describe", "--group", "modern", "--members", "--verbose"),
    ("--describe", "--group", "modern", "--state"),
    # --verbose: the leader epoch of each offset, the members' epochs and partitions,
    # the group's epochs (``-`` where a classic group has none)
    ("--describe", "--group", "billing", "--verbose"),
    ("--describe", "--group", "epochs", "--verbose"),
    ("--describe", "--group", "epochs", "--offsets", "--verbose"),
    ("--describe", "--group", "old-group", "--verbose"),
    ("--describe", "--group", "modern", "--verbose"),
    ("--describe", "--group", "billing", "--state", "--verbose"),
    ("--describe", "--group", "modern", "--state", "--verbose"),
    ("--describe", "--group", "old-group", "--state", "--verbose"),
    ("--describe", "--group", "old-group", "--members", "--verbose"),
], ids=lambda a: " ".join(a))
def test_the_groups_tool_prints_what_kafka_s_prints(broker_of, args):
    _same(broker_of.bootstrap, *args,
          rows_in_any_order=args[0] == "--list" or "--members" in args or "modern" in args)


def test_verbose_shows_the_leader_epoch_of_each_offset_and_the_group_s_epochs(broker_of):
    out = _same(broker_of.bootstrap, "--describe", "--group", "epochs", "--verbose")
    assert out.splitlines()[1].split()[3] == "LEADER-EPOCH"
    assert sorted(line.split()[2:4] for line in out.splitlines()[2:]) == \
        [["0", "0"], ["1", "3"]]  # partition, leader epoch
    out = _same(broker_of.bootstrap, "--describe", "--group", "modern", "--state", "--verbose")
    header, row = out.splitlines()[1:3]
    assert header.split()[-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert int(row.split()[-3]) > 0 and int(row.split()[-2]) > 0


def test_offsets_and_lag_as_kafka_s_tool_shows_them(groups):
    out = _same(groups.bootstrap, "--describe", "--group", "billing", "--offsets",
                rows_in_any_order=True)
    committed = [line.split() for line in out.splitlines()[2:] if line.split()[3:4] == ["4"]]
    assert len(committed) == 1 and committed[0][3:6] == ["4", "10", "6"]  # offset, end, lag
    out = _same(groups.bootstrap, "--describe", "--all-groups", rows_in_any_order=True)
    assert "old-group" in out and "billing" in out and "static" in out


def test_deleting_a_group_with_members_and_an_empty_one_as_kafka_s_tool_does(broker_of):
    groups = broker_of
    _same(groups.bootstrap, "--delete", "--group", "billing")  # refused: it has members
    admin = Kcoord(groups.bootstrap)
    orders = _orders(groups)
    for name in ("gone-1", "gone-2"):
        c = Consumer({"bootstrap.servers": groups.bootstrap, "group.id": name,
                      "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(orders, 0, 1)], asynchronous=False)
        c.close()
    theirs = kafka.run_tool(TOOL, "--bootstrap-server", groups.bootstrap, "--delete",
                            "--group", "gone-1")
    ours = _ours("--bootstrap-server", groups.bootstrap, "--delete", "--group", "gone-2")
    assert ours.returncode == theirs.returncode == 0
    assert ours.stdout == theirs.stdout.replace("gone-1", "gone-2")
    listed = admin.call(16, 5, {"states_filter": [], "types_filter": []})["groups"]
    assert not {"gone-1", "gone-2"} & {g["group_id"] for g in listed}
    admin.close()


def _topics(admin) -> list[str]:
    listed = admin.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False})
    return [t["name"] for t in listed["topics"]]


def _orders(node) -> str:
    """The ``orders`` topic of a broker the tests prepared (its name has a suffix)."""
    if getattr(node, "orders", None):
        return node.orders
    admin = Kcoord(node.bootstrap)
    try:
        return next(t for t in _topics(admin) if t.startswith("orders"))
    finally:
        admin.close()


def _twin_groups(node, name: str, commits: dict[int, int]) -> tuple[str, str]:
    """Two empty groups with the same committed offsets on ``orders``: one for
    Kafka's tool, one for kcoord's (resetting changes them)."""
    orders = _orders(node)
    pair = (f"{name}-k", f"{name}-o")  # names of one length: the same column widths
    for group in pair:
        c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                      "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(orders, p, o) for p, o in commits.items()],
                 asynchronous=False)
        c.close()
    return pair


def _reset_both(node, name: str, *args: str, stderr: bool = True):
    kafka_group, our_group = _twin_groups(node, name, {0: 5})
    admin = Kcoord(node.bootstrap)
    orders = _orders(node)
    args = tuple(a.replace("ORDERS", orders) for a in args)
    theirs = kafka.run_tool(TOOL, "--bootstrap-server", node.bootstrap, "--reset-offsets",
                            "--group", kafka_group, *args)
    ours = _ours("--bootstrap-server", node.bootstrap, "--reset-offsets", "--group", our_group,
                 *args)
    assert ours.returncode == theirs.returncode, (theirs, ours)
    assert ours.stdout == theirs.stdout.replace(kafka_group, our_group)
    if stderr:
        assert ours.stderr.strip() == theirs.stderr.strip()
    # What --execute committed is the same on both.
    assert admin.committed(our_group) == admin.committed(kafka_group)
    admin.close()
    return ours.stdout


@pytest.mark.parametrize("args", [
    ("--topic", "ORDERS", "--shift-by", "1", "--dry-run"),  # no committed offset on 1
    ("--topic", "no-such-topic", "--to-earliest", "--dry-run"),
    ("--topic", "no-such-topic:0", "--to-offset", "1", "--dry-run"),
    ("--topic", "no-such-topic:0", "--to-earliest", "--dry-run"),
    ("--topic", "ORDERS:x", "--to-earliest", "--dry-run"),
    ("--all-topics", "--to-datetime", "yesterday", "--dry-run"),
    ("--all-topics", "--to-datetime", "2000-13-99T99:00:00.000", "--dry-run"),
    ("--all-topics", "--by-duration", "an hour", "--dry-run"),
], ids=lambda a: " ".join(a))
def test_a_reset_that_cannot_be_planned_fails_as_kafka_s_tool_fails(broker_of, args):
    """The same exit status, and the same words where Kafka's tool prints them on
    stdout; where it prints them with its usage on stderr, the same first line."""
    groups = broker_of
    orders = _orders(groups)
    args = tuple(a.replace("ORDERS", orders) for a in args)
    theirs, ours = _both(groups.bootstrap, "--reset-offsets", "--group", "old-group", *args)
    assert ours.returncode == theirs.returncode, (theirs, ours)
    assert ours.stdout == theirs.stdout, (theirs, ours)
    if theirs.returncode:
        assert ours.stderr.splitlines()[0] == theirs.stderr.splitlines()[0], (theirs, ours)


@pytest.mark.parametrize("args", [
    ("--all-topics", "--to-earliest"),
    ("--all-topics", "--to-latest", "--execute"),
    ("--topic", "ORDERS:0", "--to-offset", "3", "--execute"),
    ("--topic", "ORDERS", "--shift-by", "-2", "--execute"),
    ("--all-topics", "--to-current"),
    ("--all-topics", "--to-datetime", "2000-01-01T00:00:00.000", "--execute"),
    ("--all-topics", "--by-duration", "PT1H"),
    ("--all-topics", "--to-earliest", "--export"),
], ids=lambda a: " ".join(a))
def test_resetting_offsets_as_kafka_s_tool_does(broker_of, args, request):
    _reset_both(broker_of, f"reset-{abs(hash(request.node.callspec.id)) % 10**6}", *args)


def test_an_offset_past_the_log_end_is_set_to_the_end_as_kafka_s_tool_does(broker_of):
    out = _reset_both(broker_of, "reset-past-end", "--all-topics", "--to-offset", "1000",
                      "--execute", stderr=False)  # Kafka's warning goes through its logger
    assert out.split()[-1] == "10"


def test_a_group_with_members_is_not_reset_as_kafka_s_tool_says(broker_of):
    _same(broker_of.bootstrap, "--reset-offsets", "--group", "billing", "--all-topics",
          "--to-earliest")


def test_deleting_offsets_as_kafka_s_tool_does(broker_of):
    groups = broker_of
    admin = Kcoord(groups.bootstrap)
    orders = _orders(groups)
    kafka_group, our_group = _twin_groups(groups, "delete-offsets", {0: 5})
    theirs = kafka.run_tool(TOOL, "--bootstrap-server", groups.bootstrap, "--delete-offsets",
                            "--group", kafka_group, "--topic", orders)
    ours = _ours("--bootstrap-server", groups.bootstrap, "--delete-offsets", "--group",
                 our_group, "--topic", orders)
    assert (ours.returncode, ours.stdout) == \
        (theirs.returncode, theirs.stdout.replace(kafka_group, our_group))
    assert admin.committed(our_group) == admin.committed(kafka_group) == {}
    _same(groups.bootstrap, "--delete-offsets", "--group", "billing", "--topic", orders)
    admin.close()


@pytest.mark.parametrize("topics", [("no-such-topic",), ("no-such-topic", "ORDERS"),
                                    ("ORDERS:x",)], ids=" ".join)
def test_deleting_offsets_of_a_topic_that_does_not_exist_as_kafka_s_tool_does(groups, topics):
    """An unknown topic is a row of its own (partition ``-``, its error) and the
    others' offsets are deleted; a malformed partition list is misuse."""
    admin = Kcoord(groups.bootstrap)
    orders = next(t for t in _topics(admin) if t.startswith("orders"))
    kafka_group, our_group = _twin_groups(groups, f"del-missing-{len(topics)}-{topics[0][:5]}",
                                          {0: 5})
    args = [a for t in topics for a in ("--topic", t.replace("ORDERS", orders))]
    theirs = kafka.run_tool(TOOL, "--bootstrap-server", groups.bootstrap, "--delete-offsets",
                            "--group", kafka_group, *args)
    ours = subprocess.run([sys.executable, "-m", "kcoord.broker.cli", "groups",
                           "--bootstrap-server", groups.bootstrap, "--delete-offsets",
                           "--group", our_group, *args], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert ours.returncode == theirs.returncode, (theirs, ours)
    assert ours.stdout == theirs.stdout.replace(kafka_group, our_group), (theirs, ours)
    if theirs.returncode:
        assert ours.stderr.splitlines()[0] == theirs.stderr.splitlines()[0]
    assert "Traceback" not in ours.stderr
    assert admin.committed(our_group) == admin.committed(kafka_group)
    admin.close()


def test_resetting_a_group_that_does_not_exist_as_kafka_s_tool_does(groups):
    """Planning offsets for a group nobody has used yet (DescribeGroups v6 answers it
    GROUP_ID_NOT_FOUND): Kafka's tool plans them as for an empty group."""
    admin = Kcoord(groups.bootstrap)
    orders = next(t for t in _topics(admin) if t.startswith("orders"))
    admin.close()
    out = _same(groups.bootstrap, "--reset-offsets", "--group", "never-used", "--topic", orders,
                "--to-earliest", "--dry-run")
    assert "never-used" in out and orders in out


def _from_file_both(node, tmp_path, name: str, plan: str, *args: str, groups: int = 1):
    """--reset-offsets --from-file on twin groups: Kafka's tool resets ``name-k``
    from the plan, kcoord's ``name-o`` from the same plan with the group renamed.
    Kafka prints a plan's rows in hash order: compared as sets."""
    admin = Kcoord(node.bootstrap)
    orders = next(t for t in _topics(admin) if t.startswith("orders"))
    twins = [_twin_groups(node, f"{name}{i}", {0: 5}) for i in range(groups)]
    results = []
    for side, tool in ((0, "kafka"), (1, "kcoord")):
        mine = [pair[side] for pair in twins]
        text = plan.replace("ORDERS", orders)
        for i, group in enumerate(mine):
            text = text.replace(f"GROUP{i}", group)
        path = tmp_path / f"plan-{tool}.csv"
        path.write_text(text)
        command = ("--reset-offsets", *[a for g in mine for a in ("--group", g)],
                   "--from-file", str(path), *[a.replace("ORDERS", orders) for a in args])
        if tool == "kafka":
            results.append(kafka.run_tool(TOOL, "--bootstrap-server", node.bootstrap, *command))
        else:
            results.append(subprocess.run(
                [sys.executable, "-m", "kcoord.broker.cli", "groups", "--bootstrap-server",
                 node.bootstrap, *command], capture_output=True, text=True, cwd=REPO,
                timeout=60))
    theirs, ours = results
    expected = theirs.stdout
    for kafka_group, our_group in twins:
        expected = expected.replace(kafka_group, our_group)
    expected = expected.replace("plan-kafka.csv", "plan-kcoord.csv")
    assert ours.returncode == theirs.returncode, (theirs, ours)
    assert sorted(ours.stdout.split("\n")) == sorted(expected.split("\n")), (theirs, ours)
    for kafka_group, our_group in twins:
        assert admin.committed(our_group) == admin.committed(kafka_group)
    admin.close()
    return ours


@pytest.mark.parametrize("plan, args, count", [
    ("ORDERS,0,1\n", ("--execute",), 1),  # no scope needed: the file is the scope
    ("ORDERS,0,2\r\n", ("--all-topics", "--dry-run"), 1),
    ("ORDERS,0,100\n", ("--topic", "ORDERS", "--execute"), 1),  # past the end: the end
    ("ORDERS,0,1\n", ("--topic", "no-such-topic", "--execute"), 1),  # the scope is looked up
    ("GROUP0,ORDERS,0,3\n", ("--execute",), 1),  # the form with groups, one group
    ("GROUP0,ORDERS,0,3\nGROUP1,ORDERS,0,4\n", ("--execute",), 2),
    ("GROUP0,ORDERS,0,3\n", ("--dry-run",), 2),  # no plan for the second group
    ("ORDERS,0,3\n", ("--dry-run",), 2),  # without groups, two groups: no plan for either
    ("other,ORDERS,0,3\n", ("--execute",), 1),
    ("GROUP0,ORDERS,0,3\nGROUP1,ORDERS,0,4\n", ("--dry-run", "--export"), 2),
    ("ORDERS,0,4\n", ("--dry-run", "--export"), 1),
    ("", ("--dry-run",), 1),  # an empty file
    ("ORDERS,0,1\n\nORDERS,0,2\n", ("--dry-run",), 1),  # a blank line
    ("ORDERS,0,2\n\n\n", ("--execute",), 1),  # blank lines at the end, as --export ends
    ("\n\n", ("--dry-run",), 1),  # only blank lines
    ("garbage\n", ("--dry-run",), 1),  # a topic alone: partition 0, offset 0
    ("ORDERS,0\n", ("--execute",), 1),  # no offset: 0
])
def test_resetting_from_a_file_as_kafka_s_tool_does(groups, tmp_path, plan, args, count):
    name = f"file-{abs(hash((plan, args, count))) % 10**6}"
    ours = _from_file_both(groups, tmp_path, name, plan, *args, groups=count)
    if args == ("--execute",) and "other" not in plan:
        assert Kcoord(groups.bootstrap).committed(f"{name}0-o") != {(next(
            t for t in _topics(Kcoord(groups.bootstrap)) if t.startswith("orders")), 0): 5}
    assert ours.stderr.strip() == "" or "is higher than latest offset" in ours.stderr


def test_a_plan_file_that_cannot_be_read_is_named_as_kafka_s_tool_names_it(groups, tmp_path):
    theirs, ours = _both(groups.bootstrap, "--reset-offsets", "--group", "old-group",
                         "--from-file", str(tmp_path / "missing.csv"), "--dry-run")
    assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout)


def test_from_file_with_another_scenario_is_refused_as_kafka_s_tool_refuses_it(groups, tmp_path):
    plan = tmp_path / "plan.csv"
    plan.write_text("t,0,1\n")
    theirs, ours = _both(groups.bootstrap, "--reset-offsets", "--group", "old-group",
                         "--from-file", str(plan), "--to-earliest", "--dry-run")
    assert ours.returncode == theirs.returncode != 0
    assert "from-file" in ours.stderr and "to-earliest" in ours.stderr


# -- options that do not go together (Kafka's checkArgs) --------------------------------

def _kafka_s_words(stderr: str) -> list[str]:
    """What Kafka's tool says on stderr before its usage table or a stack trace."""
    lines = []
    for line in stderr.splitlines():
        if line.startswith("\tat ") or re.match(r"Option +Description", line):
            break
        lines.append(line)
    return lines


def _unordered(line: str) -> str:
    """Kafka names the options of a hash set in an order that changes from one run
    to the next: ``[group], [all-groups]`` or ``[all-groups], [group]``; sorted here."""
    return re.sub(r"\[[a-z-]+\](?:, \[[a-z-]+\])+",
                  lambda m: ", ".join(sorted(m.group(0).split(", "))), line)


@pytest.mark.parametrize("args", [
    ("--reset-offsets", "--group", "old-group", "--all-topics", "--to-offset", "5", "--dry-run",
     "--execute"),
    ("--list", "--group", "billing"),
    ("--describe", "--group", "billing", "--members", "--offsets"),
    ("--describe", "--group", "billing", "--offsets", "--state"),
    ("--describe", "--group", "billing", "--all-groups"),
    ("--describe", "--group", "billing", "--state", "Stable"),
    ("--describe", "--group", "billing", "--topic", "t"),
    ("--describe", "--all-groups", "--type"),
    ("--describe",),
    ("--delete-offsets", "--group", "old-group"),
    ("--delete-offsets", "--all-groups", "--topic", "t"),
    ("--delete", "--group", "old-group", "--topic", "t"),
    ("--delete", "--group", "old-group", "--all-groups"),
    ("--delete", "--group", "old-group", "--state"),
    ("--delete",),
    ("--list", "--members", "--verbose"),
    ("--list", "--offsets"),
    ("--list", "--topic", "t"),
    ("--reset-offsets", "--group", "old-group", "--all-topics", "--to-earliest", "--to-latest",
     "--dry-run"),
    ("--reset-offsets", "--group", "old-group", "--all-topics", "--to-offset", "0",
     "--shift-by", "1"),  # a warning first: neither --execute nor --dry-run
    ("--reset-offsets", "--group", "old-group", "--from-file", "plan.csv", "--to-current",
     "--execute"),
    ("--reset-offsets", "--all-topics", "--to-earliest", "--execute"),
    ("--reset-offsets", "--group", "old-group", "--all-topics", "--execute"),  # no scenario
    ("--reset-offsets", "--group", "old-group", "--to-earliest", "--execute"),  # no scope
    ("--list", "--describe", "--group", "billing"),
    ("--group", "billing"),
    ("--validate-regex", "a.*", "--list"),
], ids=" ".join)
def test_options_that_do_not_go_together_are_refused_as_kafka_s_tool_refuses_them(
        broker_of, args):
    """Exit status 1, nothing on stdout, the same words on stderr (Kafka's usage
    table or stack trace after them left out), and nothing done."""
    admin = Kcoord(broker_of.bootstrap)
    before = admin.committed("old-group")
    theirs, ours = _both(broker_of.bootstrap, *args)
    assert ours.returncode == theirs.returncode == 1, (theirs, ours)
    assert ours.stdout == theirs.stdout == "", (theirs, ours)
    assert [_unordered(line) for line in ours.stderr.splitlines()] == \
        [_unordered(line) for line in _kafka_s_words(theirs.stderr)], (theirs, ours)
    assert before and admin.committed("old-group") == before  # nothing reset or deleted
    admin.close()


def test_delete_offsets_of_two_groups_is_refused_as_kafka_s_tool_refuses_it(broker_of):
    theirs, ours = _both(broker_of.bootstrap, "--delete-offsets", "--group", "old-group",
                         "--group", "billing", "--topic", _orders(broker_of))
    assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout) == (0, (
        "\nError: Executing consumer group command failed due to Found multiple arguments "
        "for option group, but you asked for only one\n")), (theirs, ours)
    assert Kcoord(broker_of.bootstrap).committed("old-group")


def _bare(*args: str):
    """Both tools without --bootstrap-server."""
    return kafka.run_tool(TOOL, *args), _ours(*args)


def test_without_a_bootstrap_server_as_kafka_s_tool(tools):
    theirs, ours = _bare("--list")
    assert ours.returncode == theirs.returncode == 1
    assert ours.stderr.splitlines() == _kafka_s_words(theirs.stderr) == \
        ['Missing required argument "[bootstrap-server]"']


@pytest.mark.parametrize("regex", ["orders-.*", "(orders", "orders)", "a{2,1}", "[z-a]",
                                   "a**", r"\q", "(?<name>x)", "(?P<name>x)"])
def test_validate_regex_as_kafka_s_tool(tools, regex):
    theirs, ours = _bare("--validate-regex", regex)
    assert (ours.returncode, ours.stdout, ours.stderr) == \
        (theirs.returncode, theirs.stdout, "") == (0, theirs.stdout, ""), (theirs, ours)
    assert f"`{regex}` is" in ours.stdout


def test_help_and_an_abbreviated_option_answer_as_kafka_s_tool(groups):
    """--help prints the options on stderr with exit status 1, and an option cut
    short is refused (exit status 1), as Kafka's tool does both."""
    for args, shown in ((("--help",), "--reset-offsets"), (("--lis",), "lis")):
        theirs, ours = _both(groups.bootstrap, *args)
        assert ours.returncode == theirs.returncode == 1, (args, theirs, ours)
        assert ours.stdout == theirs.stdout == "", (args, theirs, ours)
        assert shown in theirs.stderr and shown in ours.stderr, (args, theirs, ours)


@pytest.mark.parametrize("args", [("--lis",), ("--list", "--timeout"), ("--list", "--to-offset")],
                         ids=" ".join)
def test_what_the_option_parser_refuses_is_said_in_kafka_s_words(groups, args):
    """An unknown option or one missing its value: exit status 1, nothing on
    stdout, and kcoord's first line of stderr is what Kafka's tool says there
    (after the name of the exception it lets escape)."""
    theirs, ours = _both(groups.bootstrap, *args)
    assert ours.returncode == theirs.returncode == 1, (args, theirs, ours)
    assert ours.stdout == theirs.stdout == "", (args, theirs, ours)
    said = ours.stderr.split("\n", 1)[0]
    assert theirs.stderr.split("\n", 1)[0].endswith(f"Exception: {said}"), (theirs, ours)


@pytest.mark.parametrize("args", [
    ("--reset-offsets", "--group", "old-group", "--all-topics", "--to-offset", "abc"),
    ("--reset-offsets", "--group", "old-group", "--all-topics", "--shift-by", "1x"),
    ("--list", "--timeout", "soon"),
], ids=" ".join)
def test_a_number_that_does_not_parse_is_reported_as_by_kafka_s_tool(broker_of, args):
    """Read as joptsimple reads a long, before any broker is asked: Kafka's
    catch-all on stdout, exit status 0, nothing done."""
    admin = Kcoord(broker_of.bootstrap)
    before = admin.committed("old-group")
    theirs, ours = _both(broker_of.bootstrap, *args)
    assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout) == (0, (
        f"\nError: Executing consumer group command failed due to Cannot parse argument "
        f"'{args[-1]}' of option {args[-2].lstrip('-')}\n")), (theirs, ours)
    assert before and admin.committed("old-group") == before
    admin.close()


@pytest.mark.parametrize("args", [("--list", "--state", "stable,Bogus"),
                                  ("--list", "--type", "Bogus", "--state", "Bogus")],
                         ids=" ".join)
def test_an_unknown_state_or_type_is_refused_as_by_kafka_s_tool(broker_of, args):
    """Exit status 1 and Kafka's words first on stderr (the valid states as a set:
    Kafka lists them in hash order); the types are checked first."""
    theirs, ours = _both(broker_of.bootstrap, *args)
    assert ours.returncode == theirs.returncode == 1, (theirs, ours)
    assert ours.stdout == theirs.stdout == "", (theirs, ours)

    def words(stderr: str) -> tuple[str, set[str]]:
        head, _, listed = stderr.split("\n", 1)[0].partition(" are: ")
        return head, set(listed.split(", "))

    assert words(ours.stderr) == words(theirs.stderr), (theirs, ours)
