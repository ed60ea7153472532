"""``kcoord topics``: topics as Kafka's ``kafka-topics.sh`` (``TopicCommand``)
lists, describes, creates and deletes them: the same flags, lines and errors.

A client (the project's wire client), so it works against Apache Kafka too.
Where Kafka's tool describes topics in hash order, this one sorts them.

    kcoord topics --bootstrap-server 127.0.0.1:9092 --list [--exclude-internal]
    kcoord topics --bootstrap-server ... --describe [--topic T] [--exclude-internal]
    kcoord topics --bootstrap-server ... --create --topic T [--partitions N]
        [--replication-factor R] [--config K=V ...]
    kcoord topics --bootstrap-server ... --delete --topic T
"""

from __future__ import annotations

import argparse
import sys

from kcoord.broker.tools.connect import ConnectError, connect
from kcoord.protocol.errors import ErrorCode

ACTIONS = ("list", "describe", "create", "alter", "delete")
TOPIC_RESOURCE = 2
DEFAULT_CONFIG = 5  # DescribeConfigs config_source: not shown by Kafka's tool
DESCRIBE_TOPIC_PARTITIONS = 75
_ERROR = "Error while executing topic command : "
_EXCEPTION_TEXT = {
    ErrorCode.TOPIC_ALREADY_EXISTS: "Topic '{topic}' already exists.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "Topic '{topic}' does not exist as expected",
}


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "topics", help="list, describe, create and delete topics (as kafka-topics.sh)",
        description="Topics as Kafka's kafka-topics.sh shows them; a client, so it works "
                    "against any Kafka broker.",
        epilog="examples:\n"
               "  kcoord topics --bootstrap-server 127.0.0.1:9092 --list\n"
               "  kcoord topics --bootstrap-server 127.0.0.1:9092 --create --topic orders "
               "--partitions 3\n"
               "  kcoord topics --bootstrap-server 127.0.0.1:9092 --describe --topic orders\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="the broker to connect to")
    parser.add_argument("--command-config", metavar="FILE",
                        help="a Java client's properties: security.protocol, ssl.truststore.*, "
                             "ssl.keystore.*, sasl.mechanism and sasl.jaas.config (PEM stores; "
                             "PLAIN or SCRAM), as Kafka's tools take them")
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true", help=f"{action} topics")
    parser.add_argument("--topic", help="the topic")
    parser.add_argument("--partitions", type=int,
                        help="with --create: the partition count (default: the broker's "
                             "num.partitions); with --alter: the new, larger count")
    parser.add_argument("--replication-factor", type=int,
                        help="with --create: the replication factor (default: the broker's)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="with --create: a topic config (repeatable)")
    parser.add_argument("--exclude-internal", action="store_true",
                        help="with --list or --describe: leave out internal topics")
    parser.add_argument("--timeout", type=int, default=30000, metavar="MS",
                        help="how long to wait for an answer (default 30000)")


def run(args, out=sys.stdout, err=sys.stderr) -> int:
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        print("Command must include exactly one action: --list, --describe, --create, "
              "--alter, --delete", file=err)
        return 1
    if actions[0] in ("create", "alter", "delete") and not args.topic:
        print('Missing required argument "[topic]"', file=err)
        return 1
    try:
        client = connect(args.bootstrap_server, args.timeout / 1000, "kcoord-topics",
                         args.command_config)
    except (OSError, ValueError, ConnectError) as exc:
        print(f"{_ERROR}{exc}", file=out)
        return 1
    with client:
        tool = _Topics(client, out, args.timeout)
        return getattr(tool, actions[0])(args)


class _Topics:
    def __init__(self, client, out, timeout_ms: int):
        self.client = client
        self.out = out
        self.timeout_ms = timeout_ms

    def _metadata(self, names=None) -> list[dict]:
        answer = self.client.call(3, 12, {
            "topics": None if names is None else [{"topic_id": None, "name": n} for n in names],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        return answer["topics"]

    def _fail(self, code: int, topic: str) -> int:
        text = _EXCEPTION_TEXT.get(ErrorCode(code), ErrorCode(code).name).format(topic=topic)
        print(_ERROR + text, file=self.out)
        return 1

    def list(self, args) -> int:
        for name in sorted(t["name"] for t in self._metadata()
                           if not (args.exclude_internal and t["is_internal"])):
            print(name, file=self.out)
        return 0

    def describe(self, args) -> int:
        topics = self._metadata([args.topic] if args.topic else None)
        if args.topic and topics[0]["error_code"] != ErrorCode.NONE:
            return self._fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, args.topic)
        topics = sorted((t for t in topics if t["error_code"] == ErrorCode.NONE
                         and not (args.exclude_internal and t["is_internal"])),
                        key=lambda t: t["name"])
        configs = self._configs([t["name"] for t in topics])
        described = self._described([t["name"] for t in topics])
        for topic in topics:
            name = topic["name"]
            partitions = sorted(described.get(name, topic["partitions"]),
                                key=lambda p: p["partition_index"])
            replication = len(partitions[0]["replica_nodes"]) if partitions else 0
            print(f"Topic: {name}\tTopicId: {_uuid(topic['topic_id'])}\t"
                  f"PartitionCount: {len(partitions)}\tReplicationFactor: {replication}\t"
                  f"Configs: {configs.get(name, '')}", file=self.out)
            for p in partitions:
                print(f"\tTopic: {name}\tPartition: {p['partition_index']}\t"
                      f"Leader: {_leader(p['leader_id'])}\t"
                      f"Replicas: {_ids(p['replica_nodes'])}\tIsr: {_ids(p['isr_nodes'])}\t"
                      f"Elr: {_elr(p, 'eligible_leader_replicas')}\t"
                      f"LastKnownElr: {_elr(p, 'last_known_elr')}", file=self.out)
        return 0

    def _described(self, names) -> dict[str, list[dict]]:
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
                "response_partition_limit": 2000, "cursor": cursor})
            for topic in answer["topics"]:
                if topic["error_code"] == ErrorCode.NONE:
                    found.setdefault(topic["name"], []).extend(topic["partitions"])
            cursor = answer["next_cursor"]
            if cursor is None:
                return found

    def _serves(self, api_key: int) -> bool:
        answer = self.client.call(18, 3, {"client_software_name": "kcoord-topics",
                                          "client_software_version": "1"})
        return any(k["api_key"] == api_key for k in answer["api_keys"])

    def _configs(self, names) -> dict[str, str]:
        if not names:
            return {}
        answer = self.client.call(32, 4, {"resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None}
            for n in names], "include_synonyms": False, "include_documentation": False})
        return {r["resource_name"]: ",".join(f"{c['name']}={c['value']}" for c in r["configs"]
                                             if c["config_source"] != DEFAULT_CONFIG)
                for r in answer["results"] if r["error_code"] == ErrorCode.NONE}

    def create(self, args) -> int:
        # Checked before anything is sent, as Kafka's tool does.
        if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
            print(f"{_ERROR}The replication factor must be between 1 and 32767 inclusive",
                  file=self.out)
            return 1
        if args.partitions is not None and args.partitions < 1:
            print(f"{_ERROR}The partitions must be greater than 0", file=self.out)
            return 1
        configs = []
        for item in args.config:
            key, sep, value = item.partition("=")
            if not sep:
                print(f"{_ERROR}Invalid config: {item}", file=self.out)
                return 1
            configs.append({"name": key.strip(), "value": value.strip()})
        if "." in args.topic or "_" in args.topic:
            print("WARNING: Due to limitations in metric names, topics with a period ('.') or "
                  "underscore ('_') could collide. To avoid issues it is best to use either, "
                  "but not both.", file=self.out)
        answer = self.client.call(19, 5, {"topics": [{
            "name": args.topic,
            "num_partitions": args.partitions if args.partitions is not None else -1,
            "replication_factor": args.replication_factor
            if args.replication_factor is not None else -1,
            "assignments": [], "configs": configs}],
            "timeout_ms": self.timeout_ms, "validate_only": False})
        created = answer["topics"][0]
        if created["error_code"] != ErrorCode.NONE:
            if created["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS:
                return self._fail(created["error_code"], args.topic)
            print(_ERROR + (created["error_message"] or ErrorCode(created["error_code"]).name),
                  file=self.out)
            return 1
        print(f"Created topic {args.topic}.", file=self.out)
        return 0

    def alter(self, args) -> int:
        """More partitions for a topic (CreatePartitions), as Kafka's tool does."""
        if args.partitions is None:
            print(f"{_ERROR}The partitions must be given with --alter", file=self.out)
            return 1
        if self._metadata([args.topic])[0]["error_code"] != ErrorCode.NONE:
            return self._fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, args.topic)
        answer = self.client.call(37, 3, {"topics": [
            {"name": args.topic, "count": args.partitions, "assignments": None}],
            "timeout_ms": self.timeout_ms, "validate_only": False})
        result = answer["results"][0]
        if result["error_code"] != ErrorCode.NONE:
            print(_ERROR + (result["error_message"] or ErrorCode(result["error_code"]).name),
                  file=self.out)
            return 1
        return 0

    def delete(self, args) -> int:
        if self._metadata([args.topic])[0]["error_code"] != ErrorCode.NONE:
            return self._fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, args.topic)
        answer = self.client.call(20, 6, {"topics": [{"name": args.topic, "topic_id": None}],
                                          "timeout_ms": self.timeout_ms})
        code = answer["responses"][0]["error_code"]
        if code != ErrorCode.NONE:
            return self._fail(code, args.topic)
        return 0


def _uuid(raw) -> str:
    import base64
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
