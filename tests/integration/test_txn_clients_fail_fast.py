"""A transactional producer of each client fails at once against kcoord, which
serves no transactions (docs: Decisions): the error reaches the application
instead of the client retrying until its own timeout."""

from __future__ import annotations

import asyncio
import time

import pytest

# Far more than a refusal takes (tens of milliseconds), far less than the
# timeout handed to the client: a client that retries runs into the bound.
FAIL_FAST_S = 5.0
CLIENT_TIMEOUT_S = 15.0


def test_kafka_python_init_transactions_fails_fast(broker):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    began = time.monotonic()
    producer = None
    with pytest.raises(KafkaError) as caught:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-txn",
                                 max_block_ms=int(CLIENT_TIMEOUT_S * 1000))
        producer.init_transactions()
    took = time.monotonic() - began
    if producer is not None:
        producer.close(timeout=5)
    assert took < FAIL_FAST_S, took
    assert not caught.value.retriable, caught.value


def test_aiokafka_transactional_producer_fails_to_start(broker):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                    transactional_id="aio-txn")
        began = time.monotonic()
        try:
            with pytest.raises(KafkaError) as caught:
                await asyncio.wait_for(producer.start(), CLIENT_TIMEOUT_S)
            return time.monotonic() - began, caught.value
        finally:
            await producer.stop()

    took, error = asyncio.run(run())
    assert took < FAIL_FAST_S, (took, error)
    assert not error.retriable, error


def test_confluent_init_transactions_fails_fast_with_a_fatal_error(broker):
    from confluent_kafka import KafkaException, Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-txn"})
    began = time.monotonic()
    with pytest.raises(KafkaException) as caught:
        producer.init_transactions(CLIENT_TIMEOUT_S)
    took = time.monotonic() - began
    error = caught.value.args[0]
    assert took < FAIL_FAST_S, (took, error)
    assert error.fatal() and not error.retriable(), error
    # What the application sees tells why.
    assert "transactions are not supported" in error.str(), error
