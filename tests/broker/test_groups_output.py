"""``kcoord groups --output json|csv``: the rows of Kafka's tables (which
tests/reference/test_groups_tool.py compares with Kafka's own tool) as one JSON
array or a CSV with a header, for scripts: the same values, numbers as numbers,
an empty cell where the table shows ``-``, and stdout holding nothing else."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, TopicPartition

from kcoord.broker.testing import Kcoord
from tests.support import REPO, BrokerThread


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A broker with ``orders`` (2 partitions, 5 records on 0) and ``billing``:
    one live member owning both partitions, offset 2 committed on partition 0."""
    node = BrokerThread(tmp_path_factory.mktemp("groups-output")).start()
    admin = Kcoord(node.bootstrap)
    orders = admin.create_topic("orders", partitions=2)
    admin.produce(orders, [b"x"] * 5, partition=0)
    member = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "billing",
                       "client.id": "billing-client", "enable.auto.commit": False,
                       "auto.offset.reset": "earliest"})
    member.subscribe([orders])
    for _ in range(200):  # bounded: the member joins inside poll()
        member.poll(0.05)
        if len(member.assignment()) == 2:
            break
    member.commit(offsets=[TopicPartition(orders, 0, 2)], asynchronous=False)
    yield node, orders, member
    member.close()
    admin.close()
    node.stop()


def _groups(node, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kcoord.broker.cli", "groups",
                           "--bootstrap-server", node.bootstrap, *args], capture_output=True,
                          text=True, cwd=REPO, timeout=60)


def _table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()[1:]]


def test_offsets_as_json_and_csv_are_the_table_s_rows(live):
    node, orders, member = live
    table = _table(_groups(node, "--describe", "--group", "billing").stdout)
    rows = json.loads(_groups(node, "--describe", "--group", "billing", "--output",
                              "json").stdout)
    assert [[str(v) if v is not None else "-" for v in r.values()] for r in rows] == table
    by_partition = {r["partition"]: r for r in rows}
    assert (by_partition[0]["current_offset"], by_partition[0]["log_end_offset"],
            by_partition[0]["lag"]) == (2, 5, 3)
    assert by_partition[1]["current_offset"] is None and by_partition[1]["lag"] is None
    assert {r["client_id"] for r in rows} == {"billing-client"}
    as_csv = list(csv.DictReader(io.StringIO(
        _groups(node, "--describe", "--group", "billing", "--output", "csv").stdout)))
    assert as_csv == [{k: "" if v is None else str(v) for k, v in r.items()} for r in rows]


def test_members_and_state_as_json(live):
    node, orders, member = live
    (row,) = json.loads(_groups(node, "--describe", "--group", "billing", "--members",
                                "--output", "json").stdout)
    assert row["client_id"] == "billing-client" and row["partitions"] == 2
    assert sorted(map(tuple, row["assignment"])) == [(orders, 0), (orders, 1)]
    (state,) = json.loads(_groups(node, "--describe", "--group", "billing", "--state",
                                  "--output", "json").stdout)
    assert (state["state"], state["members"], state["assignment_strategy"]) == \
        ("Stable", 1, "range")
    assert state["coordinator"] == node.bootstrap and state["coordinator_id"] == 1
    (listed,) = [g for g in json.loads(_groups(node, "--list", "--output", "json").stdout)
                 if g["group"] == "billing"]
    assert listed == {"group": "billing", "type": "Classic", "state": "Stable"}


def test_verbose_adds_the_epochs_of_kafka_s_verbose_columns(live):
    """--verbose adds to the rows what it adds to the tables: each offset's leader
    epoch; each member's epochs and target assignment, and the group's epochs, for
    a group of the consumer protocol (null for a classic group, which has none)."""
    node, orders, _member = live
    rows = json.loads(_groups(node, "--describe", "--group", "billing", "--verbose",
                              "--output", "json").stdout)
    table = _table(_groups(node, "--describe", "--group", "billing", "--verbose").stdout)
    assert sorted((r["partition"], r["leader_epoch"]) for r in rows) == \
        sorted((int(t[2]), None if t[3] == "-" else int(t[3])) for t in table)
    assert "leader_epoch" not in json.loads(_groups(
        node, "--describe", "--group", "billing", "--output", "json").stdout)[0]
    (classic,) = json.loads(_groups(node, "--describe", "--group", "billing", "--members",
                                    "--verbose", "--output", "json").stdout)
    assert (classic["current_epoch"], classic["target_epoch"],
            classic["target_assignment"]) == (None, None, None)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "kip848-out",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([orders])
        for _ in range(200):  # bounded: the member is assigned inside poll()
            consumer.poll(0.05)
            if len(consumer.assignment()) == 2:
                break
        consumer.commit(offsets=[TopicPartition(orders, 0, 3, leader_epoch=0)],
                        asynchronous=False)
        offsets = json.loads(_groups(node, "--describe", "--group", "kip848-out",
                                     "--verbose", "--output", "json").stdout)
        (member,) = json.loads(_groups(node, "--describe", "--group", "kip848-out",
                                       "--members", "--verbose", "--output", "json").stdout)
        (state,) = json.loads(_groups(node, "--describe", "--group", "kip848-out", "--state",
                                      "--verbose", "--output", "json").stdout)
        members_csv = list(csv.DictReader(io.StringIO(_groups(
            node, "--describe", "--group", "kip848-out", "--members", "--verbose",
            "--output", "csv").stdout)))
    finally:
        consumer.close()
    assert {r["partition"]: (r["current_offset"], r["leader_epoch"]) for r in offsets} == \
        {0: (3, 0), 1: (None, None)}
    assert sorted(map(tuple, member["target_assignment"])) == [(orders, 0), (orders, 1)]
    assert member["current_epoch"] == member["target_epoch"] == state["group_epoch"] \
        == state["target_assignment_epoch"] and state["group_epoch"] > 0
    assert members_csv[0]["target_assignment"] == f"{orders}:0,1"
    assert members_csv[0]["current_epoch"] == str(member["current_epoch"])


def test_a_reset_plan_as_json_and_notes_on_stderr(live, tmp_path):
    node, orders, _member = live
    with Kcoord(node.bootstrap) as k:
        group = k.group("idle")
        k.call(8, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                      "group_instance_id": None, "topics": [{"name": orders, "partitions": [
                          {"partition_index": 0, "committed_offset": 1,
                           "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        run = _groups(node, "--reset-offsets", "--group", group, "--all-topics", "--to-latest",
                      "--execute", "--output", "json")
        assert json.loads(run.stdout) == [{"group": group, "topic": orders, "partition": 0,
                                           "new_offset": 5}]
        assert k.committed(group) == {(orders, 0): 5}
    # A group that does not exist: an empty array on stdout, why on stderr.
    missing = _groups(node, "--describe", "--group", "no-such-group", "--output", "json")
    assert json.loads(missing.stdout) == [] and "no-such-group" in missing.stderr
    # A live group is not reset: the refusal on stderr, no rows.
    refused = _groups(node, "--reset-offsets", "--group", "billing", "--all-topics",
                      "--to-earliest", "--output", "csv")
    assert refused.stdout == "group,topic,partition,new_offset\n"
    assert "can only be reset if the group 'billing' is inactive" in refused.stderr


def test_stdout_holds_json_even_when_the_tool_fails(live, tmp_path):
    node, _orders, _member = live
    unreachable = subprocess.run([sys.executable, "-m", "kcoord.broker.cli", "groups",
                                  "--bootstrap-server", "127.0.0.1:1", "--list", "--output",
                                  "json", "--timeout", "300"],
                                 capture_output=True, text=True, cwd=REPO, timeout=60)
    assert (unreachable.returncode, json.loads(unreachable.stdout)) == (0, [])
    assert "Timed out waiting for a node assignment" in unreachable.stderr
    assert "Connection refused" in unreachable.stderr
    no_plan = _groups(node, "--reset-offsets", "--group", "billing-idle", "--from-file",
                      str(tmp_path / "missing.csv"), "--dry-run", "--output", "csv")
    assert no_plan.stdout == "group,topic,partition,new_offset\n"
    assert "Unable to read file" in no_plan.stderr


@pytest.mark.parametrize("args", [
    ("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--export"),
    ("--delete", "--group", "g"),
], ids=["export", "delete"])
def test_output_with_what_it_cannot_shape_is_misuse(live, args):
    node, _orders, _member = live
    run = _groups(node, *args, "--output", "json")
    assert run.returncode == 1 and run.stdout == "" and "--output json" in run.stderr


def test_list_is_sorted(live):
    node, orders, _member = live
    with Kcoord(node.bootstrap) as k:
        for name in ("zz-last", "aa-first"):
            k.call(8, 8, {"group_id": name, "generation_id_or_member_epoch": -1, "member_id": "",
                          "group_instance_id": None, "topics": [{"name": orders, "partitions": [
                              {"partition_index": 0, "committed_offset": 1,
                               "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    listed = _groups(node, "--list").stdout.split()
    assert listed == sorted(listed) and {"zz-last", "aa-first"} <= set(listed)
    rows = _groups(node, "--list", "--state").stdout.splitlines()[1:]
    assert rows == sorted(rows)
