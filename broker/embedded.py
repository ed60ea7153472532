"""kcoord inside a program: a broker that a test suite or a script starts and stops.

``EmbeddedBroker`` runs one broker either in this process, on its own thread
and event loop (the fastest to start, and the test can reach into it), or as a
``kcoord serve`` child process (as a user runs it: nothing shared with the
program; on Linux forked from a launcher that has imported kcoord once, so
that it is ready in tens of milliseconds: ``broker.launcher``).  Either way it
listens on 127.0.0.1 and a free port unless told otherwise, keeps its data in a
temporary directory that goes with it unless given one, and is ready to serve
when ``start()`` returns or its context is entered::

    with EmbeddedBroker() as kafka:
        producer = Producer({"bootstrap.servers": kafka.bootstrap})

    async with EmbeddedBroker(process=True) as kafka:
        ...

``overrides`` sets broker properties (``{"num.partitions": 3}``);
``kafka_defaults=True`` uses Kafka's own defaults instead of kcoord's
development defaults (``kcoord serve --kafka-defaults``).

An in-process broker logs through structlog as the program configured it; in a
program that has not, its warnings and errors go to stderr (nothing to stdout).
A child process's log is kept in ``events``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import structlog

from kcoord.broker import launcher, logs
from kcoord.broker.config import BrokerConfig

log = structlog.get_logger("kcoord.embedded")

START_TIMEOUT_S = 30


class EmbeddedBroker:
    def __init__(self, data_dir: str | os.PathLike | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, overrides: dict | None = None, kafka_defaults: bool = False,
                 process: bool = False, own_process: bool = False):
        """``own_process`` (in-process only): the broker may take over the
        interpreter's full garbage collections, as ``kcoord serve`` does; a
        broker embedded in a test suite leaves them alone."""
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} is outside 0-65535")
        self.host = host
        self.port = port
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.kafka_defaults = kafka_defaults
        self.process = process
        self.own_process = own_process
        self._given_dir = data_dir
        self._temp: tempfile.TemporaryDirectory | None = None
        self.data_dir: Path | None = Path(data_dir) if data_dir is not None else None
        self.config: BrokerConfig | None = None
        self.broker = None  # the Broker, in-process only
        self.loop: asyncio.AbstractEventLoop | None = None
        self.proc: subprocess.Popen | launcher.Child | None = None
        self._said_started = False  # the child logged broker.started
        self.events: list[dict] = []  # the child's log events, as a subprocess
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    # -- the address -------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``host:port`` for a client's ``bootstrap.servers``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def running(self) -> bool:
        if self.process:
            return self.proc is not None and self.proc.poll() is None
        return self._thread is not None and self._thread.is_alive() and self.broker is not None

    # -- starting and stopping ----------------------------------------------------------

    def start(self) -> "EmbeddedBroker":
        if self._thread is not None or self.proc is not None:
            raise RuntimeError("this broker was already started")
        if self._given_dir is None:
            self._temp = tempfile.TemporaryDirectory(prefix="kcoord-")
            self.data_dir = Path(self._temp.name)
        try:
            self._start_subprocess() if self.process else self._start_thread()
        except BaseException:
            self._cleanup()
            raise
        return self

    def stop(self) -> None:
        try:
            if self.process:
                self._stop_subprocess()
            else:
                self._stop_thread()
        finally:
            self._cleanup()

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    async def __aenter__(self) -> "EmbeddedBroker":
        # Started from a worker thread: the caller's event loop keeps running.
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc) -> None:
        await asyncio.to_thread(self.stop)

    def _cleanup(self) -> None:
        if self._temp is not None:
            self._temp.cleanup()
            self._temp = None

    # -- in this process -------------------------------------------------------------------

    def _start_thread(self) -> None:
        if not structlog.is_configured():
            logs.configure("console", "warning")
        props = {"listeners": f"PLAINTEXT://{self._bracketed()}:{self.port}",
                 "log.dirs": str(self.data_dir), **self.overrides}
        self.config = BrokerConfig.build(props, kafka_defaults=self.kafka_defaults)
        self._thread = threading.Thread(target=self._run, name="kcoord-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise RuntimeError(f"the broker did not start within {START_TIMEOUT_S} s")
        if self._error is not None:
            self._thread.join(START_TIMEOUT_S)
            self._thread = None
            raise self._error

    def _run(self) -> None:
        self.loop = _new_loop()
        try:
            self.loop.run_until_complete(self._main())
        finally:
            self.loop.close()

    async def _main(self) -> None:
        from kcoord.broker.app import Broker

        self._stop = asyncio.Event()
        broker = Broker(self.config, own_process=self.own_process)
        try:
            await broker.start()
        except BaseException as exc:  # raised again by start() in the caller's thread
            self._error = exc
            self._ready.set()
            return
        self.broker = broker
        self.port = broker.port
        self._ready.set()
        await self._stop.wait()
        await broker.stop()

    def _stop_thread(self) -> None:
        thread = self._thread
        if thread is None:
            return
        if thread.is_alive() and self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        thread.join(START_TIMEOUT_S)

    def _bracketed(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    # -- as a child process --------------------------------------------------------------

    def _start_subprocess(self) -> None:
        args = ["serve", "--host", self.host, "--port", str(self.port),
                "--data-dir", str(self.data_dir), "--log-format", "json"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        if self.kafka_defaults:
            args.append("--kafka-defaults")
        env = _child_environment()
        if launcher.supported():
            try:
                self.proc = launcher.spawn(args, env)  # forked: kcoord is imported there
            except OSError as exc:
                log.warning("embedded.launcher_failed", error=str(exc))
        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, "-m", "kcoord.broker.cli", *args],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True, env=env)
        self._thread = threading.Thread(target=self._read, name="kcoord-broker-log",
                                        daemon=True)
        self._thread.start()
        # Started only once it said so: the pipe's end (a child that failed) also
        # ends the wait, possibly before the child can be seen to have exited.
        if not self._ready.wait(START_TIMEOUT_S) or not self._said_started \
                or self.proc.poll() is not None:
            self._kill()
            said = "; ".join(str(e.get("error") or e.get("line") or e.get("event"))
                             for e in self.events[-5:])
            raise RuntimeError(f"kcoord serve did not start: {said or 'no output'}")

    def _read(self) -> None:
        """The child's log, one JSON event per line, kept; the pipe is drained to
        the end so that the child never blocks on a full pipe."""
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "output", "line": line.rstrip()}
            self.events.append(event)
            if event.get("event") == "broker.started":
                self.port = event["port"]
                self._said_started = True
                self._ready.set()
        self._ready.set()  # it exited

    def _stop_subprocess(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._kill()
        self._thread.join(5)
        self.proc.stdout.close()

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _child_environment() -> dict[str, str]:
    """The child imports the same kcoord as this process.  Where this process
    found ``kcoord`` as a folder on its path (an installed wheel, or a copy made
    for mutation testing), that folder's parent goes first on the child's
    PYTHONPATH; an editable install finds it through the interpreter's own
    site-packages, and a clone that happens to be named ``kcoord`` is not put on
    the path (its parent's other files would shadow modules in the child)."""
    package = Path(__file__).absolute().parent.parent
    env = dict(os.environ)
    found_at = {os.path.abspath(p) for p in getattr(sys.modules.get("kcoord"), "__path__", ())}
    if str(package) in found_at:
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(package.parent) + (os.pathsep + path if path else "")
    return env
