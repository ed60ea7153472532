"""``kafka-configs`` for client quotas, run against kcoord and against Kafka 4.4
(PLAINTEXT, no authorizer): the same commands give the same output."""

from __future__ import annotations

import uuid

from tests.reference import kafka

CONFIGS = "org.apache.kafka.tools.ConfigCommand"


def _session(bootstrap: str, user: str, client: str) -> list:
    server = ("--bootstrap-server", bootstrap)

    def run(*args):
        done = kafka.run_tool(CONFIGS, *server, *args)
        return done.returncode, done.stdout.strip(), done.stderr.strip().splitlines()[-1:]

    return [
        run("--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
            "producer_byte_rate=1024,consumer_byte_rate=2048"),
        run("--alter", "--entity-type", "users", "--entity-name", user, "--entity-type",
            "clients", "--entity-name", client, "--add-config", "request_percentage=50"),
        run("--alter", "--entity-type", "clients", "--entity-default", "--add-config",
            "producer_byte_rate=4096"),
        run("--describe", "--entity-type", "users", "--entity-name", user),
        run("--describe", "--entity-type", "users", "--entity-name", user, "--entity-type",
            "clients", "--entity-name", client),
        run("--describe", "--entity-type", "clients", "--entity-default"),
        run("--alter", "--entity-type", "users", "--entity-name", user, "--delete-config",
            "consumer_byte_rate"),
        run("--describe", "--entity-type", "users", "--entity-name", user),
        run("--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
            "producer_byte_rate=-5"),
        run("--alter", "--entity-type", "clients", "--entity-default", "--delete-config",
            "producer_byte_rate"),
    ]


def test_kafka_configs_sets_and_describes_quotas_as_on_kafka(make_broker, scratch_kafka):
    user, client = f"u-{uuid.uuid4().hex[:6]}", f"c-{uuid.uuid4().hex[:6]}"
    ours = _session(make_broker().bootstrap, user, client)
    theirs = _session(scratch_kafka.bootstrap, user, client)
    assert "producer_byte_rate=1024.0" in ours[3][1] and "consumer_byte_rate=2048.0" in ours[3][1]
    assert "request_percentage=50.0" in ours[4][1]
    assert "consumer_byte_rate" not in ours[7][1]
    assert ours == theirs
