"""kcoord as a pytest fixture (registered by the ``pytest11`` entry point:
installing kcoord is enough, no ``conftest.py`` needed).

Fixtures:

* ``kcoord``: a ``broker.testing.Kcoord`` for this test, on a broker the whole
  session shares (started on first use, in this process, on a free loopback
  port, data in a temporary directory).  Topics and groups it names
  (``create_topic``, ``group``) are this test's own.  ``kcoord.bootstrap`` is
  what clients connect to.
* ``kcoord_factory``: ``kcoord_factory(**options)`` starts a fresh broker for
  this test alone (``EmbeddedBroker`` options: ``overrides``,
  ``kafka_defaults``, ``process``) and returns its ``Kcoord``; stopped when the
  test ends.
* ``kcoord_broker``: the session's ``EmbeddedBroker`` itself.

Kafka's own defaults instead of kcoord's development defaults (a 3 s initial
rebalance delay, Kafka's segment sizes): ``pytest --kcoord-kafka-defaults`` for
the session broker, or ``@pytest.mark.kcoord_kafka_defaults`` for one test
(its ``kcoord`` is then a broker of its own).  Under pytest-xdist every worker
has its own session broker.
"""

from __future__ import annotations

import pytest

from kcoord.broker.embedded import EmbeddedBroker
from kcoord.broker.testing import Kcoord

MARKER = "kcoord_kafka_defaults"


def pytest_addoption(parser) -> None:
    group = parser.getgroup("kcoord")
    group.addoption("--kcoord-kafka-defaults", action="store_true", default=False,
                    help="run the session's kcoord broker with Kafka's own defaults "
                         "instead of kcoord's development defaults")


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}: this test's kcoord broker uses Kafka's own defaults "
                   "(a broker of its own, started for the test)")


@pytest.fixture(scope="session")
def kcoord_broker(pytestconfig):
    """The broker this session's tests share."""
    broker = EmbeddedBroker(kafka_defaults=pytestconfig.getoption("kcoord_kafka_defaults"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def kcoord_factory(request):
    """``kcoord_factory(**EmbeddedBroker options)``: a fresh broker for this test."""
    started: list[tuple[EmbeddedBroker, Kcoord]] = []

    def start(**options) -> Kcoord:
        broker = EmbeddedBroker(**options).start()
        handle = Kcoord(broker.bootstrap, prefix=_test_name(request), broker=broker)
        started.append((broker, handle))
        return handle

    yield start
    for broker, handle in reversed(started):
        handle.close()
        broker.stop()


@pytest.fixture
def kcoord(request):
    """This test's handle on a kcoord broker: the session's, or one of its own
    under the ``kcoord_kafka_defaults`` marker."""
    if request.node.get_closest_marker(MARKER) is not None \
            and not request.config.getoption("kcoord_kafka_defaults"):
        handle = request.getfixturevalue("kcoord_factory")(kafka_defaults=True)
        yield handle
        return
    broker = request.getfixturevalue("kcoord_broker")
    handle = Kcoord(broker.bootstrap, prefix=_test_name(request), broker=broker)
    yield handle
    handle.close()


def _test_name(request) -> str:
    return request.node.name
