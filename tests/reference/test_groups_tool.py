"""``kcoord groups`` next to Kafka 4.4's own ``kafka-consumer-groups.sh``
(``ConsumerGroupCommand``), both pointed at the same broker: the same output,
to the byte, for each action a user runs (rows that Kafka's tool prints in hash
order are compared as sets), and the same exit status."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kcoord.broker.testing import Kcoord
from tests.reference import kafka
from tests.support import REPO

TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


@pytest.fixture(scope="module")
def tools(_reference_pool):
    _reference_pool.get(kafka.MAIN_VERSION)
    return kafka


def _both(bootstrap: str, *args: str):
    theirs = kafka.run_tool(TOOL, "--bootstrap-server", bootstrap, *args)
    ours = subprocess.run([sys.executable, "-m", "kcoord.broker.cli", "groups", "--bootstrap-server",
                           bootstrap, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=60)
    return theirs, ours


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
    """A broker holding: ``billing``, two live members over two topics (one
    partition committed); ``static``, one static member; ``old-group``, empty
    with a committed offset."""
    from tests.support import BrokerThread

    node = BrokerThread(tmp_path_factory.mktemp("groups-tool"), overrides={
        "group.coordinator.rebalance.protocols": "classic,consumer"}).start()
    admin = Kcoord(node.bootstrap)
    orders = admin.create_topic("orders")
    payments = admin.create_topic("payments", partitions=3)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(10):
        producer.produce(orders, str(i).encode(), partition=0)
    assert producer.flush(10) == 0
    consumers = []

    def join(group, n, **extra):
        for i in range(n):
            c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                          "client.id": f"{group}-client-{i}", **extra})
            c.subscribe([orders, payments])
            consumers.append(c)
        mine = consumers[-n:]
        for _ in range(200):
            for c in mine:
                c.poll(0.02)
            described = admin.describe_group(group)
            if described["group_state"] == "Stable" and len(described["members"]) == n and \
                    all(c.assignment() for c in mine):
                return mine
        raise AssertionError(f"{group} did not settle")

    join("billing", 2)[0].commit(offsets=[TopicPartition(orders, 0, 4)], asynchronous=False)
    # ``modern``: two members of the consumer group protocol (KIP-848)
    modern = [Consumer({"bootstrap.servers": node.bootstrap, "group.id": "modern",
                        "group.protocol": "consumer", "auto.offset.reset": "earliest",
                        "enable.auto.commit": False, "client.id": f"modern-client-{i}"})
              for i in range(2)]
    for c in modern:
        c.subscribe([orders, payments])
        consumers.append(c)
    for _ in range(300):
        for c in modern:
            c.poll(0.02)
        if sum(len(c.assignment()) for c in modern) == 4 and all(c.assignment() for c in modern):
            break
    else:
        raise AssertionError("modern did not settle")
    modern[0].commit(offsets=[TopicPartition(orders, 0, 3)], asynchronous=False)
    join("static", 1, **{"group.instance.id": "static-instance-1"})
    old = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "old-group",
                    "enable.auto.commit": False})
    old.commit(offsets=[TopicPartition(orders, 0, 7)], asynchronous=False)
    old.close()
    yield node
    for c in consumers:
        c.close()
    admin.close()
    node.stop()


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
], ids=lambda a: " ".join(a))
def test_the_groups_tool_prints_what_kafka_s_prints(groups, args):
    _same(groups.bootstrap, *args,
          rows_in_any_order=args[0] == "--list" or "--members" in args or "modern" in args)


def test_offsets_and_lag_as_kafka_s_tool_shows_them(groups):
    out = _same(groups.bootstrap, "--describe", "--group", "billing", "--offsets",
                rows_in_any_order=True)
    committed = [line.split() for line in out.splitlines()[2:] if line.split()[3:4] == ["4"]]
    assert len(committed) == 1 and committed[0][3:6] == ["4", "10", "6"]  # offset, end, lag
    out = _same(groups.bootstrap, "--describe", "--all-groups", rows_in_any_order=True)
    assert "old-group" in out and "billing" in out and "static" in out


def test_deleting_a_group_with_members_and_an_empty_one_as_kafka_s_tool_does(groups):
    _same(groups.bootstrap, "--delete", "--group", "billing")  # refused: it has members
    admin = Kcoord(groups.bootstrap)
    orders = next(t for t in _topics(admin) if t.startswith("orders"))
    for name in ("gone-1", "gone-2"):
        c = Consumer({"bootstrap.servers": groups.bootstrap, "group.id": name,
                      "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(orders, 0, 1)], asynchronous=False)
        c.close()
    theirs = kafka.run_tool(TOOL, "--bootstrap-server", groups.bootstrap, "--delete",
                            "--group", "gone-1")
    ours = subprocess.run([sys.executable, "-m", "kcoord.broker.cli", "groups", "--bootstrap-server",
                           groups.bootstrap, "--delete", "--group", "gone-2"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert ours.returncode == theirs.returncode == 0
    assert ours.stdout == theirs.stdout.replace("gone-1", "gone-2")
    listed = admin.call(16, 5, {"states_filter": [], "types_filter": []})["groups"]
    assert not {"gone-1", "gone-2"} & {g["group_id"] for g in listed}
    admin.close()


def _topics(admin) -> list[str]:
    listed = admin.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False})
    return [t["name"] for t in listed["topics"]]


def _twin_groups(node, name: str, commits: dict[int, int]) -> tuple[str, str]:
    """Two empty groups with the same committed offsets on ``orders``: one for
    Kafka's tool, one for kcoord's (resetting changes them)."""
    admin = Kcoord(node.bootstrap)
    orders = next(t for t in _topics(admin) if t.startswith("orders"))
    admin.close()
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
    orders = next(t for t in _topics(admin) if t.startswith("orders"))
    args = tuple(a.replace("ORDERS", orders) for a in args)
    theirs = kafka.run_tool(TOOL, "--bootstrap-server", node.bootstrap, "--reset-offsets",
                            "--group", kafka_group, *args)
    ours = subprocess.run([sys.executable, "-m", "kcoord.broker.cli", "groups", "--bootstrap-server",
                           node.bootstrap, "--reset-offsets", "--group", our_group, *args],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
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
    ("--topic", "ORDERS:x", "--to-earliest", "--dry-run"),
    ("--all-topics", "--to-datetime", "yesterday", "--dry-run"),
    ("--all-topics", "--to-datetime", "2000-13-99T99:00:00.000", "--dry-run"),
    ("--all-topics", "--by-duration", "an hour", "--dry-run"),
], ids=lambda a: " ".join(a))
def test_a_reset_that_cannot_be_planned_fails_as_kafka_s_tool_fails(groups, args):
    """The same exit status, and the same words where Kafka's tool prints them on
    stdout; where it prints them with its usage on stderr, the same first line."""
    admin = Kcoord(groups.bootstrap)
    orders = next(t for t in _topics(admin) if t.startswith("orders"))
    admin.close()
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
def test_resetting_offsets_as_kafka_s_tool_does(groups, args, request):
    _reset_both(groups, f"reset-{abs(hash(request.node.callspec.id)) % 10**6}", *args)


def test_an_offset_past_the_log_end_is_set_to_the_end_as_kafka_s_tool_does(groups):
    out = _reset_both(groups, "reset-past-end", "--all-topics", "--to-offset", "1000",
                      "--execute", stderr=False)  # Kafka's warning goes through its logger
    assert out.split()[-1] == "10"


def test_a_group_with_members_is_not_reset_as_kafka_s_tool_says(groups):
    _same(groups.bootstrap, "--reset-offsets", "--group", "billing", "--all-topics",
          "--to-earliest")


def test_deleting_offsets_as_kafka_s_tool_does(groups):
    admin = Kcoord(groups.bootstrap)
    orders = next(t for t in _topics(admin) if t.startswith("orders"))
    kafka_group, our_group = _twin_groups(groups, "delete-offsets", {0: 5})
    theirs = kafka.run_tool(TOOL, "--bootstrap-server", groups.bootstrap, "--delete-offsets",
                            "--group", kafka_group, "--topic", orders)
    ours = subprocess.run([sys.executable, "-m", "kcoord.broker.cli", "groups", "--bootstrap-server",
                           groups.bootstrap, "--delete-offsets", "--group", our_group,
                           "--topic", orders], capture_output=True, text=True, cwd=REPO,
                          timeout=60)
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
