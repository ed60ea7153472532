"""Pytest fixtures for the Apache Kafka reference (registered in ``tests/conftest.py``).

``reference_kafka`` is Kafka 4.x (the main reference), ``reference_kafka_legacy``
Kafka 3.9 (the reference for the versions 4.x dropped and for the answers kcoord
follows outside the coordinator). Both are started once per test run, together,
the first time either is asked for, and stopped at the end of the run.

Without Java 17+ or Maven the tests that use them skip with one line naming what
is missing, unless ``KCOORD_REQUIRE_REFERENCE=1`` (set by ``.ci/run``): then they
fail, so that CI never passes without having asked Kafka.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from kcoord.protocol.client import WireClient
from tests.reference import kafka
from tests.support import BrokerThread


def _unavailable(reason: str):
    if os.environ.get("KCOORD_REQUIRE_REFERENCE") == "1":
        pytest.fail(f"{reason} (KCOORD_REQUIRE_REFERENCE=1)", pytrace=False)
    pytest.skip(reason)


def start_reference(**kwargs) -> kafka.KafkaBroker:
    """A Kafka 4.x of a module's own (``KafkaBroker``'s arguments), started;
    skipped, or failed under KCOORD_REQUIRE_REFERENCE, without Java or Maven."""
    missing = kafka.missing_requirements()
    if missing:
        _unavailable(missing)
    broker = kafka.KafkaBroker(kafka.MAIN_VERSION, **kwargs)
    try:
        return broker.start()
    except kafka.ReferenceUnavailable as exc:
        _unavailable(str(exc).splitlines()[0])


@contextlib.contextmanager
def own_pair(data_dir: Path, overrides: dict):
    """A Differential between a kcoord (data in ``data_dir``) and a Kafka 4.x of a
    module's own, both given ``overrides``; both stopped at the end."""
    from tests.reference.differential import Differential

    reference = start_reference(extra=overrides)
    ours = None
    try:
        ours = BrokerThread(data_dir, overrides).start()
        yield Differential(ours.bootstrap, reference.bootstrap, f"Kafka {reference.version}")
    finally:
        if ours is not None:
            ours.stop()
        reference.stop()


def create_offsets_topic(broker, timeout: float = 60) -> None:
    """Ask for a group coordinator until Kafka (``broker``: anything with its
    ``bootstrap``) has created ``__consumer_offsets``.

    kcoord lists ``__consumer_offsets`` from its first start (docs/deviations.md);
    a Kafka that has already created it answers every topic listing the same way.
    """
    deadline = time.monotonic() + timeout
    with WireClient.to(broker.bootstrap) as client:
        while time.monotonic() < deadline:
            answer = client.call(10, 1, {"key": "kcoord-reference", "key_type": 0})
            if answer["error_code"] == 0:
                return
            time.sleep(0.1)
    raise RuntimeError("Kafka did not create __consumer_offsets in time")


class ReferencePool:
    """Both reference brokers, started in parallel on first use."""

    def __init__(self):
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kafka-start")
        self._futures: dict[str, Future] = {}
        self._missing = kafka.missing_requirements()

    def get(self, version: str) -> kafka.KafkaBroker:
        if self._missing:
            _unavailable(self._missing)
        if version not in self._futures:
            for v in (kafka.MAIN_VERSION, kafka.LEGACY_VERSION):
                if v not in self._futures:
                    self._futures[v] = self._executor.submit(self._start, v)
        try:
            return self._futures[version].result()
        except kafka.ReferenceUnavailable as exc:
            _unavailable(str(exc).splitlines()[0])

    def scratch(self) -> kafka.KafkaBroker:
        """A third broker (Kafka 4.x) started on first use, for tests that change a
        Kafka without a kcoord beside it: the paired references keep seeing only
        what their kcoord sees."""
        if self._missing:
            _unavailable(self._missing)
        if "scratch" not in self._futures:
            self._futures["scratch"] = self._executor.submit(self._start, kafka.MAIN_VERSION)
        try:
            return self._futures["scratch"].result()
        except kafka.ReferenceUnavailable as exc:
            _unavailable(str(exc).splitlines()[0])

    @staticmethod
    def _start(version: str) -> kafka.KafkaBroker:
        broker = kafka.KafkaBroker(version).start()
        try:
            create_offsets_topic(broker)
        except BaseException:
            broker.stop()
            raise
        return broker

    def stop(self) -> None:
        self._executor.shutdown(wait=True)
        for future in self._futures.values():
            if future.exception() is None:
                future.result().stop()


@pytest.fixture(scope="session")
def _reference_pool():
    pool = ReferencePool()
    yield pool
    pool.stop()


@pytest.fixture(scope="session")
def reference_kafka(_reference_pool) -> kafka.KafkaBroker:
    """Apache Kafka 4.x, the main reference, with kcoord's development defaults."""
    return _reference_pool.get(kafka.MAIN_VERSION)


@pytest.fixture(scope="session")
def scratch_kafka(_reference_pool) -> kafka.KafkaBroker:
    """Apache Kafka 4.x for tests that create topics and groups on Kafka alone (a
    listing of every topic on ``reference_kafka`` must stay what its kcoord partner
    lists)."""
    return _reference_pool.scratch()


@pytest.fixture(scope="session")
def reference_kafka_legacy(_reference_pool) -> kafka.KafkaBroker:
    """Apache Kafka 3.9, for the versions 4.x no longer serves."""
    return _reference_pool.get(kafka.LEGACY_VERSION)


@pytest.fixture(scope="session")
def reference_pair(request, tmp_path_factory):
    """``reference_pair("main" | "legacy")``: (kcoord, Kafka) started for the whole run.

    Each reference Kafka has a kcoord of its own beside it that lives as long as
    it does, so that both have seen the same requests since they started (a
    listing of every topic is then the same on both)."""
    partners: dict[str, BrokerThread] = {}

    def get(which: str) -> tuple[BrokerThread, kafka.KafkaBroker]:
        reference = request.getfixturevalue(
            "reference_kafka" if which == "main" else "reference_kafka_legacy")
        if which not in partners:
            # node.id set as the reference's server.properties sets it (Kafka's KRaft
            # mode requires it), so that both report it as a static broker config.
            # Kafka 4.x serves the consumer group protocol (KIP-848) by default, as
            # kcoord does; 3.9 only previews it (v0): the kcoord beside it does not.
            overrides = dict(kafka.KCOORD_STATIC_PROPERTIES)
            if which != "main":
                overrides["group.coordinator.rebalance.protocols"] = "classic"
            partners[which] = BrokerThread(tmp_path_factory.mktemp(f"kcoord-{which}"),
                                           overrides).start()
        return partners[which], reference

    yield get
    for partner in partners.values():
        partner.stop()


@pytest.fixture
def diff(reference_pair):
    """``diff("main" | "legacy")``: a ``Differential`` between that reference Kafka
    and the kcoord beside it (a test module may define a ``diff`` of its own)."""
    from tests.reference.differential import Differential

    def make(which: str) -> Differential:
        kcoord, ref = reference_pair(which)
        return Differential(kcoord.bootstrap, ref.bootstrap, f"Kafka {ref.version}")
    return make


def compiled_java(source: Path, into: Path, javac: str | None = None,
                  resolve=kafka.resolve) -> str:
    """``source`` compiled against Kafka 4.x's jars (``resolve``: the broker's, or
    ``kafka.resolve_connect``, Connect's runtime) into ``into``: the classpath to
    run it with. Skips (or fails, under KCOORD_REQUIRE_REFERENCE) without Java,
    Maven or a javac; fails the test if the source does not compile."""
    missing = kafka.missing_requirements()
    if missing:
        _unavailable(missing)
    javac = javac or shutil.which("javac")
    if javac is None or not Path(javac).exists():
        _unavailable(f"{source.name} needs javac (a JDK, not only a JRE)")
    try:
        libs = resolve(kafka.MAIN_VERSION)
    except kafka.ReferenceUnavailable as exc:
        _unavailable(str(exc).splitlines()[0])
    built = subprocess.run([javac, "-nowarn", "-d", str(into), "-cp", str(libs / "*"),
                            str(source)], capture_output=True, text=True, timeout=300)
    if built.returncode != 0:
        pytest.fail(f"{source.name} does not compile:\n{built.stdout}{built.stderr}")
    return f"{into}{os.pathsep}{libs / '*'}"
