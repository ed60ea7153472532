"""TLS and SASL (issue #26) on kcoord next to Apache Kafka 4.4, in the same run,
with the same clients: what SASL_SSL (TLS with a SCRAM-SHA-512 login) costs
next to PLAINTEXT on each broker.

kcoord runs as ``kcoord serve --dev-tls`` (its development CA and user); Kafka
4.4 gets a SASL_SSL listener with the same certificate (a PEM key store) and
the same SCRAM user.  kcoord is measured first, then Kafka, never both at once.

Figures per broker and listener:

* connection set-up: a new TCP connection to its first answered Metadata
  request, with (SASL_SSL) the TLS handshake, SaslHandshake and the SCRAM
  exchange in between (the same Python client for both brokers); median of
  ``CONNECTIONS`` after a few not counted;
* produce MB/s: ``MESSAGES`` records of 1 KiB with confluent-kafka (acks=1,
  linger 5 ms), from the first ``produce`` to ``flush`` returning;
* consume MB/s: the same records read back by a consumer assigned the
  partition from its start; best of ``REPEATS`` runs of each.

The ratio that matters is SASL_SSL over PLAINTEXT on each broker: the goal is
that TLS costs kcoord no more than it costs Kafka (kcoord's ratio at least
Kafka's for the rates, at most for the set-up time).  Kafka's figures are
reported unavailable, with the reason, without Java 17+ or Maven.
"""

from __future__ import annotations

import hashlib
import os
import ssl
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.bench_server import spawn_broker, stop_broker
from tests.reference import kafka

QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"
CONNECTIONS = 10 if QUICK else 100
MESSAGES = 2_000 if QUICK else 50_000
RECORD = 1024
REPEATS = 1 if QUICK else 3
USER, PASSWORD = "kcoord", "kcoord-secret"
TIMEOUT_S = 60


def _connect(port: int, context: ssl.SSLContext | None) -> tuple[float, float]:
    """Seconds from a new connection to its first Metadata answer, and of them the
    seconds the client spent computing its SCRAM messages (the salted password:
    PBKDF2 over the server's iteration count)."""
    from kafka.net.sasl.scram import ScramClient

    from kcoord.protocol.client import WireClient

    began = time.perf_counter()
    own = 0.0
    with WireClient("127.0.0.1", port, timeout=TIMEOUT_S, ssl_context=context) as client:
        if context is not None:
            assert client.call(17, 1, {"mechanism": "SCRAM-SHA-512"})["error_code"] == 0
            scram = ScramClient(USER, PASSWORD, "SCRAM-SHA-512")
            first = client.call(36, 2, {"auth_bytes": scram.first_message()})
            computing = time.perf_counter()
            scram.process_server_first_message(first["auth_bytes"])
            message = scram.final_message()
            own = time.perf_counter() - computing
            final = client.call(36, 2, {"auth_bytes": message})
            assert final["error_code"] == 0, final
        client.call(3, 1, {"topics": []})
    return time.perf_counter() - began, own


def _client_conf(port: int, ca: str | None) -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{port}"}
    if ca is not None:
        conf.update({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": USER, "sasl.password": PASSWORD,
                     "ssl.ca.location": ca})
    return conf


def _produce_consume(conf: dict) -> tuple[float, float]:
    """(produce MB/s, consume MB/s) of ``MESSAGES`` records to a new topic."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = f"bench-{uuid.uuid4().hex[:8]}"
    payload = b"x" * RECORD
    producer = Producer({**conf, "acks": 1, "linger.ms": 5})
    producer.produce(topic, payload)  # the topic is made and found before timing
    producer.flush(TIMEOUT_S)
    began = time.perf_counter()
    for _ in range(MESSAGES):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(TIMEOUT_S) == 0
    produce = MESSAGES * RECORD / (time.perf_counter() - began) / 1e6
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    began = time.perf_counter()
    deadline = began + TIMEOUT_S
    while got < MESSAGES + 1 and time.perf_counter() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                got += 1
    consume = got * RECORD / (time.perf_counter() - began) / 1e6
    consumer.close()
    return produce, consume


def _measure(ports: dict[str, int], ca: str) -> dict[str, dict[str, float]]:
    context = ssl.create_default_context(cafile=ca)
    figures = {}
    for listener, port in ports.items():
        tls = context if listener == "SASL_SSL" else None
        for _ in range(3):
            _connect(port, tls)  # not counted: first connections, code paths warming
        setups = [_connect(port, tls) for _ in range(CONNECTIONS)]
        runs = [_produce_consume(_client_conf(port, ca if tls else None))
                for _ in range(REPEATS)]
        figures[listener] = {"setup": statistics.median(s for s, _own in setups),
                             "client scram": statistics.median(own for _s, own in setups),
                             "produce": max(r[0] for r in runs),
                             "consume": max(r[1] for r in runs)}
    return figures


def _kcoord() -> dict:
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-") as data_dir:
        proc, event = spawn_broker(data_dir, "--dev-tls")
        try:
            listeners = event["listeners"]
            sasl_port = int(listeners["SASL_SSL"].split(" ")[0].rsplit(":", 1)[1])
            ca = str(Path(data_dir) / "dev-tls" / "ca.pem")
            return _measure({"PLAINTEXT": event["port"], "SASL_SSL": sasl_port}, ca)
        finally:
            stop_broker(proc)


def _kafka(certs: Path) -> dict:
    broker = kafka.KafkaBroker(kafka.MAIN_VERSION, listeners={"SASL_SSL": "SASL_SSL"}, extra={
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "broker.pem"),
    })
    broker.start()
    try:
        from kcoord.protocol.client import WireClient
        salt = os.urandom(16)
        salted = hashlib.pbkdf2_hmac("sha512", PASSWORD.encode(), salt, 4096)
        with WireClient.to(broker.bootstrap) as client:
            answer = client.call(51, 0, {"deletions": [], "upsertions": [
                {"name": USER, "mechanism": 2, "iterations": 4096, "salt": salt,
                 "salted_password": salted}]})
            assert answer["results"][0]["error_code"] == 0, answer
        time.sleep(1)  # the credential reaches the broker's metadata image
        return _measure({"PLAINTEXT": broker.port,
                         "SASL_SSL": broker.listener_port("SASL_SSL")}, str(certs / "ca.pem"))
    finally:
        broker.stop()


def run() -> None:
    from kcoord.broker.security import devcerts

    ours = _kcoord()
    missing = kafka.missing_requirements()
    theirs = None
    if missing:
        print(f"(Apache Kafka's figures unavailable: {missing})")
    else:
        kafka.resolve(kafka.MAIN_VERSION)
        with tempfile.TemporaryDirectory(prefix="kcoord-bench-certs-") as folder:
            theirs = _kafka(devcerts.ensure(Path(folder)))
    print(f"SASL_SSL (TLS + SCRAM-SHA-512) next to PLAINTEXT, kcoord and Apache Kafka "
          f"{kafka.MAIN_VERSION} (same machine, same run; cost = SASL_SSL / PLAINTEXT)")
    rows = [("connection to first answer", "setup", lambda v: f"{v * 1000:7.2f} ms"),
            (f"produce {MESSAGES:,} x 1 KiB", "produce", lambda v: f"{v:7.1f} MB/s"),
            (f"consume {MESSAGES:,} x 1 KiB", "consume", lambda v: f"{v:7.1f} MB/s")]
    for label, key, fmt in rows:
        for name, figures in (("kcoord", ours), ("Kafka", theirs)):
            if figures is None:
                continue
            plain, secured = figures["PLAINTEXT"][key], figures["SASL_SSL"][key]
            print(f"  {label:<28} {name:<6} PLAINTEXT {fmt(plain)}   SASL_SSL {fmt(secured)}"
                  f"   cost {secured / plain:5.2f}")
        if key == "setup":
            # What the client alone spends whatever the broker: a set-up cost
            # below it cannot be reached by any broker, fast or slow.
            own = ours["SASL_SSL"]["client scram"]
            plain = ours["PLAINTEXT"]["setup"]
            print(f"  {'':<28} of which the client's own SCRAM computation {own * 1000:.2f} ms"
                  f" (PBKDF2, the same for both brokers): a broker answering PLAINTEXT in "
                  f"{plain * 1000:.2f} ms has a cost of at least {(plain + own) / plain:.2f}")
    print()
