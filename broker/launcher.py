"""Child-process brokers started in tens of milliseconds, not in the time an
interpreter takes to import kcoord.

``EmbeddedBroker(process=True)`` runs ``kcoord serve`` in a child process.  A
fresh interpreter spends most of its start importing Python and kcoord (about
90% of it); a test suite that starts a broker per test pays that every time.
The first such start in a program therefore starts a *launcher*: a small
process that imports everything ``kcoord serve`` runs, then waits.  Each broker
is then a fork of it, given its command line, environment, working directory
and output pipe, and runs ``kcoord serve`` exactly as the ``kcoord`` command
does from there: nothing is shared with the program that asked for it, and the
launcher holds no broker state (it never starts one itself).

The program and its launcher talk over a Unix socket pair, one message per
datagram (``SOCK_SEQPACKET``): a request carries the arguments as JSON and the
write end of the child's output pipe as an attached descriptor; the launcher
answers with the child's pid, and later with its exit status once it has
reaped it.  The launcher ignores Ctrl-C (the program it serves decides) and
exits when the program closes its end, whether it stops or dies; a broker still
running then is sent SIGTERM (Linux's parent-death signal) and stops as it does
on ``kill``, where a plain child process would be left running.

A launcher serves one interpreter and one set of ``PYTHON*`` variables (they
shape how an interpreter starts, so a change starts another launcher).  Only
Linux forks one: elsewhere a broker is a fresh ``kcoord serve`` process.
"""

from __future__ import annotations

import json
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

_MAX_MESSAGE = 1 << 20
_START_TIMEOUT_S = 60


def supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds") \
        and os.environ.get("KCOORD_EMBEDDED_FORK", "1") != "0"


# -- in the program that asks for brokers -------------------------------------------------

class Child:
    """A broker forked by the launcher, with the part of ``subprocess.Popen``
    that a caller uses: ``pid``, ``stdout``, ``poll``, ``wait``, ``send_signal``,
    ``terminate``, ``kill`` and ``returncode``."""

    def __init__(self, launcher: "Launcher", pid: int, stdout):
        self._launcher = launcher
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._exited = threading.Event()
        try:  # the process itself, whatever becomes of its pid, for when nobody reports
            self._pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None

    def _set_exit(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._exited.set()

    def poll(self) -> int | None:
        if self.returncode is None and not self._launcher.alive and self._gone():
            # Its launcher is gone, so nobody will report the status.
            self._set_exit(-1)
        return self.returncode

    def _gone(self) -> bool:
        if self._pidfd is not None:
            return bool(select.select([self._pidfd], [], [], 0)[0])
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        return False

    def __del__(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired(f"kcoord serve (pid {self.pid})", timeout)
            self._exited.wait(left)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Launcher:
    """The program's end of one launcher process."""

    def __init__(self, env: dict[str, str]):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kcoord.broker.launcher", str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, env=env)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        self._lock = threading.Lock()  # one request at a time: answers come in order
        self._answers: list[dict] = []
        self._answered = threading.Condition()
        self._children: dict[int, Child] = {}
        self._exits: dict[int, int] = {}  # exits reported before their Child was made
        self.alive = True
        self._reader = threading.Thread(target=self._read, name="kcoord-launcher", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                data = self._sock.recv(_MAX_MESSAGE)
                if not data:
                    break
                message = json.loads(data)
                if "exited" in message:
                    pid, code = message["exited"], message["code"]
                    with self._answered:
                        child = self._children.pop(pid, None)
                        if child is None:
                            self._exits[pid] = code
                    if child is not None:
                        child._set_exit(code)
                else:
                    with self._answered:
                        self._answers.append(message)
                        self._answered.notify_all()
        except OSError:
            pass
        finally:
            with self._answered:
                self.alive = False
                self._answered.notify_all()

    def spawn(self, args: list[str], env: dict[str, str], cwd: str) -> Child:
        """Fork a ``kcoord serve`` with these arguments (what follows ``kcoord``)."""
        read_end, write_end = os.pipe()
        try:
            with self._lock:
                request = json.dumps({"args": args, "env": env, "cwd": cwd}).encode()
                socket.send_fds(self._sock, [request], [write_end])
                with self._answered:
                    if not self._answered.wait_for(lambda: self._answers or not self.alive,
                                                   _START_TIMEOUT_S) or not self._answers:
                        # A late answer would be taken for the next request's: this
                        # launcher serves no more (it ends, and the next start makes one).
                        self._sock.shutdown(socket.SHUT_RDWR)
                        raise OSError("the kcoord launcher did not answer")
                    answer = self._answers.pop(0)
                    if "error" in answer:
                        raise OSError(f"the kcoord launcher could not fork: {answer['error']}")
                    child = Child(self, answer["pid"], None)
                    code = self._exits.pop(child.pid, None)
                    if code is None:
                        self._children[child.pid] = child
            if code is not None:
                child._set_exit(code)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        child.stdout = open(read_end, encoding="utf-8", errors="replace")
        return child


_launchers: dict[tuple, Launcher] = {}
_launchers_lock = threading.Lock()


def spawn(args: list[str], env: dict[str, str]) -> Child:
    """A ``kcoord serve`` child forked by this program's launcher for ``env``
    (started on first use, or again if it has gone)."""
    key = (os.getpid(), sys.executable,
           tuple(sorted((k, v) for k, v in env.items() if k.startswith("PYTHON"))))
    with _launchers_lock:
        launcher = _launchers.get(key)
        if launcher is None or not launcher.alive or launcher.proc.poll() is not None:
            launcher = _launchers[key] = Launcher(env)
    return launcher.spawn(args, env, os.getcwd())


# -- in the launcher ------------------------------------------------------------------------

_prctl = None  # libc's prctl, when there is one
_PR_SET_PDEATHSIG = 1


def _preload() -> None:
    """Import what ``kcoord serve`` runs, so that no fork imports it again."""
    import kcoord.broker.app  # noqa: F401
    import kcoord.broker.cli  # noqa: F401
    import kcoord.broker.meta  # noqa: F401
    import kcoord.broker.security.listeners  # noqa: F401
    from kcoord.broker import apis

    apis.load_handlers()
    try:
        import uvloop  # noqa: F401
    except ImportError:
        pass
    global _prctl
    try:
        import ctypes

        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        _prctl = None
    if threading.active_count() != 1:  # a fork would copy a thread's locks, never the thread
        raise RuntimeError("an import started a thread: brokers cannot be forked")


def _serve(sock: socket.socket) -> dict | None:
    """Answer requests until the program closes its end (None), or, in a forked
    child, return its request."""
    launcher_pid = os.getpid()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    # Between requests, the codecs a broker's first clients need are compiled
    # here, one at a time, so that every fork starts with them compiled.
    from kcoord.broker.apis import codecs_to_warm

    warming = iter(codecs_to_warm())
    try:
        while True:
            events = selector.select(0 if warming is not None else None)
            if not events and warming is not None:
                item = next(warming, None)
                if item is None:
                    warming = None
                    _freeze()
                else:
                    schema, version, direction = item
                    schema.codec(version, direction)
                continue
            for key, _ in events:
                if key.fileobj is sock:
                    data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, 1)
                    if not data:
                        return None
                    request = json.loads(data)
                    try:
                        pid = os.fork()
                    except OSError as exc:
                        for fd in fds:
                            os.close(fd)
                        sock.send(json.dumps({"error": str(exc)}).encode())
                        continue
                    if pid == 0:
                        selector.close()
                        sock.close()
                        signal.set_wakeup_fd(-1)
                        os.close(wake_read)
                        os.close(wake_write)
                        request["fd"] = fds[0]
                        request["launcher"] = launcher_pid
                        return request
                    for fd in fds:
                        os.close(fd)
                    sock.send(json.dumps({"pid": pid}).encode())
                else:
                    try:
                        while os.read(wake_read, 512):
                            pass
                    except BlockingIOError:
                        pass
                    _report_exits(sock)
    finally:
        selector.close()


def _report_exits(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.send(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def _become_broker(request: dict) -> int:
    """In a forked child: become ``kcoord serve`` with the request's arguments,
    environment, working directory and output."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # The launcher ends when the program does, even one that died: its brokers are
    # then stopped as by ``kill`` rather than left running with nobody to stop them.
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != request["launcher"]:
            os.kill(os.getpid(), signal.SIGTERM)
    fd = request["fd"]
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace",
                      closefd=False)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = ["kcoord", *request["args"]]
    from kcoord.broker import cli

    return cli.main(request["args"])


def _freeze() -> None:
    import gc

    gc.collect()
    gc.freeze()  # the objects so far stay shared with every fork, untouched


def main() -> int:
    sock = socket.socket(fileno=int(sys.argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.chdir("/")  # each broker is given its own
    _preload()
    _freeze()
    try:
        request = _serve(sock)
    except OSError:  # the program went away mid-answer
        return 0
    if request is None:
        return 0
    return _become_broker(request)


if __name__ == "__main__":
    sys.exit(main())
