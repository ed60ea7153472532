"""Child-process brokers forked by the launcher (``broker.launcher``): each a full
``kcoord serve`` of its own, started from the program's working directory and
environment of the moment, its exit seen by the program, and none left behind
by a program that dies or a launcher that goes away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from kcoord.broker import launcher
from kcoord.broker.embedded import EmbeddedBroker
from kcoord.broker.testing import Kcoord

pytestmark = pytest.mark.skipif(
    not launcher.supported(),
    reason="no forking launcher here: Linux only, and off under KCOORD_EMBEDDED_FORK=0")


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def _gone(pid: int, within: float = 20.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def _topics(bootstrap: str) -> list[str]:
    with Kcoord(bootstrap) as kafka:
        return sorted(kafka.list_topics())


def test_brokers_are_forks_of_one_launcher_each_serving_its_own_data():
    with EmbeddedBroker(process=True) as one, EmbeddedBroker(process=True) as two:
        assert isinstance(one.proc, launcher.Child)
        assert _parent(one.proc.pid) == _parent(two.proc.pid) != os.getpid()
        with Kcoord(one.bootstrap) as a, Kcoord(two.bootstrap) as b:
            assert a.produce(a.create_topic("only-here"), [b"x", b"y"]) == [0, 1]
            assert b.produce(b.create_topic("there"), [b"z"]) == [0]
        assert one.data_dir != two.data_dir
        assert [e for e in one.events if e.get("event") == "broker.started"]
    assert one.proc.returncode == 0 and two.proc.returncode == 0  # stopped by SIGTERM, cleanly


def test_a_relative_data_dir_is_found_from_the_working_directory_of_each_start(
        tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.chdir(first)
    with EmbeddedBroker("store", process=True) as broker, Kcoord(broker.bootstrap) as kafka:
        kafka.create_topic("made-in-first")
    monkeypatch.chdir(second)
    with EmbeddedBroker("store", process=True) as broker:
        assert "made-in-first" not in _topics(broker.bootstrap)
    assert any(p.name.startswith("made-in-first") for p in (first / "store").iterdir())
    assert (second / "store").is_dir()


def test_a_killed_broker_is_seen_as_exited_with_its_signal():
    broker = EmbeddedBroker(process=True).start()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            broker.proc.wait(0.1)  # running: a wait with a bound says so
        assert broker.proc.poll() is None
        broker.proc.send_signal(signal.SIGKILL)
        assert broker.proc.wait(10) == -signal.SIGKILL
        assert not broker.running
    finally:
        broker.stop()


def test_a_launcher_that_goes_stops_its_brokers_and_the_next_start_makes_another():
    broker = EmbeddedBroker(process=True).start()
    try:
        old = next(v for k, v in launcher._launchers.items() if k[0] == os.getpid())
        assert old.proc.pid == _parent(broker.proc.pid)
        old.proc.kill()
        old.proc.wait(10)
        assert broker.proc.wait(30) is not None and not broker.running  # told SIGTERM
        with EmbeddedBroker(process=True) as again, Kcoord(again.bootstrap) as kafka:
            assert _parent(again.proc.pid) not in (old.proc.pid, os.getpid())
            assert kafka.produce(kafka.create_topic("after"), [b"x"]) == [0]
    finally:
        broker.stop()
    assert _gone(broker.proc.pid)


def test_a_broker_that_cannot_start_says_why_at_once_with_its_exit_status():
    for _ in range(3):  # its exit may be reported before or after its pid is known
        broker = EmbeddedBroker(process=True, overrides={"num.partitions": 0})
        began = time.monotonic()
        with pytest.raises(RuntimeError, match="num.partitions"):
            broker.start()
        assert time.monotonic() - began < 10
        assert broker.proc.wait(10) == 2 and not broker.running


def test_other_python_variables_start_another_launcher(monkeypatch):
    with EmbeddedBroker(process=True) as first:
        monkeypatch.setenv("PYTHONWARNINGS", "default")  # how an interpreter starts
        with EmbeddedBroker(process=True) as second, Kcoord(second.bootstrap) as kafka:
            assert _parent(second.proc.pid) not in (_parent(first.proc.pid), os.getpid())
            assert kafka.produce(kafka.create_topic("t"), [b"x"]) == [0]


def test_without_forking_a_broker_is_a_fresh_kcoord_serve(monkeypatch):
    monkeypatch.setenv("KCOORD_EMBEDDED_FORK", "0")
    with EmbeddedBroker(process=True) as broker, Kcoord(broker.bootstrap) as kafka:
        assert isinstance(broker.proc, subprocess.Popen)
        assert _parent(broker.proc.pid) == os.getpid()
        assert kafka.produce(kafka.create_topic("t"), [b"x"]) == [0]
    assert broker.proc.returncode == 0


_DYING_PROGRAM = textwrap.dedent("""
    import os, sys
    from kcoord.broker.embedded import EmbeddedBroker
    broker = EmbeddedBroker(process=True).start()
    print(broker.proc.pid, flush=True)
    sys.stdin.readline()
    os._exit(0)  # no stop, no clean-up: as a program that crashed
""")


def test_a_program_that_dies_leaves_no_broker_running(tmp_path):
    program = subprocess.Popen([sys.executable, "-c", _DYING_PROGRAM], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        pid = int(program.stdout.readline())
        assert not _gone(pid, within=0.2)
        program.stdin.write("\n")
        program.stdin.flush()
        assert program.wait(30) == 0
        assert _gone(pid)
    finally:
        program.kill()
        program.wait(10)
