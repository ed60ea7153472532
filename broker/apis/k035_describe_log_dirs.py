"""DescribeLogDirs (key 35), versions 1-5: the one log directory (the data
dir) with the size of each partition asked for (``topics`` null: every
partition), as a one-node Kafka answers it: offset lag 0 (no replica to
catch up), no future replicas, and from v4 the file system's total and
usable bytes.  Unknown topics and partitions are left out, as Kafka leaves
them out; every partition of ``__consumer_offsets`` is listed, those never
written to with size 0, as Kafka lists the empty logs it made with the topic;
an offline log dir answers KAFKA_STORAGE_ERROR."""

from __future__ import annotations

import os

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import CLUSTER, DESCRIBE, allowed
from kcoord.protocol.errors import ErrorCode


@api(key=35, versions=(1, 5))
def describe_log_dirs(ctx, request):
    broker = ctx.broker
    if not allowed(ctx, DESCRIBE, CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results": []}
    logs = broker.logs
    wanted: dict[str, set[int] | None] = {}
    if request.topics is None:
        wanted = {name: None for name in broker.topics.topic_names()}
    else:
        for t in request.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    topics = []
    for name, partitions in wanted.items():
        topic = broker.topics.get(name)
        if topic is None:
            continue
        indexes = range(topic.partitions) if partitions is None else \
            sorted(p for p in partitions if 0 <= p < topic.partitions)
        found = []
        for p in indexes:
            plog = logs.get(name, p) if logs is not None else None
            # A __consumer_offsets partition never written has no folder yet
            # (it is made on the first write); Kafka made its empty log with
            # the topic.
            found.append({"partition_index": p,
                          "partition_size": plog.size_bytes if plog is not None else 0,
                          "offset_lag": 0, "is_future_key": False})
        if found:
            topics.append({"name": name, "partitions": found})
    result = {"error_code": ErrorCode.NONE, "log_dir": os.path.abspath(str(broker.data_dir)),
              "topics": topics}
    if logs is not None and getattr(logs, "offline", False):
        result = {"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": result["log_dir"],
                  "topics": []}
    if ctx.api_version >= 4:
        try:
            stats = os.statvfs(result["log_dir"])
            result["total_bytes"] = stats.f_blocks * stats.f_frsize
            result["usable_bytes"] = stats.f_bavail * stats.f_frsize
        except OSError:
            pass  # answered -1, unknown
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": [result]}
