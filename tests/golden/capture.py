"""Regenerate the golden request frames: ``python -m tests.golden.capture``.

Starts a broker, records every request frame that confluent-kafka (librdkafka),
kafka-python and aiokafka send while they list, create and delete topics, and
writes one hex line per frame, prefixed by the client's name, to
``tests/golden/requests.txt``.
"""

from __future__ import annotations

import asyncio
import struct
import tempfile
from pathlib import Path

from kcoord.broker import server
from tests.support import BrokerThread

OUT = Path(__file__).with_name("requests.txt")


def main() -> None:
    frames: list[tuple[str, bytes]] = []
    current = {"client": "?"}
    original = server.KafkaConnection._handle

    def recording(self, frame):
        frames.append((current["client"], frame))
        return original(self, frame)

    server.KafkaConnection._handle = recording
    with tempfile.TemporaryDirectory() as tmp:
        node = BrokerThread(Path(tmp)).start()
        try:
            current["client"] = "librdkafka"
            from confluent_kafka.admin import AdminClient, NewTopic
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            admin.create_topics([NewTopic("golden-rd", 2)])["golden-rd"].result(10)
            admin.list_topics(timeout=10)
            admin.delete_topics(["golden-rd"])["golden-rd"].result(10)

            current["client"] = "kafka-python"
            from kafka.admin import KafkaAdminClient
            kp = KafkaAdminClient(bootstrap_servers=node.bootstrap)
            kp.create_topics({"golden-kp": {"num_partitions": 2, "replication_factor": 1}})
            kp.list_topics()
            kp.delete_topics(["golden-kp"])
            kp.close()

            current["client"] = "aiokafka"
            from aiokafka.admin import AIOKafkaAdminClient
            from aiokafka.admin import NewTopic as AioTopic

            async def aio():
                client = AIOKafkaAdminClient(bootstrap_servers=node.bootstrap)
                await client.start()
                await client.create_topics([AioTopic("golden-ak", 2, 1)])
                await client.list_topics()
                await client.delete_topics(["golden-ak"])
                await client.close()
            asyncio.run(aio())
        finally:
            node.stop()
            server.KafkaConnection._handle = original
    seen = set()
    lines = []
    for client, frame in frames:
        key = (client,) + struct.unpack_from(">hh", frame)
        if key in seen:
            continue
        seen.add(key)
        lines.append(f"{client} {frame.hex()}")
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} frames to {OUT}")


if __name__ == "__main__":
    main()
