"""Request frames captured from the real clients (tests/golden/requests.txt, made by
``python -m tests.golden.capture``) decode with our codec to what the clients meant,
and re-encode to the same bytes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kcoord.protocol.headers import request_header_codec
from kcoord.protocol.messages import ALL_APIS

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "requests.txt"
FRAMES = [line.split(" ", 1) for line in GOLDEN.read_text().splitlines() if line.strip()]


def _decode(hex_frame: str):
    frame = bytes.fromhex(hex_frame)
    api_key = int.from_bytes(frame[0:2], "big", signed=True)
    version = int.from_bytes(frame[2:4], "big", signed=True)
    schema = ALL_APIS[api_key]
    flexible = schema.is_flexible(version)
    stream = io.BytesIO(frame)
    header = request_header_codec(2 if flexible else 1).read(stream)
    body_start = stream.tell()
    body = schema.codec(version, "request").read(stream)
    assert stream.tell() == len(frame), "trailing bytes after the body"
    return schema, version, header, body, frame[body_start:]


@pytest.mark.parametrize("client,hex_frame", FRAMES, ids=[f"{c}-{h[:8]}" for c, h in FRAMES])
def test_golden_frame_round_trips(client, hex_frame):
    schema, version, header, body, raw_body = _decode(hex_frame)
    assert schema.codec(version, "request").encode(body) == raw_body
    assert header.client_id  # every client names itself


def _by(client, api_key):
    for c, h in FRAMES:
        if c == client and int(h[:4], 16) == api_key:
            return _decode(h)
    raise AssertionError(f"no {client} frame for api {api_key}")


def test_librdkafka_frames_mean_what_it_sent():
    _s, version, header, body, _ = _by("librdkafka", 18)
    assert version == 3 and header.client_id == "rdkafka"
    assert body.client_software_name == "confluent-kafka-python"
    _s, version, _h, body, _ = _by("librdkafka", 19)
    (topic,) = body.topics
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("golden-rd", 2, -1)
    _s, _v, _h, body, _ = _by("librdkafka", 20)
    assert body.topic_names == ["golden-rd"]


def test_kafka_python_frames_mean_what_it_sent():
    _s, version, _h, body, _ = _by("kafka-python", 18)
    assert version == 4 and body.client_software_name == "kafka-python"
    _s, _v, _h, body, _ = _by("kafka-python", 19)
    assert [(t.name, t.num_partitions, t.replication_factor) for t in body.topics] == [
        ("golden-kp", 2, 1)]


def test_aiokafka_frames_mean_what_it_sent():
    _s, version, _h, _b, _ = _by("aiokafka", 18)
    assert version == 0
    _s, _v, _h, body, _ = _by("aiokafka", 20)
    assert body.topic_names == ["golden-ak"]
