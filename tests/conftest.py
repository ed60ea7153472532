from __future__ import annotations

import pytest

from kcoord.broker import logs
from tests.support import BrokerThread

logs.configure("console", "warning")

pytest_plugins = ["tests.reference.fixtures"]

# An example suite that uses nothing but the installed pytest plugin: run on its
# own, without this file, by tests/test_pytest_plugin.py.
collect_ignore = ["plugin_suite"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A broker shared by the tests of one module (development defaults)."""
    node = BrokerThread(tmp_path_factory.mktemp("broker-data")).start()
    yield node
    node.stop()


@pytest.fixture
def make_broker(tmp_path):
    """Start brokers with their own data dir and settings; all stopped at the end."""
    started: list[BrokerThread] = []

    def start(data_dir=None, **kwargs):
        node = BrokerThread(data_dir or tmp_path / f"data-{len(started)}", **kwargs).start()
        started.append(node)
        return node

    yield start
    for node in started:
        node.stop()
