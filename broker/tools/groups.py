"""``kcoord groups``: consumer groups as Kafka's ``kafka-consumer-groups.sh`` shows
them (``ConsumerGroupCommand``): the same flags, the same tables and messages.

It is a client (the project's wire client), so it works against Apache Kafka
too.  Where Kafka's tool prints rows in hash order, this one sorts them (by
member, then topic and partition).

    kcoord groups --bootstrap-server 127.0.0.1:9092 --list [--state [STATES]]
    kcoord groups --bootstrap-server ... --describe (--group G ... | --all-groups)
        [--offsets | --members [--verbose] | --state]
    kcoord groups --bootstrap-server ... --delete (--group G ... | --all-groups)
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from protocol.client import WireClient
from protocol.errors import ErrorCode
from protocol.group_records import consumer_assignment

MISSING = "-"
ACTIONS = ("list", "describe", "delete")
_STATES = {"preparingrebalance": "PreparingRebalance", "completingrebalance":
           "CompletingRebalance", "stable": "Stable", "dead": "Dead", "empty": "Empty",
           "assigning": "Assigning", "reconciling": "Reconciling"}


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "groups", help="list, describe and delete consumer groups (as kafka-consumer-groups.sh)",
        description="Consumer groups as Kafka's kafka-consumer-groups.sh shows them; a "
                    "client, so it works against any Kafka broker.",
        epilog="examples:\n"
               "  kcoord groups --bootstrap-server 127.0.0.1:9092 --list\n"
               "  kcoord groups --bootstrap-server 127.0.0.1:9092 --describe --group billing\n"
               "  kcoord groups --bootstrap-server 127.0.0.1:9092 --describe --all-groups "
               "--members --verbose\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="the broker to connect to")
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true",
                            help={"list": "list the consumer groups",
                                  "describe": "describe groups: offsets and lag (default), "
                                              "--members or --state",
                                  "delete": "delete groups (they must have no members)"}[action])
    parser.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every consumer group")
    parser.add_argument("--offsets", action="store_true",
                        help="with --describe: committed offsets, log end offsets and lag")
    parser.add_argument("--members", action="store_true", help="with --describe: the members")
    parser.add_argument("--verbose", action="store_true",
                        help="with --describe --members: each member's partitions")
    parser.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                        help="with --list: show states, only these if given (comma-separated); "
                             "with --describe: the group's state")
    parser.add_argument("--timeout", type=int, default=5000, metavar="MS",
                        help="how long to wait for an answer (default 5000)")


def run(args, out=sys.stdout, err=sys.stderr) -> int:
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        print("Command must include exactly one action: --list, --describe, --delete",
              file=err)
        return 1
    if actions[0] != "list" and not args.group and not args.all_groups:
        print(f"Option [{actions[0]}] takes one of these options: [all-groups], [group]",
              file=err)
        return 1
    host, _, port = args.bootstrap_server.rpartition(":")
    try:
        client = WireClient(host.strip("[]"), int(port), timeout=args.timeout / 1000,
                            client_id="kcoord-groups")
    except (OSError, ValueError) as exc:
        print(f"\nError: Executing consumer group command failed due to {exc}", file=out)
        return 1
    with client:
        tool = _Groups(client, out, err)
        if actions[0] == "list":
            return tool.list(args.state)
        groups = tool.consumer_group_ids() if args.all_groups else args.group
        if actions[0] == "delete":
            return tool.delete(groups)
        if args.members:
            return tool.describe_members(groups, args.verbose)
        if args.state is not None and not args.offsets:
            return tool.describe_state(groups)
        return tool.describe_offsets(groups)


@dataclass
class _Row:
    group: str
    topic: str = MISSING
    partition: str = MISSING
    offset: str = MISSING
    log_end: str = MISSING
    lag: str = MISSING
    consumer_id: str = MISSING
    host: str = MISSING
    client_id: str = MISSING


class _Groups:
    def __init__(self, client: WireClient, out, err):
        self.client = client
        self.out = out
        self.err = err

    def _print(self, text: str = "", *, end: str = "\n", to=None) -> None:
        print(text, end=end, file=to or self.out)

    # -- listing -------------------------------------------------------------------------

    def _listed(self, states=()) -> list[dict]:
        answer = self.client.call(16, 5, {"states_filter": list(states),
                                          "types_filter": []})
        if answer["error_code"] != ErrorCode.NONE:
            raise RuntimeError(ErrorCode(answer["error_code"]).name)
        # Consumer groups: those of the consumer protocol, and empty ones.
        return [g for g in answer["groups"] if g["protocol_type"] in ("consumer", "")]

    def consumer_group_ids(self) -> list[str]:
        return [g["group_id"] for g in self._listed()]

    def list(self, state_filter: str | None) -> int:
        if state_filter is None:
            for group in self._listed():
                self._print(group["group_id"])
            return 0
        wanted = [s.strip() for s in state_filter.split(",") if s.strip()]
        unknown = [s for s in wanted if s.lower() not in _STATES]
        if unknown:
            self._print(f"\nError: Executing consumer group command failed due to "
                        f"Invalid state list '{state_filter}'. Valid states are: "
                        f"{', '.join(_STATES.values())}")
            return 1
        groups = self._listed(_STATES[s.lower()] for s in wanted)
        width = max([15] + [len(g["group_id"]) for g in groups]) + 10
        self._print(f"{'GROUP':<{width}} {'STATE':<20}")
        for g in groups:
            self._print(f"{g['group_id']:<{width}} {g['group_state']:<20}")
        return 0

    # -- describing ------------------------------------------------------------------------

    def _describe(self, groups) -> dict[str, dict]:
        answer = self.client.call(15, 5, {"groups": list(groups),
                                          "include_authorized_operations": False})
        return {g["group_id"]: g for g in answer["groups"]}

    def _print_state_note(self, group: str, described: dict, rows: int | None) -> bool:
        """Kafka's ``shouldPrintMemberState``: a line on the group's state where it
        matters; whether there is a table to print."""
        if described["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND or rows is None:
            self._print(f"\nError: The consumer group '{group}' does not exist.")
            return False
        state = described["group_state"]
        if state == "Dead":
            self._print(f"\nError: Consumer group '{group}' does not exist.")
        elif state == "Empty":
            self._print(f"\nConsumer group '{group}' has no active members.", to=self.err)
        elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning",
                       "Reconciling"):
            self._print(f"\nWarning: Consumer group '{group}' is rebalancing.", to=self.err)
        return state != "Dead" and rows > 0

    def _checked(self, groups) -> dict[str, dict] | None:
        described = self._describe(groups)
        for group, found in described.items():
            code = found["error_code"]
            if code not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
                self._print(f"\nError: Executing consumer group command failed due to "
                            f"{ErrorCode(code).name}")
                return None
            if found["protocol_type"] not in ("consumer", ""):
                self._print(f"\nError: Executing consumer group command failed due to "
                            f"Group {group} is not a consumer group.")
                return None
        return described

    @staticmethod
    def _partitions(member: dict) -> list[tuple[str, int]]:
        raw = member["member_assignment"]
        if not raw:
            return []
        return sorted((t["topic"], p) for t in consumer_assignment(raw)["assigned_partitions"]
                      for p in t["partitions"])

    def _committed(self, group: str) -> dict[tuple[str, int], int]:
        answer = self.client.call(9, 8, {"require_stable": False, "groups": [
            {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}]})
        fetched = answer["groups"][0]
        return {(t["name"], p["partition_index"]): p["committed_offset"]
                for t in fetched["topics"] for p in t["partitions"]
                if p["error_code"] == ErrorCode.NONE}

    def _log_ends(self, partitions) -> dict[tuple[str, int], int]:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(set(partitions)):
            by_topic.setdefault(topic, []).append(p)
        if not by_topic:
            return {}
        answer = self.client.call(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                        "timestamp": -1} for p in ps]}
            for t, ps in by_topic.items()]})
        return {(t["name"], p["partition_index"]): p["offset"]
                for t in answer["topics"] for p in t["partitions"]
                if p["error_code"] == ErrorCode.NONE}

    def describe_offsets(self, groups) -> int:
        described = self._checked(groups)
        if described is None:
            return 1
        for group in sorted(described):
            found = described[group]
            rows = self._offset_rows(group, found) if found["error_code"] == 0 else None
            if not self._print_state_note(group, found, None if rows is None else len(rows)):
                continue
            widths = [max([15] + [len(getattr(r, f)) for r in rows])
                      for f in ("group", "topic", "consumer_id", "host")]
            line = (f"{{:<{widths[0]}}} {{:<{widths[1]}}} {{:<10}} {{:<15}} {{:<15}} {{:<15}} "
                    f"{{:<{widths[2]}}} {{:<{widths[3]}}} {{}}")
            self._print()
            self._print(line.format("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                    "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                                    "CLIENT-ID"), end="")
            for r in rows:
                self._print()
                self._print(line.format(r.group, r.topic, r.partition, r.offset, r.log_end,
                                        r.lag, r.consumer_id, r.host, r.client_id), end="")
            self._print()
        return 0

    def _offset_rows(self, group: str, found: dict) -> list[_Row]:
        committed = self._committed(group)
        members = [(m, self._partitions(m)) for m in found["members"]]
        members = sorted((m for m in members if m[1]), key=lambda m: -len(m[1]))
        assigned = {tp for _m, owned in members for tp in owned}
        unassigned = sorted(tp for tp in committed if tp not in assigned)
        ends = self._log_ends(list(assigned) + unassigned)

        def row(tp, consumer_id, host, client_id) -> _Row:
            offset = committed.get(tp)
            end = ends.get(tp)
            lag = end - offset if offset is not None and offset != -1 and end is not None \
                else None
            return _Row(group, tp[0], str(tp[1]), _shown(offset), _shown(end), _shown(lag),
                        consumer_id, host, client_id)

        rows = [row(tp, m["member_id"], m["client_host"], m["client_id"])
                for m, owned in members for tp in owned]
        rows += [row(tp, MISSING, MISSING, MISSING) for tp in unassigned]
        return rows

    def describe_members(self, groups, verbose: bool) -> int:
        described = self._checked(groups)
        if described is None:
            return 1
        for group in sorted(described):
            found = described[group]
            members = found["members"] if found["error_code"] == 0 else None
            printable = self._print_state_note(
                group, found, None if members is None else len(members))
            members = members if printable else []
            instance = any(m["group_instance_id"] for m in members)
            w = {"group": max([15] + [len(group) for _ in members]),
                 "id": max([15] + [len(m["member_id"]) for m in members]),
                 "instance": max([17] + [len(m["group_instance_id"] or "") for m in members]),
                 "host": max([15] + [len(m["client_host"]) for m in members]),
                 "client": max([15] + [len(m["client_id"]) for m in members])}
            if instance:
                line = (f"{{:<{w['group']}}} {{:<{w['id']}}} {{:<{w['instance']}}} "
                        f"{{:<{w['host']}}} {{:<{w['client']}}} {{:<15}} ")
                header = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                          "#PARTITIONS")
            else:
                line = (f"{{:<{w['group']}}} {{:<{w['id']}}} {{:<{w['host']}}} "
                        f"{{:<{w['client']}}} {{:<15}} ")
                header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
            # Kafka 4's verbose columns: a classic group has no epochs and no target.
            current = [_assignment_text(self._partitions(m)) for m in members]
            more = f"{{:<15}} {{:<{max([20] + [len(c) for c in current])}}} {{:<15}} {{:<20}}"
            self._print()
            self._print(line.format(*header) + (more.format(
                "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT")
                if verbose else ""))
            for m, assigned in zip(members, current):
                fields = [group, m["member_id"]] + \
                    ([m["group_instance_id"] or ""] if instance else []) + \
                    [m["client_host"], m["client_id"], str(len(self._partitions(m)))]
                text = line.format(*fields)
                if verbose:
                    text += more.format(MISSING, assigned, MISSING, MISSING)
                self._print(text)
        return 0

    def describe_state(self, groups) -> int:
        described = self._checked(groups)
        if described is None:
            return 1
        coordinator = self._coordinator_text(groups)
        for group in sorted(described):
            found = described[group]
            if not self._print_state_note(group, found, 1 if found["error_code"] == 0 else None):
                continue
            where = coordinator.get(group, MISSING)
            line = f"{{:<{max(15, len(group))}}} {{:<{max(25, len(where))}}} {{:<20}} {{:<20}} {{}}"
            self._print()
            self._print(line.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                                    "#MEMBERS"), end="")
            self._print()
            self._print(line.format(group, where, found["protocol_data"] or MISSING,
                                    found["group_state"], len(found["members"])), end="")
            self._print()
        return 0

    def _coordinator_text(self, groups) -> dict[str, str]:
        answer = self.client.call(10, 4, {"key_type": 0, "coordinator_keys": list(groups)})
        return {c["key"]: f"{c['host']}:{c['port']}  ({c['node_id']})"
                for c in answer["coordinators"] if c["error_code"] == ErrorCode.NONE}

    # -- deleting --------------------------------------------------------------------------

    def delete(self, groups) -> int:
        answer = self.client.call(42, 2, {"groups_names": list(groups)})
        failed = {r["group_id"]: ErrorCode(r["error_code"]) for r in answer["results"]
                  if r["error_code"] != ErrorCode.NONE}
        done = [r["group_id"] for r in answer["results"] if r["group_id"] not in failed]
        if not failed:
            self._print("Deletion of requested consumer groups ('" + "', '".join(done)
                        + "') was successful.")
            return 0
        self._print("\nError: Deletion of some consumer groups failed:")
        for group, code in failed.items():
            self._print(f"* Group '{group}' could not be deleted due to: "
                        f"{_exception_text(code)}")
        if done:
            self._print("\nThese consumer groups were deleted successfully: '"
                        + "', '".join(done) + "'")
        return 0


def _shown(value) -> str:
    return MISSING if value is None else str(value)


def _assignment_text(owned: list[tuple[str, int]]) -> str:
    """``orders:0;payments:0,1`` as Kafka 4's tool writes an assignment."""
    if not owned:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for topic, p in owned:
        by_topic.setdefault(topic, []).append(p)
    return ";".join(sorted(f"{topic}:" + ",".join(str(p) for p in sorted(ps))
                           for topic, ps in by_topic.items()))


_EXCEPTIONS = {
    ErrorCode.NON_EMPTY_GROUP: "org.apache.kafka.common.errors.GroupNotEmptyException: "
                               "The group is not empty.",
    ErrorCode.GROUP_ID_NOT_FOUND: "org.apache.kafka.common.errors.GroupIdNotFoundException: "
                                  "The group id does not exist.",
}


def _exception_text(code: ErrorCode) -> str:
    return _EXCEPTIONS.get(code, code.name)
