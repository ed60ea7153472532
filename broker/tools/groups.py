"""``kcoord groups``: consumer groups as Kafka's ``kafka-consumer-groups.sh`` shows
them (``ConsumerGroupCommand``): the same flags, the same tables and messages.

It is a client (the project's wire client), so it works against Apache Kafka
too.  Where Kafka's tool prints rows in hash order, this one sorts them (by
member, then topic and partition).

    kcoord groups --bootstrap-server 127.0.0.1:9092 --list [--state [STATES]]
    kcoord groups --bootstrap-server ... --describe (--group G ... | --all-groups)
        [--offsets | --members [--verbose] | --state]
    kcoord groups --bootstrap-server ... --delete (--group G ... | --all-groups)
    kcoord groups --validate-regex REGEX

Options that do not go together are refused as Kafka's tool refuses them (its
``checkArgs``): the same words on stderr, exit status 1, nothing asked of a broker.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import re
import sys
from dataclasses import dataclass

from kcoord.broker.config import java_integer
from kcoord.broker.tools.connect import ConnectError, connect
from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.group_records import consumer_assignment

MISSING = "-"
OUTPUTS = ("table", "json", "csv")
# The fields of each kind of row --output json/csv gives, in their CSV order.
FIELDS = {
    "list": ("group", "type", "state"),
    "offsets": ("group", "topic", "partition", "current_offset", "log_end_offset", "lag",
                "consumer_id", "host", "client_id"),
    "members": ("group", "consumer_id", "group_instance_id", "host", "client_id", "partitions",
                "assignment"),
    "state": ("group", "coordinator", "coordinator_id", "assignment_strategy", "state",
              "members"),
    "reset": ("group", "topic", "partition", "new_offset"),
}
# What --verbose adds to them, as it adds columns to Kafka's tables (null where a
# classic group has none).
VERBOSE_FIELDS = {
    "offsets": ("leader_epoch",),
    "members": ("current_epoch", "target_epoch", "target_assignment"),
    "state": ("group_epoch", "target_assignment_epoch"),
}
ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
# The reset scenarios, in the order Kafka's checkArgs checks each against the others.
SCENARIOS = ("to-offset", "to-datetime", "by-duration", "to-earliest", "to-latest",
             "to-current", "shift-by", "from-file")
_STATES = {"preparingrebalance": "PreparingRebalance", "completingrebalance":
           "CompletingRebalance", "stable": "Stable", "dead": "Dead", "empty": "Empty",
           "assigning": "Assigning", "reconciling": "Reconciling"}
_TYPES = {"consumer": "Consumer", "classic": "Classic"}
class Failed(ValueError):
    """An error Kafka's tool reports through its catch-all: "Executing consumer
    group command failed due to ..." on stdout, and exit status 0."""


class Usage(ValueError):
    """An error Kafka's tool reports as misuse: the message on stderr, exit status 1."""


def _failed(code: int) -> Failed:
    return Failed(_MESSAGES.get(code, ErrorCode(code).name))


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
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False,
        allow_abbrev=False)  # Kafka's tool takes no abbreviated option
    parser.add_argument("-h", "--help", action=KafkaHelp)
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help="the broker to connect to (required but with --validate-regex)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="a Java client's properties: security.protocol, ssl.truststore.*, "
                             "ssl.keystore.*, sasl.mechanism and sasl.jaas.config (PEM stores; "
                             "PLAIN or SCRAM), as Kafka's tools take them")
    parser.error = functools.partial(parse_error, parser)
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true",
                            help={"list": "list the consumer groups",
                                  "describe": "describe groups: offsets and lag (default), "
                                              "--members or --state",
                                  "delete": "delete groups (they must have no members)",
                                  "reset-offsets": "reset a group's offsets (a dry run unless "
                                                   "--execute); the group must have no members",
                                  "delete-offsets": "delete a group's offsets of --topic"
                                  }[action])
    parser.add_argument("--validate-regex", metavar="REGEX",
                        help="say whether a regular expression is valid RE2 (the syntax of a "
                             "consumer's subscription pattern); needs no broker")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                        help="with --reset-offsets or --delete-offsets: a topic, or some of "
                             "its partitions (repeatable)")
    parser.add_argument("--all-topics", action="store_true",
                        help="with --reset-offsets: every partition the group has an offset of")
    # The reset scenarios: one at most, checked as Kafka's tool checks it (check_args).
    parser.add_argument("--to-earliest", action="store_true", help="to the log start")
    parser.add_argument("--to-latest", action="store_true", help="to the log end")
    parser.add_argument("--to-current", action="store_true",
                        help="to the committed offset (the log end where none)")
    # Numbers are read when used, as Kafka's tool reads them (a bad one: its catch-all).
    parser.add_argument("--to-offset", metavar="OFFSET", help="to this offset")
    parser.add_argument("--shift-by", metavar="N",
                        help="by N from the committed offset (negative: back)")
    parser.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                        help="to the first offset at or after this time (a zone such as Z "
                             "or +01:00 may follow; UTC otherwise, as in Kafka's tool)")
    parser.add_argument("--by-duration", metavar="PnDTnHnMnS",
                        help="to the first offset at or after now less this ISO-8601 duration")
    parser.add_argument("--from-file", metavar="PATH",
                        help="to the offsets in a CSV file, as --export writes it: "
                             "topic,partition,offset (one group) or group,topic,partition,offset")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --reset-offsets: only show the new offsets (the default)")
    parser.add_argument("--execute", action="store_true",
                        help="with --reset-offsets: commit the new offsets")
    parser.add_argument("--export", action="store_true",
                        help="with --reset-offsets: print the new offsets as CSV")
    parser.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every consumer group")
    parser.add_argument("--offsets", action="store_true",
                        help="with --describe: committed offsets, log end offsets and lag")
    parser.add_argument("--members", action="store_true", help="with --describe: the members")
    parser.add_argument("--verbose", action="store_true",
                        help="with --describe: each offset's leader epoch; with --members, "
                             "each member's epochs and partitions; with --state, the group's "
                             "epochs")
    parser.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                        help="with --list: show states, only these if given (comma-separated); "
                             "with --describe: the group's state")
    parser.add_argument("--type", nargs="?", const="", default=None, metavar="TYPES",
                        help="with --list: show each group's type (Consumer, Classic), only "
                             "these if given (comma-separated)")
    parser.add_argument("--output", choices=OUTPUTS, default="table",
                        help="with --list, --describe or --reset-offsets: Kafka's table "
                             "(default), or one JSON array or CSV of the rows, for scripts; "
                             "notes and errors then go to stderr")
    parser.add_argument("--timeout", default=30000, metavar="MS",
                        help="how long to wait for an answer (default 30000, as Kafka's)")


class KafkaHelp(argparse.Action):
    """``--help`` as Kafka's tools answer it: the options on stderr, exit status 1."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show these options (on stderr, exit status 1, as Kafka's tools)"):
        super().__init__(option_strings, dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.print_help(sys.stderr)
        parser.exit(1)


def parse_error(parser: argparse.ArgumentParser, message: str) -> None:
    """argparse's complaint in the words of Kafka's tools (joptsimple's), reported
    as misuse (message, usage, exit status 1). Words that are no
    option are left alone, as Kafka's tool leaves them: then nothing is reported."""
    if message.startswith("unrecognized arguments: "):
        options = [w for w in message.split(": ", 1)[1].split(" ")
                   if w.startswith("-") and w != "-"]
        if not options:
            return
        message = f"{options[0].lstrip('-').split('=', 1)[0]} is not a recognized option"
    else:
        missing = re.fullmatch(r"argument --([\w-]+): expected one argument", message)
        if missing:
            message = f"Option {missing.group(1)} requires an argument"
    _misuse(parser, message)


def _misuse(parser: argparse.ArgumentParser, message: str) -> None:
    """Options that do not go together, or a missing one: the message first, then
    the usage, and exit status 1, as Kafka's tools give them (argparse's own puts
    the usage first and exits with 2)."""
    print(message, file=sys.stderr)
    parser.print_usage(sys.stderr)
    parser.exit(1)


def run(args, out=sys.stdout, err=sys.stderr) -> int:
    try:
        check_args(args, err)
    except Usage as exc:
        print(exc, file=err)
        return 1
    chosen = [a for a in ACTIONS if getattr(args, a.replace("-", "_"))]
    if args.validate_regex is not None:
        chosen.append("validate-regex")
    if len(chosen) != 1:
        print("Command must include exactly one action: --list, --describe, --delete, "
              "--reset-offsets, --delete-offsets, --validate-regex", file=err)
        return 1
    if chosen == ["validate-regex"]:
        return validate_regex(args.validate_regex, out)
    actions = chosen
    output = getattr(args, "output", "table")
    kind = _kind(actions[0], args)
    if output != "table" and kind is None:
        print(f"--output {output} goes with --list, --describe and --reset-offsets", file=err)
        return 1
    if output != "table" and getattr(args, "export", False):
        print(f"--export and --output {output} do not go together: --export writes the "
              "CSV that --from-file reads", file=err)
        return 1
    try:
        if actions[0] == "list":
            list_filters(args.state, args.type)
    except Usage as exc:
        print(exc, file=err)
        return 1
    try:
        # The numbers are read before any broker is asked, as by Kafka's tool.
        for option in ("to-offset", "shift-by"):
            if _given(args, option):
                _long(getattr(args, option.replace("-", "_")), option)
        client = connect(args.bootstrap_server, _long(args.timeout, "timeout") / 1000,
                         "kcoord-groups", args.command_config)
    except (OSError, ValueError, ConnectError) as exc:  # Kafka's catch-all: exit status 0
        print(f"\nError: Executing consumer group command failed due to {exc}",
              file=out if output == "table" else err)
        _Groups(None, out, err, output, kind, args.verbose).flush()
        return 0
    with client:
        tool = _Groups(client, out, err, output, kind, args.verbose)
        try:
            return _act(tool, actions[0], args, err)
        except Usage as exc:  # Kafka's printUsageAndExit
            print(exc, file=err)
            return 1
        except Failed as exc:  # Kafka's catch-all
            tool._print(f"\nError: Executing consumer group command failed due to {exc}")
            return 0
        finally:
            tool.flush()  # with --output json/csv, the rows (or none) whatever happened


def list_filters(state_filter: str | None, type_filter: str | None
                 ) -> tuple[list[str], list[str]]:
    """The states and types ``--list`` keeps, checked as Kafka's tool checks them
    before it asks a broker (types first): Usage for one it does not know."""
    types = [t.strip() for t in (type_filter or "").split(",") if t.strip()]
    if any(t.lower() not in _TYPES for t in types):
        raise Usage(f"Invalid types list '{type_filter}'. Valid types are: "
                    f"{', '.join(_TYPES.values())}")
    states = [s.strip() for s in (state_filter or "").split(",") if s.strip()]
    if any(s.lower() not in _STATES for s in states):
        raise Usage(f"Invalid state list '{state_filter}'. Valid states are: "
                    f"{', '.join(_STATES.values())}")
    return states, types


def _long(value, option: str) -> int:
    """A number option's value as joptsimple reads a Java long; Failed (Kafka's
    catch-all) with its words otherwise."""
    text = str(value)
    number = java_integer(text, 63)
    if number is None:
        raise Failed(f"Cannot parse argument '{text}' of option {option}")
    return number


def _given(args, name: str) -> bool:
    """Whether the command line holds option ``--name``."""
    value = getattr(args, name.replace("-", "_"), None)
    return value is not None and value is not False and value != []


def check_args(args, err) -> None:
    """Kafka's ConsumerGroupCommandOptions: the options each one goes with, checked
    in the order Kafka checks them (Usage says what is wrong, in its words).
    Where Kafka names the options of a hash set (in an order that changes from
    run to run), the order here is fixed.  Without --execute or --dry-run,
    --reset-offsets warns on ``err`` as Kafka's does, before its other checks."""
    # Kafka's parser (joptsimple's availableIf) first: these only with these actions.
    needs = {"members": ("describe",), "offsets": ("describe",), "verbose": ("describe",),
             "state": ("describe", "list"), "type": ("list",)}
    unavailable = sorted(o for o, actions in needs.items()
                         if _given(args, o) and not any(_given(args, a) for a in actions))
    if unavailable:
        raise Usage('Exception in thread "main" joptsimple.UnavailableOptionException: '
                    f"Option(s) [{', '.join(unavailable)}] are unavailable given other "
                    "options on the command line")
    if args.bootstrap_server is None and args.validate_regex is None:
        raise Usage('Missing required argument "[bootstrap-server]"')
    groups = _given(args, "group") or _given(args, "all-groups")
    if args.describe:
        if not groups:
            raise Usage("Option [describe] takes one of these options: [all-groups], [group]")
        if sum(_given(args, o) for o in ("members", "offsets", "state")) > 1:
            raise Usage("Option [describe] takes at most one of these options: [members], "
                        "[offsets], [state]")
        if args.state:  # a value given (--state alone is "")
            raise Usage("Option [describe] does not take a value for [state]")
    if args.delete:
        if not groups:
            raise Usage("Option [delete] takes one of these options: [all-groups], [group]")
        if args.topic:
            raise Usage("The consumer does not support topic-specific offset deletion from a "
                        "consumer group.")
    if args.delete_offsets and not (args.group and args.topic):
        raise Usage("Option [delete-offsets] takes the following options: [topic], [group]")
    if args.reset_offsets:
        if args.dry_run and args.execute:
            raise Usage("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not args.dry_run and not args.execute:
            print("WARN: No action will be performed as the --execute option is missing. In "
                  "version 5.0, this command will require either --dry-run or --execute to "
                  "be specified. You should add the --dry-run option explicitly if you are "
                  "scripting this command and want to keep the current default behavior "
                  "without prompting.", file=err)
        if not groups:
            raise Usage("Option [reset-offsets] takes one of these options: [all-groups], "
                        "[group]")
        for used in SCENARIOS:
            other = next((o for o in SCENARIOS if o != used and _given(args, o)), None)
            if _given(args, used) and other:
                raise Usage(f'Option "[{used}]" can\'t be used with option "[{other}]"')
    invalid = [("group", "all-groups"), ("group", "list"), ("topic", "list"),
               ("topic", "describe")]
    for used, other in invalid:
        if _given(args, used) and _given(args, other):
            raise Usage(f'Option "[{used}]" can\'t be used with option "[{other}]"')


def validate_regex(regex: str, out) -> int:
    """--validate-regex: whether RE2 (RE2/J's syntax, which Kafka checks a
    subscription's pattern with) takes ``regex``; RE2/J's words where not."""
    from kcoord.broker.groups.subscriptions import InvalidRegex, check_regex
    try:
        check_regex(regex)
    except InvalidRegex as exc:
        why = str(exc)[len(f"SubscribedTopicRegex `{regex}` is not a valid regular "
                           "expression: "):].removesuffix(".")
        print(f"The regular expression `{regex}` is invalid: {why}.", file=out)
        return 0
    print(f"The regular expression `{regex}` is valid.", file=out)
    return 0


def _kind(action: str, args) -> str | None:
    """The kind of rows an action gives --output json/csv (FIELDS), or None."""
    if action == "list":
        return "list"
    if action == "reset-offsets":
        return "reset"
    if action == "describe":
        if args.members:
            return "members"
        return "state" if args.state is not None and not args.offsets else "offsets"
    return None


def _act(tool: "_Groups", action: str, args, err) -> int:
    if action == "list":
        return tool.list(args.state, args.type)
    groups = tool.consumer_group_ids() if args.all_groups else args.group
    if action == "delete":
        return tool.delete(groups)
    if action == "reset-offsets":
        return _reset(tool, groups, args, err)
    if action == "delete-offsets":
        if len(args.group) > 1:  # Kafka's tool takes one (joptsimple's valueOf)
            raise Failed("Found multiple arguments for option group, but you asked for only one")
        return tool.delete_offsets(args.group[0], args.topic)
    if args.members:
        return tool.describe_members(groups, args.verbose)
    if args.state is not None and not args.offsets:
        return tool.describe_state(groups, args.verbose)
    return tool.describe_offsets(groups, args.verbose)


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
    epoch: str = MISSING  # the committed offset's leader epoch


class _Groups:
    def __init__(self, client: WireClient | None, out, err, output: str = "table",
                 kind: str | None = None, verbose: bool = False):
        self.client = client
        self.out = out
        self.err = err
        self.output = output
        self.kind = kind  # the kind of rows --output json/csv gives (FIELDS)
        self.verbose = verbose
        self.rows: list[dict] = []

    @property
    def structured(self) -> bool:
        return self.output != "table"

    def _print(self, text: str = "", *, end: str = "\n", to=None) -> None:
        """Text for people: on stdout with Kafka's tables, on stderr when stdout
        carries JSON or CSV."""
        print(text, end=end, file=to or (self.err if self.structured else self.out))

    def emit(self, kind: str, **row) -> None:
        """One row of --output json/csv."""
        self.rows.append({name: row.get(name) for name in self._fields(kind)})

    def _fields(self, kind: str) -> tuple[str, ...]:
        return FIELDS[kind] + (VERBOSE_FIELDS.get(kind, ()) if self.verbose else ())

    def flush(self) -> None:
        """The rows emitted, as one JSON array or CSV with a header line."""
        if not self.structured or self.kind is None:
            return
        if self.output == "json":
            json.dump(self.rows, self.out, indent=2)
            self.out.write("\n")
            return
        writer = csv.writer(self.out, lineterminator="\n")
        writer.writerow(self._fields(self.kind))
        for row in self.rows:
            writer.writerow(["" if v is None or v == [] else _assignment_text(v)
                             if isinstance(v, list) else v for v in row.values()])

    # -- listing -------------------------------------------------------------------------

    def _listed(self, states=(), types=()) -> list[dict]:
        answer = self.client.call(16, 5, {"states_filter": list(states),
                                          "types_filter": list(types)})
        if answer["error_code"] != ErrorCode.NONE:
            raise RuntimeError(ErrorCode(answer["error_code"]).name)
        # Consumer groups: those of the consumer protocol, and empty ones.
        return [g for g in answer["groups"] if g["protocol_type"] in ("consumer", "")]

    def consumer_group_ids(self) -> list[str]:
        return [g["group_id"] for g in self._listed()]

    def list(self, state_filter: str | None, type_filter: str | None = None) -> int:
        if state_filter is None and type_filter is None:
            for group in sorted(self._listed(), key=lambda g: g["group_id"]):
                if self.structured:
                    self.emit("list", group=group["group_id"],
                              type=_TYPES.get(group["group_type"], group["group_type"]),
                              state=group["group_state"])
                else:
                    self._print(group["group_id"])
            return 0
        wanted, types = list_filters(state_filter, type_filter)
        groups = sorted(self._listed([_STATES[s.lower()] for s in wanted],
                                     [t.lower() for t in types]), key=lambda g: g["group_id"])
        width = max([15] + [len(g["group_id"]) for g in groups]) + 10

        def row(group: str, kind: str, state: str) -> str:
            return f"{group:<{width}}" + \
                (f" {kind:<20}" if type_filter is not None else "") + \
                (f" {state:<20}" if state_filter is not None else "")

        if self.structured:
            for g in groups:
                self.emit("list", group=g["group_id"],
                          type=_TYPES.get(g["group_type"], g["group_type"]),
                          state=g["group_state"])
            return 0
        self._print(row("GROUP", "TYPE", "STATE"))
        for g in groups:
            self._print(row(g["group_id"], _TYPES.get(g["group_type"], g["group_type"]),
                            g["group_state"]))
        return 0

    # -- describing ------------------------------------------------------------------------

    def _describe(self, groups) -> dict[str, dict]:
        """Each group as Kafka's admin client describes it: ConsumerGroupDescribe
        first where the broker serves it, DescribeGroups for the groups it says
        are not consumer-protocol groups (DescribeConsumerGroupsHandler)."""
        described: dict[str, dict] = {}
        classic = list(groups)
        if self._serves(69):
            answer = self.client.call(69, 1, {"group_ids": list(groups),
                                              "include_authorized_operations": False})
            classic = []
            for g in answer["groups"]:
                if g["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
                    classic.append(g["group_id"])
                else:
                    described[g["group_id"]] = _from_consumer_describe(g)
        if classic:
            # From v6 (Kafka 4.x) a group that does not exist is GROUP_ID_NOT_FOUND with
            # a message, its state still Dead, where v5 answered it without an error.
            version = min(6, self._newest(15))
            answer = self.client.call(15, version, {"groups": classic,
                                                    "include_authorized_operations": False})
            for g in answer["groups"]:
                described[g["group_id"]] = _from_describe_groups(g)
        return described

    def _serves(self, api_key: int) -> bool:
        return self._newest(api_key) is not None

    def _newest(self, api_key: int) -> int | None:
        """The broker's newest version of an API, None where it does not serve it."""
        if not hasattr(self, "_api_keys"):
            answer = self.client.call(18, 3, {"client_software_name": "kcoord-groups",
                                              "client_software_version": "1"})
            self._api_keys = {k["api_key"]: k["max_version"] for k in answer["api_keys"]}
        return self._api_keys.get(api_key)

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
            if code == ErrorCode.GROUP_ID_NOT_FOUND and found.get("error_message"):
                # DescribeGroups v6 fails the admin call for a group that does not
                # exist; Kafka's tool prints why and ends there (exit status 0).
                self._print("\nError: Executing consumer group command failed due to "
                            "org.apache.kafka.common.errors.GroupIdNotFoundException: "
                            + found["error_message"])
                return {}
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
        return member["partitions"]

    def _committed(self, group: str) -> dict[tuple[str, int], int]:
        return {tp: offset for tp, (offset, _epoch) in self._fetched(group).items()}

    def _fetched(self, group: str) -> dict[tuple[str, int], tuple[int, int]]:
        """Each committed offset of a group, with its leader epoch (-1: none)."""
        answer = self.client.call(9, 8, {"require_stable": False, "groups": [
            {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}]})
        fetched = answer["groups"][0]
        return {(t["name"], p["partition_index"]):
                (p["committed_offset"], p["committed_leader_epoch"])
                for t in fetched["topics"] for p in t["partitions"]
                if p["error_code"] == ErrorCode.NONE}

    def _log_ends(self, partitions) -> dict[tuple[str, int], int]:
        return self._list_offsets(partitions, LATEST)

    def describe_offsets(self, groups, verbose: bool = False) -> int:
        """Kafka's offsets table; ``verbose``: with each committed offset's leader
        epoch (LEADER-EPOCH) after the partition."""
        described = self._checked(groups)
        if described is None:
            return 1
        for group in sorted(described):
            found = described[group]
            rows = self._offset_rows(group, found) if found["error_code"] == 0 else None
            if not self._print_state_note(group, found, None if rows is None else len(rows)):
                continue
            if self.structured:
                for r in rows:
                    self.emit("offsets", group=r.group, topic=r.topic,
                              partition=int(r.partition), current_offset=_number_or_none(r.offset),
                              log_end_offset=_number_or_none(r.log_end), lag=_number_or_none(r.lag),
                              consumer_id=_text_or_none(r.consumer_id),
                              host=_text_or_none(r.host), client_id=_text_or_none(r.client_id),
                              leader_epoch=_number_or_none(r.epoch))
                continue
            widths = [max([15] + [len(getattr(r, f)) for r in rows])
                      for f in ("group", "topic", "consumer_id", "host")]
            line = (f"{{:<{widths[0]}}} {{:<{widths[1]}}} {{:<10}} "
                    + ("{:<15} " if verbose else "") + "{:<15} {:<15} {:<15} "
                    f"{{:<{widths[2]}}} {{:<{widths[3]}}} {{}}")
            epoch = ["LEADER-EPOCH"] if verbose else []
            self._print()
            self._print(line.format("GROUP", "TOPIC", "PARTITION", *epoch, "CURRENT-OFFSET",
                                    "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                                    "CLIENT-ID"), end="")
            for r in rows:
                epoch = [r.epoch] if verbose else []
                self._print()
                self._print(line.format(r.group, r.topic, r.partition, *epoch, r.offset,
                                        r.log_end, r.lag, r.consumer_id, r.host, r.client_id),
                            end="")
            self._print()
        return 0

    def _offset_rows(self, group: str, found: dict) -> list[_Row]:
        fetched = self._fetched(group)
        committed = {tp: offset for tp, (offset, _epoch) in fetched.items()}
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
            epoch = fetched.get(tp, (None, -1))[1]
            return _Row(group, tp[0], str(tp[1]), _shown(offset), _shown(end), _shown(lag),
                        consumer_id, host, client_id, _shown(None if epoch < 0 else epoch))

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
            if self.structured:
                for m in members:
                    self.emit("members", group=group, consumer_id=m["member_id"],
                              group_instance_id=m["group_instance_id"] or None,
                              host=m["client_host"], client_id=m["client_id"],
                              partitions=len(self._partitions(m)),
                              assignment=[list(tp) for tp in self._partitions(m)],
                              current_epoch=_number_or_none(m["epoch"]),
                              target_epoch=_number_or_none(m["target_epoch"]),
                              target_assignment=None if m["target_partitions"] is None
                              else [list(tp) for tp in m["target_partitions"]])
                continue
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
            targets = [m["target"] for m in members]
            more = (f"{{:<15}} {{:<{max([20] + [len(c) for c in current])}}} {{:<15}} "
                    f"{{:<{max([20] + [len(t) for t in targets])}}}")
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
                    text += more.format(m["epoch"], assigned, m["target_epoch"],
                                        m["target"])
                self._print(text)
        return 0

    def describe_state(self, groups, verbose: bool = False) -> int:
        """Kafka's state table; ``verbose``: with the group's epoch and its target
        assignment's (``-`` for a classic group)."""
        described = self._checked(groups)
        if described is None:
            return 1
        coordinator = self._coordinator_text(groups)
        for group in sorted(described):
            found = described[group]
            if not self._print_state_note(group, found, 1 if found["error_code"] == 0 else None):
                continue
            where = coordinator.get(group, MISSING)
            if self.structured:
                address, _, node = where.partition("  (")
                self.emit("state", group=group, coordinator=_text_or_none(address),
                          coordinator_id=int(node.rstrip(")")) if node else None,
                          assignment_strategy=found["protocol_data"] or None,
                          state=found["group_state"], members=len(found["members"]),
                          group_epoch=_number_or_none(found.get("group_epoch", MISSING)),
                          target_assignment_epoch=_number_or_none(
                              found.get("target_epoch", MISSING)))
                continue
            line = f"{{:<{max(15, len(group))}}} {{:<{max(25, len(where))}}} {{:<20}} " \
                "{:<20} " + ("{:<15} {:<25} " if verbose else "") + "{}"
            epochs = ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"] if verbose else []
            self._print()
            self._print(line.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                                    *epochs, "#MEMBERS"), end="")
            epochs = [found.get("group_epoch", MISSING), found.get("target_epoch", MISSING)] \
                if verbose else []
            self._print()
            self._print(line.format(group, where, found["protocol_data"] or MISSING,
                                    found["group_state"], *epochs, len(found["members"])),
                        end="")
            self._print()
        return 0

    def _coordinator_text(self, groups) -> dict[str, str]:
        answer = self.client.call(10, 4, {"key_type": 0, "coordinator_keys": list(groups)})
        return {c["key"]: f"{c['host']}:{c['port']}  ({c['node_id']})"
                for c in answer["coordinators"] if c["error_code"] == ErrorCode.NONE}

    # -- resetting ---------------------------------------------------------------------------

    def _list_offsets(self, partitions, timestamp: int) -> dict[tuple[str, int], int]:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(set(partitions)):
            by_topic.setdefault(topic, []).append(p)
        if not by_topic:
            return {}
        answer = self.client.call(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                        "timestamp": timestamp} for p in ps]}
            for t, ps in by_topic.items()]})
        return {(t["name"], p["partition_index"]): p["offset"]
                for t in answer["topics"] for p in t["partitions"]
                if p["error_code"] == ErrorCode.NONE}

    def _scope(self, group: str, args, missing: list[str] | None = None
               ) -> list[tuple[str, int]]:
        """The partitions --all-topics or --topic names.  A whole topic that does
        not exist fails, unless ``missing`` collects it (--delete-offsets)."""
        if args.all_topics:
            return sorted(self._committed(group))
        chosen = []
        whole = []
        for arg in args.topic:
            if ":" in arg:
                topic, _, partitions = arg.partition(":")
                if not topic or ":" in partitions:
                    raise Usage(f"Invalid topic arg '{arg}', expected topic name and "
                                "partitions")
                for p in partitions.split(","):
                    if not p.strip().isdigit():
                        raise Usage(f"Invalid partition '{p}' specified in topic arg "
                                    f"'{arg}''")
                    chosen.append((topic, int(p)))
            else:
                whole.append(arg)
        if whole:
            answer = self.client.call(3, 12, {
                "topics": [{"topic_id": None, "name": t} for t in whole],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
            for t in answer["topics"]:
                if missing is not None and t["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    missing.append(t["name"])
                    continue
                if t["error_code"] != ErrorCode.NONE:
                    raise _failed(t["error_code"])
                chosen += [(t["name"], p["partition_index"]) for p in t["partitions"]]
        return chosen

    def plan_reset(self, group: str, args, plan: dict | None = None) -> dict[tuple[str, int], int]:
        """The new offset of each partition in scope, as Kafka's tool computes it;
        with --from-file, the group's offsets in ``plan`` (its parsed file), kept
        within the log whatever the scope (a scope given is still looked up, so a
        topic that does not exist is an error, as in Kafka's tool)."""
        if args.from_file is not None:
            if args.all_topics or args.topic:
                self._scope(group, args)
            return self._within_log(plan[group], from_file=True)
        partitions = self._scope(group, args)
        if args.to_earliest:
            return self._listed_or_fail(partitions, EARLIEST, "starting offset")
        if args.to_latest:
            return self._listed_or_fail(partitions, LATEST, "ending offset")
        if args.to_current:
            committed = self._committed(group)
            planned = {tp: committed[tp] for tp in partitions if tp in committed}
            planned.update(self._listed_or_fail(
                [tp for tp in partitions if tp not in committed], LATEST, "ending offset"))
            return planned
        if args.to_offset is not None:
            offset = _long(args.to_offset, "to-offset")
            return self._within_log({tp: offset for tp in partitions})
        if args.shift_by is not None:
            shift = _long(args.shift_by, "shift-by")
            committed = self._committed(group)
            missing = [tp for tp in partitions if tp not in committed]
            if missing:
                raise Usage(f"Cannot shift offset for partition {missing[0][0]}-"
                                 f"{missing[0][1]} since there is no current committed offset")
            return self._within_log({tp: committed[tp] + shift for tp in partitions})
        import time
        timestamp = _parse_datetime(args.to_datetime) if args.to_datetime is not None else \
            int(time.time() * 1000) - _parse_duration_ms(args.by_duration)
        found = self._list_offsets(partitions, timestamp)
        latest = None
        planned = {}
        for tp in partitions:
            offset = found.get(tp, -1)
            if offset < 0:  # no record at or after the time
                self._print(f"\nWarn: Partition {tp[1]} from topic {tp[0]} is empty. Falling "
                            "back to latest known offset.")
                latest = latest if latest is not None else self._list_offsets(partitions, LATEST)
                offset = latest[tp]
            planned[tp] = offset
        return planned

    def _listed_or_fail(self, partitions, timestamp: int, what: str) -> dict:
        found = self._list_offsets(partitions, timestamp)
        self._fail_on_unknown_topics({tp: 0 for tp in partitions if tp not in found})
        for tp in partitions:
            if tp not in found:
                raise ValueError(f"Error getting {what} of topic partition: {tp[0]}-{tp[1]}")
        return {tp: found[tp] for tp in partitions}

    def _within_log(self, wanted: dict, from_file: bool = False) -> dict:
        """Kafka's checkOffsetsRange: an offset past the log end is the end, one
        before the log start is the start."""
        starts = self._list_offsets(wanted, EARLIEST)
        ends = self._list_offsets(wanted, LATEST)
        planned = {}
        self._fail_on_unknown_topics({tp: 0 for tp in wanted if tp not in ends}, from_file)
        for tp, offset in wanted.items():
            if tp not in ends:
                raise ValueError(f"Unexpected non-existing offset value for topic partition "
                                 f"{tp[0]}-{tp[1]}")
            if offset > ends[tp]:
                print(f"New offset ({offset}) is higher than latest offset for topic partition "
                      f"{tp[0]}-{tp[1]}. Value will be set to {ends[tp]}.", file=self.err)
                offset = ends[tp]
            elif tp in starts and offset < starts[tp]:
                print(f"New offset ({offset}) is lower than earliest offset for topic partition "
                      f"{tp[0]}-{tp[1]}. Value will be set to {starts[tp]}.", file=self.err)
                offset = starts[tp]
            planned[tp] = offset
        return planned

    def _fail_on_unknown_topics(self, unanswered: dict, from_file: bool = False) -> None:
        """Failed (Kafka's catch-all) when a partition whose offsets were not
        answered is of a topic the broker does not have, in the words of the admin
        call that finds it out: a plan file's offsets are looked up by partition
        leader, the others' by topic."""
        if not unanswered:
            return
        answer = self.client.call(3, 12, {
            "topics": [{"topic_id": None, "name": t} for t in sorted({t for t, _ in unanswered})],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        unknown = {t["name"] for t in answer["topics"]
                   if t["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        for topic, partition in sorted(unanswered):
            if topic in unknown:
                raise Failed(
                    "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors."
                    "UnknownTopicOrPartitionException: " + (
                        f"Failed to fetch metadata for partition {topic}-{partition} because "
                        f"metadata for topic `{topic}` could not be found" if from_file else
                        "This server does not host this topic-partition."))

    def commit(self, group: str, planned: dict) -> None:
        """The new offsets, committed as an admin client commits them (no member)."""
        by_topic: dict[str, list] = {}
        for (topic, p), offset in sorted(planned.items()):
            by_topic.setdefault(topic, []).append(
                {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1,
                 "committed_metadata": ""})
        answer = self.client.call(8, 9, {"group_id": group, "generation_id_or_member_epoch": -1,
                                         "member_id": "", "group_instance_id": None,
                                         "topics": [{"name": t, "partitions": ps}
                                                    for t, ps in by_topic.items()]})
        for t in answer["topics"]:
            for p in t["partitions"]:
                if p["error_code"] != ErrorCode.NONE:
                    raise _failed(p["error_code"])

    def delete_offsets(self, group: str, topics) -> int:
        """Kafka's deleteOffsets: a topic that does not exist is a row of its own
        (partition ``-``, its error); the others' offsets are deleted."""
        missing: list[str] = []
        partitions = self._scope(group, argparse.Namespace(all_topics=False, topic=topics),
                                 missing)
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        answer = self.client.call(47, 0, {"group_id": group, "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in ps]}
            for t, ps in by_topic.items()]})
        top = ErrorCode(answer["error_code"])
        results = {(t["name"], p["partition_index"]): ErrorCode(p["error_code"])
                   for t in answer["topics"] for p in t["partitions"]}
        partition_level = (ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
                           ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if top is ErrorCode.NONE:
            top = next((c for c in results.values() if c is not ErrorCode.NONE), top)
        if top is ErrorCode.NONE:
            self._print(f"Request succeeded for deleting offsets from group {group}.")
        elif top in partition_level:
            self._print("\nError: Encountered some partition-level error, see the follow-up "
                        "details.")
        elif top in _MESSAGES:
            self._print(f"\nError: {_MESSAGES[top]}")
        else:
            self._print(f"\nError: Encountered some unknown error: {top.name}")
        width = max([15] + [len(t) for t, _p in partitions] + [len(t) for t in missing])
        line = f"{{:<{width}}} {{:<10}} {{:<15}}"
        self._print()
        self._print(line.format("TOPIC", "PARTITION", "STATUS"), end="")
        unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        rows = [(tp, results.get(tp, top)) for tp in partitions] + \
            [((t, MISSING), unknown) for t in missing]
        for tp, code in sorted(rows, key=lambda row: row[0][0] + str(row[0][1])):
            status = "Successful" if code is ErrorCode.NONE else \
                f"Error: {_exception_text(code)}"
            self._print()
            self._print(line.format(tp[0], tp[1], status), end="")
        self._print()
        return 0

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


def _from_describe_groups(g: dict) -> dict:
    """A classic group's DescribeGroups entry, with each member's partitions read
    from its assignment (no epochs, no target: shown as Kafka's tool shows them)."""
    members = []
    for m in g["members"]:
        raw = m["member_assignment"]
        partitions = sorted((t["topic"], p)
                            for t in consumer_assignment(raw)["assigned_partitions"]
                            for p in t["partitions"]) if raw else []
        members.append({**m, "partitions": partitions, "epoch": MISSING,
                        "target_epoch": MISSING, "target": MISSING, "target_partitions": None})
    return {**g, "members": members}


def _from_consumer_describe(g: dict) -> dict:
    """A consumer-protocol group's ConsumerGroupDescribe entry in the same shape:
    its assignor as the strategy, each member's epoch and target."""
    def partitions(assignment: dict) -> list[tuple[str, int]]:
        return sorted((t["topic_name"], p) for t in assignment["topic_partitions"]
                      for p in t["partitions"])

    members = [{"member_id": m["member_id"], "group_instance_id": m["instance_id"],
                "client_id": m["client_id"], "client_host": m["client_host"],
                "partitions": partitions(m["assignment"]), "epoch": str(m["member_epoch"]),
                "target_epoch": str(g["assignment_epoch"]),
                "target": _assignment_text(partitions(m["target_assignment"])),
                "target_partitions": partitions(m["target_assignment"])}
               for m in g["members"]]
    return {"error_code": g["error_code"], "group_id": g["group_id"],
            "group_state": g["group_state"], "protocol_type": "consumer",
            "protocol_data": g["assignor_name"], "members": members,
            "group_epoch": str(g["group_epoch"]), "target_epoch": str(g["assignment_epoch"])}


def _shown(value) -> str:
    return MISSING if value is None else str(value)


def _number_or_none(text: str) -> int | None:
    return None if text == MISSING else int(text)


def _text_or_none(text: str) -> str | None:
    return None if text == MISSING else text


def _assignment_text(owned: list[tuple[str, int]]) -> str:
    """``orders:0;payments:0,1`` as Kafka 4's tool writes an assignment."""
    if not owned:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for topic, p in owned:
        by_topic.setdefault(topic, []).append(p)
    return ";".join(sorted(f"{topic}:" + ",".join(str(p) for p in sorted(ps))
                           for topic, ps in by_topic.items()))


# Kafka's Errors messages, as its tools print them.
_MESSAGES = {
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.INVALID_GROUP_ID: "The group id is invalid.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "Deleting offsets of a topic is forbidden while the "
                                         "consumer group is actively subscribed to it.",
}

# The exceptions Kafka's admin client raises for them (org.apache.kafka.common.errors).
_EXCEPTIONS = {
    ErrorCode.NON_EMPTY_GROUP: "GroupNotEmptyException",
    ErrorCode.GROUP_ID_NOT_FOUND: "GroupIdNotFoundException",
    ErrorCode.INVALID_GROUP_ID: "InvalidGroupIdException",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "GroupSubscribedToTopicException",
}


def _exception_text(code: ErrorCode) -> str:
    """``Throwable.toString()`` of the exception Kafka's admin client raises."""
    if code not in _EXCEPTIONS:
        return code.name
    return f"org.apache.kafka.common.errors.{_EXCEPTIONS[code]}: {_MESSAGES[code]}"


# -- resetting and deleting offsets (Kafka's GroupOffsetsResetter) -----------------------

EARLIEST, LATEST = -2, -1  # ListOffsets timestamps


def _reset(tool: "_Groups", groups, args, err) -> int:
    scenarios = [args.to_earliest, args.to_latest, args.to_current, args.to_offset is not None,
                 args.shift_by is not None, args.to_datetime is not None,
                 args.by_duration is not None, args.from_file is not None]
    if not any(scenarios):
        print("Option '[reset-offsets]' requires one of the following scenarios: ["
              + ", ".join(f"[{o}]" for o in SCENARIOS) + "]", file=err)
        return 1
    if args.from_file is None and not args.all_topics and not args.topic:
        print("One of the reset scopes should be defined: --all-topics, --topic.", file=err)
        return 1
    described = tool._describe(groups)
    result: dict[str, dict[tuple[str, int], int]] = {}
    plan = None
    for group in groups:
        state = described[group]["group_state"]
        if state not in ("Empty", "Dead"):
            tool._print(f"\nError: Assignments can only be reset if the group '{group}' is "
                        f"inactive, but the current state is {state}.")
            result[group] = {}
            continue
        try:
            if args.from_file is not None:
                plan = plan if plan is not None else read_reset_plan(args.from_file, groups)
                if group not in plan:
                    tool._print(f"\nError: No reset plan for group {group} found.")
                    result[group] = {}
                    continue
            planned = tool.plan_reset(group, args, plan)
        except Failed as exc:
            tool._print(f"\nError: Executing consumer group command failed due to {exc}")
            return 0
        except Usage as exc:
            print(exc, file=err)
            return 1
        except ValueError as exc:
            tool._print(f"\nError: {exc}")
            return 1
        if args.execute and not args.dry_run:
            tool.commit(group, planned)
        result[group] = planned
    if tool.structured:
        for group, planned in result.items():
            for (topic, partition), offset in sorted(planned.items()):
                tool.emit("reset", group=group, topic=topic, partition=partition,
                          new_offset=offset)
        return 0
    if args.export:
        lines = [f"{tp[0]},{tp[1]},{o}" if len(result) == 1 else f"{g},{tp[0]},{tp[1]},{o}"
                 for g, planned in result.items() for tp, o in sorted(planned.items())]
        tool._print("".join(line + "\n" for line in lines))
        return 0
    if result:
        g = max([15] + [len(group) for group in result])
        t = max([15] + [len(tp[0]) for planned in result.values() for tp in planned])
        line = f"{{:<{g}}} {{:<{t}}} {{:<10}} {{}}"
        tool._print()
        tool._print(line.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), end="")
        for group, planned in result.items():
            for (topic, partition), offset in sorted(planned.items()):
                tool._print()
                tool._print(line.format(group, topic, partition, offset), end="")
    tool._print()
    return 0


_NO_CONTENT = ("com.fasterxml.jackson.databind.exc.MismatchedInputException: No content to "
               "map due to end-of-input\n at [Source: (StringReader); line: UNKNOWN, column: "
               "UNKNOWN]")


def read_reset_plan(path: str, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
    """A --from-file reset plan, read as Kafka's GroupOffsetsResetter reads it: lines
    of ``topic,partition,offset`` when one group is named and the first line has
    that form, otherwise ``group,topic,partition,offset``.  Failed says why a
    file cannot be used, in the words of Kafka's tool."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        raise Failed(f"java.io.IOException: Unable to read file {path}") from None
    except UnicodeDecodeError as exc:
        raise Failed(f"{path} is not UTF-8 text: {exc}") from None
    # Lines as Java's String.split gives them: trailing empty ones dropped (what
    # --export writes ends with a blank line), but an empty file is one empty line.
    lines = text.split("\n")
    while text and lines and lines[-1] == "":
        lines.pop()
    lines = [line.rstrip("\r") for line in lines]
    if "" in lines:
        raise Failed(_NO_CONTENT)
    if not lines:
        return {}
    rows = [line.split(",") for line in lines]
    plan: dict[str, dict[tuple[str, int], int]] = {}
    # The form without groups when one group is named and the first line reads as
    # one: at most three entries, the numbers numbers (missing ones are 0).
    if len(groups) == 1 and len(rows[0]) <= 3 and all(f == "" or _is_int(f)
                                                      for f in rows[0][1:]):
        for row in rows:
            if len(row) > 3:
                raise Failed(f"too many entries in line {','.join(row)!r}: expected at most 3")
            row = row + [""] * (3 - len(row))
            plan.setdefault(groups[0], {})[(row[0], _number(row, 1))] = _number(row, 2)
        return plan
    for row in rows:
        if len(row) > 4:
            raise Failed(f"too many entries in line {','.join(row)!r}: expected at most 4")
        row = row + [""] * (4 - len(row))
        plan.setdefault(row[0], {})[(row[1], _number(row, 2))] = _number(row, 3)
    return plan


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def _number(row: list[str], i: int) -> int:
    """A partition or offset column: empty (a short line) is 0, as Kafka's CSV reader
    fills missing trailing columns."""
    if row[i] == "":
        return 0
    if not _is_int(row[i]):
        raise Failed(f"{row[i]!r} in line {','.join(row).rstrip(',')!r} is not a number")
    return int(row[i])


def _parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: ``yyyy-MM-ddTHH:mm:ss.SSS``, then an optional zone
    (``Z``, ``+01:00``, ``+0100``, ``+01``); UTC without one, as Kafka reads it (it
    appends ``Z``).  Milliseconds; Failed in Kafka's words otherwise."""
    import re
    from datetime import datetime
    if "T" not in text:
        raise Failed("java.text.ParseException: Error parsing timestamp. It does not contain "
                     "a 'T' according to ISO8601 format")
    if not any(c in text.split("T")[1] for c in "+-Z"):
        text += "Z"
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3})(Z|[+-]\d{2}(?::?\d{2})?)", text)
    try:
        if not m:
            raise ValueError(text)
        zone = "+0000" if m.group(2) == "Z" else m.group(2).replace(":", "").ljust(5, "0")
        parsed = datetime.strptime(m.group(1) + zone, "%Y-%m-%dT%H:%M:%S.%f%z")
    except ValueError:
        raise Failed(f'java.text.ParseException: Unparseable date: "{text}"') from None
    return int(parsed.timestamp() * 1000)


def _parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse reads it (``PnDTnHnMn.nS``)."""
    import re
    m = re.fullmatch(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                     r"(?:([-+]?\d+(?:\.\d{1,9})?)S)?)?", text.upper())
    if not m or text.upper() in ("P", "PT") or text.upper().endswith("T"):
        raise Failed("Text cannot be parsed to a Duration")
    days, hours, minutes = (int(g or 0) for g in m.group(2, 3, 4))
    seconds = float(m.group(5) or 0)
    total = ((days * 24 + hours) * 60 + minutes) * 60_000 + round(seconds * 1000)
    return -total if m.group(1) == "-" else total
