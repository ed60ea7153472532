"""``kcoord topics``: topics as Kafka's ``kafka-topics.sh`` (``TopicCommand``)
lists, describes, creates, alters and deletes them: the same flags, lines,
errors and exit statuses.

A client (the project's wire client), so it works against Apache Kafka too.
Where Kafka's tool describes topics in hash order, this one sorts them.

    kcoord topics --bootstrap-server 127.0.0.1:9092 --list [--topic REGEX] [--exclude-internal]
    kcoord topics --bootstrap-server ... --describe [--topic REGEX | --topic-id ID]
        [--exclude-internal] [--if-exists] [--topics-with-overrides |
         --under-replicated-partitions | --under-min-isr-partitions |
         --at-min-isr-partitions | --unavailable-partitions]
    kcoord topics --bootstrap-server ... --create --topic T [--if-not-exists]
        [--partitions N] [--replication-factor R | --replica-assignment 1:2,2:3]
        [--config K=V ...]
    kcoord topics --bootstrap-server ... --alter --topic REGEX --partitions N
        [--replica-assignment ...] [--if-exists]
    kcoord topics --bootstrap-server ... --delete --topic REGEX [--if-exists]

``--topic`` is a regular expression (matching whole names) everywhere but with
--create, as in Kafka's tool: a comma stands for ``|``, spaces and surrounding
quotes are dropped.

Kafka's tool reports misuse (options that do not go together, a missing one)
with the message on stderr, its usage and exit status 1; this one gives the same
message and status, with its own usage. A failure while working prints
``Error while executing topic command : ...`` on stdout, exit status 1, in
both. Topic config values are checked by the broker rather than before the
request is sent; the broker's messages are the same as the tool's.
"""

from __future__ import annotations

import argparse
import base64
import functools
import re
import sys
import uuid

from kcoord.broker.config import java_integer
from kcoord.broker.tools.connect import ConnectError, connect
from kcoord.broker.tools.groups import KafkaHelp, parse_error
from kcoord.protocol.errors import ErrorCode

ACTIONS = ("create", "list", "alter", "describe", "delete")
# The partition filters of --describe, in the order Kafka's tool checks them.
REPORTS = ("under-replicated-partitions", "under-min-isr-partitions", "at-min-isr-partitions",
           "unavailable-partitions")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
TOPIC_RESOURCE = 2
DEFAULT_CONFIG = 5  # DescribeConfigs config_source: not shown by Kafka's tool
DESCRIBE_TOPIC_PARTITIONS = 75
LIST_PARTITION_REASSIGNMENTS = 46
ZERO_UUID = uuid.UUID(int=0)
_ERROR = "Error while executing topic command : "
_ONE_ACTION = ("Command must include exactly one action: --list, --describe, --create, "
               "--alter or --delete")
_USE_KAFKA_CONFIGS = " (To alter topic configurations, the kafka-configs tool can be used.)"
# The messages of the exceptions Kafka's admin client raises when a broker gives no text.
_DEFAULT_TEXT = {
    ErrorCode.TOPIC_ALREADY_EXISTS: "Topic with this name already exists.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.INVALID_PARTITIONS: "Number of partitions is below 1.",
    ErrorCode.INVALID_REPLICATION_FACTOR: "Replication factor is below 1 or larger than "
                                          "the number of available brokers.",
}


class _Misuse(Exception):
    """What Kafka's tool reports before it starts (its option checks): the message
    on stderr, then the usage when ``usage``; exit status 1."""

    def __init__(self, message: str, usage: bool = True):
        super().__init__(message)
        self.usage = usage


class _Failed(Exception):
    """What Kafka's tool reports while working: the message after "Error while
    executing topic command : " on stdout, exit status 1."""


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "topics", help="list, describe, create, alter and delete topics (as kafka-topics.sh)",
        description="Topics as Kafka's kafka-topics.sh shows them; a client, so it works "
                    "against any Kafka broker.",
        epilog="examples:\n"
               "  kcoord topics --bootstrap-server 127.0.0.1:9092 --list\n"
               "  kcoord topics --bootstrap-server 127.0.0.1:9092 --create --topic orders "
               "--partitions 3\n"
               "  kcoord topics --bootstrap-server 127.0.0.1:9092 --describe --topic 'ord.*'\n"
               "  kcoord topics --bootstrap-server 127.0.0.1:9092 --describe "
               "--under-min-isr-partitions\n",
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False,
        allow_abbrev=False)  # Kafka's tool takes no abbreviated option
    parser.add_argument("-h", "--help", action=KafkaHelp)
    parser.error = functools.partial(parse_error, parser)
    # Options that take one value are collected, so that one given twice is
    # refused as Kafka's tool refuses it.
    one = {"action": "append"}
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", **one,
                        help="REQUIRED: the broker to connect to")
    parser.add_argument("--command-config", metavar="FILE", **one,
                        help="a Java client's properties: security.protocol, ssl.truststore.*, "
                             "ssl.keystore.*, sasl.mechanism and sasl.jaas.config (PEM stores; "
                             "PLAIN or SCRAM), as Kafka's tools take them")
    for action, text in (("list", "list the topics"), ("describe", "describe topics"),
                         ("create", "create a topic"),
                         ("alter", "raise a topic's partition count (topic configs are "
                                   "altered with kafka-configs)"),
                         ("delete", "delete topics")):
        parser.add_argument(f"--{action}", action="store_true", help=text)
    parser.add_argument("--topic", metavar="TOPIC", **one,
                        help="the topic; a regular expression except with --create "
                             "(escape dots: 'test\\.topic')")
    parser.add_argument("--topic-id", metavar="ID", **one,
                        help="with --describe: the topic of this id instead of --topic")
    parser.add_argument("--partitions", metavar="N", **one,
                        help="with --create: the partition count (default: the broker's "
                             "num.partitions); with --alter: the new, larger count")
    parser.add_argument("--replication-factor", metavar="R", **one,
                        help="with --create: the replication factor (default: the broker's)")
    parser.add_argument("--replica-assignment", metavar="B1:B2,B1:B2,...", **one,
                        help="with --create or --alter: each partition's brokers, partitions "
                             "separated by commas, brokers by colons")
    parser.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="with --create: a topic config (repeatable)")
    parser.add_argument("--delete-config", action="append", metavar="NAME",
                        help="no longer supported (a warning, as in Kafka 4.x)")
    parser.add_argument("--exclude-internal", action="store_true",
                        help="with --list or --describe: leave out internal topics")
    parser.add_argument("--if-exists", action="store_true",
                        help="with --alter, --delete or --describe: no error when no topic "
                             "matches")
    parser.add_argument("--if-not-exists", action="store_true",
                        help="with --create: no error when the topic exists already")
    parser.add_argument("--topics-with-overrides", action="store_true",
                        help="with --describe: only topics with configs of their own, "
                             "without partitions")
    for report, text in zip(REPORTS, ("whose ISR is smaller than their replicas",
                                      "whose ISR is smaller than min.insync.replicas",
                                      "whose ISR is as large as min.insync.replicas",
                                      "without a live leader")):
        parser.add_argument(f"--{report}", action="store_true",
                            help=f"with --describe: only the partitions {text}")
    parser.add_argument("--partition-size-limit-per-response", metavar="N", **one,
                        help="with --describe: how many partitions one DescribeTopicPartitions "
                             "answer holds (default 2000)")
    parser.add_argument("--timeout", type=int, default=30000, metavar="MS",
                        help="how long to wait for an answer (default 30000)")
    parser.add_argument("--version", action="version", version=_version(),
                        help="the version of kcoord")
    parser.set_defaults(topics_usage=parser.format_usage)


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("kcoord")
    except Exception:
        return "unknown"


def run(args, out=sys.stdout, err=sys.stderr) -> int:
    try:
        action = _checked(args, out, err)
        command_config = _value(args, "command-config", misuse=True)
        bootstrap = _value(args, "bootstrap-server", misuse=True)
    except _Misuse as exc:
        print(exc, file=err)
        usage = getattr(args, "topics_usage", None)
        if exc.usage and usage is not None:
            print(usage(), end="", file=err)
        return 1
    try:
        client = connect(bootstrap, args.timeout / 1000, "kcoord-topics", command_config)
    except (OSError, ValueError, ConnectError) as exc:
        print(f"{_ERROR}{exc}", file=out)
        return 1
    with client:
        try:
            return getattr(_Topics(client, out, args.timeout), action)(args)
        except _Failed as exc:
            print(f"{_ERROR}{exc}", file=out)
            return 1


def _given(args, option: str) -> bool:
    value = getattr(args, option.replace("-", "_"))
    return value is not None and value is not False


def _checked(args, out, err) -> str:
    """The action, once the options pass the checks Kafka's tool makes before it
    connects, in its order (``_Misuse`` otherwise)."""
    actions = [a for a in ACTIONS if _given(args, a)]
    if len(actions) != 1:
        raise _Misuse(_ONE_ACTION)
    action = actions[0]
    if _given(args, "delete-config"):
        print("delete-config option is no longer supported and deprecated since version 4.0. "
              "The config will be fully removed in future releases.", file=err)
    if not _given(args, "bootstrap-server"):
        raise _Misuse("--bootstrap-server must be specified", usage=False)
    if action == "describe" and args.if_exists:
        if not _given(args, "topic") and not _given(args, "topic-id"):
            raise _Misuse("--topic or --topic-id is required to describe a topic")
        if _given(args, "topic") and _given(args, "topic-id"):
            print("Only topic id will be used when both --topic and --topic-id are specified "
                  "and topicId is not Uuid.ZERO_UUID", file=out)
    if action not in ("list", "describe") and not _given(args, "topic"):
        raise _Misuse('Missing required argument "[topic]"')
    if action == "alter":
        if _given(args, "config"):
            raise _Misuse('Option combination "[[config], [bootstrap-server]]" can\'t be used '
                          f'with option "[alter]"{_USE_KAFKA_CONFIGS}')
        if not _given(args, "partitions"):
            raise _Misuse('Missing required argument "[partitions]"')

    def refuse(option: str, *others: str) -> None:
        if _given(args, option):
            for other in others:
                if _given(args, other):
                    raise _Misuse(f'Option "[{option}]" can\'t be used with option "[{other}]"')

    def actions_but(*allowed: str) -> list[str]:
        return [a for a in ACTIONS if a not in allowed]

    refuse("config", *actions_but("alter", "create"))
    refuse("partitions", *actions_but("alter", "create"))
    refuse("replication-factor", *actions_but("create"))
    refuse("replica-assignment", *actions_but("alter", "create"))
    if action == "create":
        refuse("replica-assignment", "partitions", "replication-factor")
    for report in REPORTS:
        refuse(report, *actions_but("describe"), "topics-with-overrides")
    refuse("topics-with-overrides", *actions_but("describe"), *REPORTS)
    refuse("if-exists", *actions_but("alter", "delete", "describe"))
    refuse("if-not-exists", *actions_but("create"))
    refuse("exclude-internal", *actions_but("list", "describe"))
    return action


def _value(args, option: str, misuse: bool = False) -> str | None:
    """The one value of an option, or None; given twice, refused as Kafka's tool
    refuses it (on stderr for the connection's options, read before it starts)."""
    values = getattr(args, option.replace("-", "_"))
    if values is None:
        return None
    if isinstance(values, str):  # a caller's own namespace
        return values
    if len(values) > 1:
        text = f"Found multiple arguments for option {option}, but you asked for only one"
        raise _Misuse(text, usage=False) if misuse else _Failed(text)
    return values[0]


def _int_value(args, option: str) -> int | None:
    """An option's number, read as Kafka's tool reads it (a Java int)."""
    text = _value(args, option)
    if text is None:
        return None
    if isinstance(text, int):
        return text
    value = java_integer(text)
    if value is None:
        raise _Failed(f"Cannot parse argument '{text}' of option {option}")
    return value


def _java_split(text: str, pattern: str) -> list[str]:
    """``String.split`` as Java does it: trailing empty strings are dropped."""
    parts = re.split(pattern, text)
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _java_int(text: str) -> int:
    value = java_integer(text)
    if value is None:
        raise _Failed(f'For input string: "{text}"')
    return value


def _replica_assignment(args) -> list[list[int]]:
    """--replica-assignment's brokers, partition by partition (none when empty),
    refused as Kafka's tool refuses a broker named twice or partitions of
    different replication factors."""
    text = _value(args, "replica-assignment")
    if not text:
        return []
    assignment: list[list[int]] = []
    for index, partition in enumerate(_java_split(text, ",")):
        brokers = [_java_int(b.strip()) for b in _java_split(partition, ":")]
        twice = sorted({b for b in brokers if brokers.count(b) > 1})
        if twice:
            raise _Failed("Partition replica lists may not contain duplicate entries: "
                          + ",".join(map(str, twice)))
        assignment.append(brokers)
        if len(brokers) != len(assignment[0]):
            raise _Failed(f"Partition {index} has different replication factor: "
                          f"[{', '.join(map(str, brokers))}]")
    return assignment


def _topic_configs(args) -> dict[str, str]:
    """--config's pairs (the last of a name wins); a pair that is not exactly
    ``key=value`` is refused before anything is sent."""
    configs: dict[str, str] = {}
    for item in args.config or ():
        pair = _java_split(item, r"\s*=\s*")
        if len(pair) != 2:
            raise _Failed('requirement failed: Invalid topic config: all configs to be added '
                          'must be in the format "key=val".')
        configs[pair[0].strip()] = pair[1].strip()
    return configs


def _topic_filter(text: str) -> re.Pattern:
    """--topic as Kafka's tool reads it: trimmed, commas for ``|``, without spaces
    or surrounding quotes; a regular expression the whole name must match."""
    regex = text.strip("".join(map(chr, range(33)))).replace(",", "|").replace(" ", "")
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", regex))
    try:
        return re.compile(regex)
    except re.error:
        raise _Failed(f"{regex} is an invalid regex.") from None


def _parse_uuid(text: str) -> uuid.UUID:
    """A topic id as Kafka's ``Uuid.fromString`` reads it (base64url, 16 bytes),
    refused in its words."""
    if len(text) > 24:
        raise _Failed(f"Input string with prefix `{text[:24]}` is too long to be decoded as "
                      "a base64 UUID")
    data = _base64url(text)
    if len(data) != 16:
        raise _Failed(f"Input string `{text}` decoded as {len(data)} bytes, which is not equal "
                      "to the expected 16 bytes of a base64-encoded UUID")
    return uuid.UUID(bytes=data)


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _base64url(text: str) -> bytes:
    """base64url decoded as Java's decoder does it, refused in its words."""
    if len(text) == 1:
        raise _Failed("Input byte[] should at least have 2 bytes for base64 bytes")
    out = bytearray()
    bits, shift, at = 0, 18, 0
    while at < len(text):
        char = text[at]
        at += 1
        if char == "=":
            if shift == 18 or (shift == 6 and (at == len(text) or text[at] != "=")):
                raise _Failed("Input byte array has wrong 4-byte ending unit")
            at += 1 if shift == 6 else 0
            break
        digit = _ALPHABET.find(char)
        if digit < 0:
            # Java reads the text as ISO-8859-1 bytes (signed; '?' beyond) and
            # prints the byte in hexadecimal
            code = 0x3f if ord(char) > 0xff else ord(char) - (256 if ord(char) > 0x7f else 0)
            raise _Failed(f"Illegal base64 character {'-' if code < 0 else ''}{abs(code):x}")
        bits |= digit << shift
        shift -= 6
        if shift < 0:
            out += bits.to_bytes(3, "big")
            bits, shift = 0, 18
    if shift == 6:
        out.append(bits >> 16)
    elif shift == 0:
        out += (bits >> 8).to_bytes(2, "big")
    elif shift == 12:
        raise _Failed("Last unit does not have enough valid bits")
    if at < len(text):
        raise _Failed(f"Input byte array has incorrect ending byte at {at}")
    return bytes(out)


def _failure(code: int, message: str | None) -> _Failed:
    """A broker's error as Kafka's admin client words it: the broker's message,
    else the exception's own."""
    error = ErrorCode(code)
    return _Failed(message or _DEFAULT_TEXT.get(error, error.name))


class _Topics:
    def __init__(self, client, out, timeout_ms: int):
        self.client = client
        self.out = out
        self.timeout_ms = timeout_ms
        self._api_keys: set[int] | None = None

    def _metadata(self, names=None, ids=None) -> dict:
        if ids is not None:
            topics = [{"topic_id": i, "name": None} for i in ids]
        else:
            topics = None if names is None else [{"topic_id": None, "name": n} for n in names]
        return self.client.call(3, 12, {
            "topics": topics, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})

    def _listed(self, exclude_internal: bool) -> list[dict]:
        """Every topic the broker lists (as Kafka's admin client lists them), by name."""
        return sorted((t for t in self._metadata()["topics"]
                       if t["error_code"] == ErrorCode.NONE
                       and not (exclude_internal and t["is_internal"])),
                      key=lambda t: t["name"])

    def _names(self, args) -> list[str]:
        """The topics --topic matches (all without it), as Kafka's tool finds them."""
        topic = _value(args, "topic")
        names = [t["name"] for t in self._listed(args.exclude_internal)]
        if args.exclude_internal:
            names = [n for n in names if n not in INTERNAL_TOPICS]
        if topic is not None:
            pattern = _topic_filter(topic)
            names = [n for n in names if pattern.fullmatch(n)]
        return names

    def _existing(self, args) -> list[str]:
        """The topics --topic matches; none is an error unless --if-exists."""
        names = self._names(args)
        topic = _value(args, "topic")
        if topic and not names and not args.if_exists:
            raise _Failed(f"Topic '{topic}' does not exist as expected")
        return names

    def list(self, args) -> int:
        print("\n".join(self._names(args)), file=self.out)
        return 0

    def describe(self, args) -> int:
        id_text = _value(args, "topic-id")
        topic_id = _parse_uuid(id_text) if id_text is not None else None
        if topic_id is not None and topic_id != ZERO_UUID:
            ids = [t["topic_id"] for t in self._listed(args.exclude_internal)]
            if topic_id not in ids:
                if not args.if_exists:
                    raise _Failed(f"TopicId '{_uuid(topic_id)}' does not exist as expected")
                return 0
            # by id, Kafka's admin client asks Metadata: no ELR
            answer = self._metadata(ids=[topic_id])
            described: dict[str, list[dict]] = {}
        else:
            names = self._existing(args)
            if not names:
                return 0
            answer = self._metadata(names)
            described = self._described(names, _int_value(
                args, "partition-size-limit-per-response"))
        for topic in answer["topics"]:
            if topic["error_code"] != ErrorCode.NONE:
                raise _failure(topic["error_code"], None)
        topics = sorted(answer["topics"], key=lambda t: t["name"])
        configs = self._configs([t["name"] for t in topics])
        live = {b["node_id"] for b in answer["brokers"]}
        moving = self._reassignments(topics)
        show = _Shown(args, live)
        for topic in topics:
            name = topic["name"]
            partitions = sorted(described.get(name, topic["partitions"]),
                                key=lambda p: p["partition_index"])
            entries = configs[name]
            if show.topics:
                overrides = ",".join(f"{c['name']}={c['value']}" for c in entries
                                     if c["config_source"] != DEFAULT_CONFIG)
                if not args.topics_with_overrides or overrides:
                    first = partitions[0]
                    head = f"Topic: {name}"
                    if topic["topic_id"] != ZERO_UUID:
                        head += f"\tTopicId: {_uuid(topic['topic_id'])}"
                    print(f"{head}\tPartitionCount: {len(partitions)}\tReplicationFactor: "
                          f"{_replication(first, moving.get((name, first['partition_index'])))}"
                          f"\tConfigs: {overrides}", file=self.out)
            if args.topics_with_overrides:
                continue
            min_isr = int(next((c["value"] for c in entries
                                if c["name"] == "min.insync.replicas"), None) or 1)
            for p in partitions:
                change = moving.get((name, p["partition_index"]))
                if not show.partition(p, change, min_isr):
                    continue
                line = (f"\tTopic: {name}\tPartition: {p['partition_index']}\t"
                        f"Leader: {_leader(p['leader_id'])}\t"
                        f"Replicas: {_ids(p['replica_nodes'])}\tIsr: {_ids(p['isr_nodes'])}")
                if change is not None:
                    line += (f"\tAdding Replicas: {_ids(change['adding_replicas'])}"
                             f"\tRemoving Replicas: {_ids(change['removing_replicas'])}")
                print(f"{line}\tElr: {_elr(p, 'eligible_leader_replicas')}"
                      f"\tLastKnownElr: {_elr(p, 'last_known_elr')}", file=self.out)
        return 0

    def _described(self, names, limit: int | None) -> dict[str, list[dict]]:
        """Each topic's partitions as DescribeTopicPartitions (key 75) answers them,
        page after page, as Kafka's admin client asks for them; nothing from a
        broker that does not serve it (Kafka's tool then falls back to Metadata,
        and prints no ELR)."""
        if not names or not self._serves(DESCRIBE_TOPIC_PARTITIONS):
            return {}
        found: dict[str, list[dict]] = {}
        cursor = None
        while True:
            answer = self.client.call(DESCRIBE_TOPIC_PARTITIONS, 0, {
                "topics": [{"name": n} for n in names],
                "response_partition_limit": 2000 if limit is None else limit,
                "cursor": cursor})
            for topic in answer["topics"]:
                if topic["error_code"] != ErrorCode.NONE:
                    raise _failure(topic["error_code"], None)
                found.setdefault(topic["name"], []).extend(topic["partitions"])
            cursor = answer["next_cursor"]
            if cursor is None:
                return found

    def _serves(self, api_key: int) -> bool:
        if self._api_keys is None:
            answer = self.client.call(18, 3, {"client_software_name": "kcoord-topics",
                                              "client_software_version": "1"})
            self._api_keys = {k["api_key"] for k in answer["api_keys"]}
        return api_key in self._api_keys

    def _configs(self, names) -> dict[str, list[dict]]:
        """Each topic's configs, every one with its source (DescribeConfigs)."""
        if not names:
            return {}
        answer = self.client.call(32, 4, {"resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None}
            for n in names], "include_synonyms": False, "include_documentation": False})
        found = {}
        for result in answer["results"]:
            if result["error_code"] != ErrorCode.NONE:
                raise _failure(result["error_code"], result["error_message"])
            found[result["resource_name"]] = result["configs"]
        return found

    def _reassignments(self, topics) -> dict[tuple[str, int], dict]:
        """The partitions being moved (ListPartitionReassignments), as Kafka's tool
        shows them; none from a broker that does not serve it or lets this client
        not see them, as Kafka's tool takes either."""
        if not topics or not self._serves(LIST_PARTITION_REASSIGNMENTS):
            return {}
        answer = self.client.call(LIST_PARTITION_REASSIGNMENTS, 0, {
            "timeout_ms": self.timeout_ms, "topics": [
                {"name": t["name"],
                 "partition_indexes": [p["partition_index"] for p in t["partitions"]]}
                for t in topics]})
        if answer["error_code"] != ErrorCode.NONE:
            return {}
        return {(t["name"], p["partition_index"]): p
                for t in answer["topics"] for p in t["partitions"]}

    def create(self, args) -> int:
        # Read and checked before anything is sent, in the order of Kafka's tool.
        topic = _value(args, "topic")
        partitions = _int_value(args, "partitions")
        replication = _int_value(args, "replication-factor")
        assignment = _replica_assignment(args)
        configs = _topic_configs(args)
        if "." in topic or "_" in topic:
            print("WARNING: Due to limitations in metric names, topics with a period ('.') or "
                  "underscore ('_') could collide. To avoid issues it is best to use either, "
                  "but not both.", file=self.out)
        if replication is not None and not 1 <= replication <= 32767:
            raise _Failed("The replication factor must be between 1 and 32767 inclusive")
        if partitions is not None and partitions < 1:
            raise _Failed("The partitions must be greater than 0")
        if not topic:
            raise _Failed(f"The given topic name '{topic}' cannot be represented in a request.")
        answer = self.client.call(19, 5, {"topics": [{
            "name": topic,
            "num_partitions": -1 if partitions is None or assignment else partitions,
            "replication_factor": -1 if replication is None or assignment else replication,
            "assignments": [{"partition_index": i, "broker_ids": brokers}
                            for i, brokers in enumerate(assignment)],
            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout_ms": self.timeout_ms, "validate_only": False})
        created = answer["topics"][0]
        if created["error_code"] != ErrorCode.NONE:
            if created["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
                return 0
            raise _failure(created["error_code"], created["error_message"])
        print(f"Created topic {topic}.", file=self.out)
        return 0

    def alter(self, args) -> int:
        """More partitions for every topic --topic matches (CreatePartitions), with
        --replica-assignment's brokers for the new ones (its entries past the
        topic's present partitions), as Kafka's tool does."""
        _value(args, "topic")
        partitions = _int_value(args, "partitions")
        _int_value(args, "replication-factor")
        assignment = _replica_assignment(args)
        names = self._existing(args)
        if not names:
            return 0
        counts = {}
        if assignment:
            counts = {t["name"]: len(t["partitions"]) for t in self._metadata(names)["topics"]}
        answer = self.client.call(37, 3, {"topics": [
            {"name": name, "count": partitions,
             "assignments": [{"broker_ids": b} for b in assignment[counts[name]:]]
             if assignment else None}
            for name in names], "timeout_ms": self.timeout_ms, "validate_only": False})
        for result in answer["results"]:
            if result["error_code"] != ErrorCode.NONE:
                raise _failure(result["error_code"], result["error_message"])
        return 0

    def delete(self, args) -> int:
        names = self._existing(args)
        if not names:
            return 0
        answer = self.client.call(20, 6, {"topics": [{"name": n, "topic_id": None}
                                                     for n in names],
                                          "timeout_ms": self.timeout_ms})
        for result in answer["responses"]:
            if result["error_code"] != ErrorCode.NONE:
                raise _failure(result["error_code"], result["error_message"])
        return 0


class _Shown:
    """Which lines --describe prints: every topic's line and partition unless one
    of the partition filters is given, then only the partitions that pass one."""

    def __init__(self, args, live_brokers: set[int]):
        self.reports = {r for r in REPORTS if _given(args, r)}
        self.topics = not self.reports
        self.live = live_brokers

    def partition(self, p: dict, change: dict | None, min_isr: int) -> bool:
        if self.topics:
            return True
        leader = p["leader_id"] >= 0
        isr = len(p["isr_nodes"])
        return (("under-replicated-partitions" in self.reports
                 and _replication(p, change) > isr)
                or ("unavailable-partitions" in self.reports
                    and (not leader or p["leader_id"] not in self.live))
                or ("under-min-isr-partitions" in self.reports and (not leader or isr < min_isr))
                or ("at-min-isr-partitions" in self.reports and isr == min_isr))


def _replication(partition: dict, change: dict | None) -> int:
    """A partition's replication factor as Kafka's tool counts it: while it is
    being moved, its target replicas less those being added."""
    replicas = partition["replica_nodes"]
    if change is not None:
        moving = set(change["adding_replicas"]) | set(change["removing_replicas"])
        if moving & set(replicas):
            return len(change["replicas"]) - len(change["adding_replicas"])
    return len(replicas)


def _uuid(raw) -> str:
    data = raw if isinstance(raw, (bytes, bytearray)) else getattr(raw, "bytes", raw)
    return base64.urlsafe_b64encode(bytes(data)).decode().rstrip("=")


def _leader(node: int) -> str:
    return "none" if node < 0 else str(node)


def _ids(nodes) -> str:
    return ",".join(str(n) for n in nodes)


def _elr(partition: dict, field: str) -> str:
    """An ELR list as Kafka's tool prints it: N/A when the broker gave none (a
    Metadata answer, or a null list)."""
    nodes = partition.get(field)
    return "N/A" if nodes is None else _ids(nodes)
