"""Raw requests the broker wire tests share: create a topic, produce a batch."""

from __future__ import annotations


def create_topic(wire, name: str, partitions: int = 1, configs=()) -> None:
    """CreateTopics v5 of one topic (``configs``: (name, value) pairs); it must succeed."""
    answer = wire.call(19, 5, {"topics": [{"name": name, "num_partitions": partitions,
                                           "replication_factor": 1,
                                           "configs": [{"name": k, "value": v}
                                                       for k, v in configs]}],
                               "timeout_ms": 5000})
    assert answer["topics"][0]["error_code"] == 0, answer


def produce(wire, topic: str, records, version: int = 9, acks: int = -1, partition: int = 0,
            transactional_id=None) -> dict:
    """Produce one record set to one partition; its partition answer."""
    answer = wire.call(0, version, {"transactional_id": transactional_id, "acks": acks,
                                    "timeout_ms": 5000,
                                    "topic_data": [{"name": topic, "partition_data": [
                                        {"index": partition, "records": records}]}]})
    return answer["responses"][0]["partition_responses"][0]
