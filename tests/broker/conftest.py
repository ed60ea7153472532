"""Fixtures of the broker tests."""

from __future__ import annotations

import pytest

from kcoord.protocol.client import WireClient


@pytest.fixture
def wire(broker):
    """A raw connection to the shared broker."""
    with WireClient.to(broker.bootstrap, client_id="wire-tests") as client:
        yield client
