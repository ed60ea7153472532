"""The pipeline on a Spark cluster, for real: a standalone master and a worker
started from the installed PySpark on loopback, and ``kcoord pipeline`` run with
``--master spark://...`` in a process of its own, as a user runs it.  Its driver
and the cluster's executors are separate JVMs, its Python workers run on the
executors: the offsets it writes are those the live broker answers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.reference.fixtures import _unavailable

pytestmark = pytest.mark.timeout(300)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``spark://127.0.0.1:PORT`` and the folder of the cluster's logs and work:
    a master and one worker (2 cores, 1 GiB), both bound to the loopback address,
    stopped with their executors afterwards."""
    import pyspark

    from kcoord.pipeline.cli import java_problem

    problem = java_problem()
    if problem:
        _unavailable(problem)
    home = Path(pyspark.__file__).parent
    where = tmp_path_factory.mktemp("spark-cluster")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(where), "SPARK_WORKER_DIR": str(where / "work")}
    port, ui_port = _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    commands = [
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(ui_port)],
        ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "2",
         "--memory", "1g", "--webui-port", str(_free_port()), "--work-dir",
         str(where / "work")],
    ]
    processes = []
    try:
        for i, command in enumerate(commands):
            log = open(where / f"daemon-{i}.log", "w")
            processes.append(subprocess.Popen([str(home / "bin" / "spark-class"), *command],
                                              env=env, stdin=subprocess.DEVNULL, stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + 90
        while _alive_workers(ui_port) < 1:
            assert time.monotonic() < deadline, (where / "daemon-1.log").read_text()[-3000:]
            assert all(p.poll() is None for p in processes), \
                "".join(p.read_text()[-2000:] for p in where.glob("daemon-*.log"))
            time.sleep(0.5)
        yield url, where
    finally:
        for p in processes:  # each is a session of its own: its executors go with it
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(30)


def test_offsets_on_a_standalone_cluster_are_what_the_broker_answers(cluster, store, spark,
                                                                     tmp_path):
    cluster, work = cluster
    out = tmp_path / "offsets"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}  # the driver on loopback too
    run = subprocess.run([sys.executable, "-m", "kcoord.broker.cli", "pipeline", "offsets",
                          "--data-dir", str(store.data_dir), "--out", str(out),
                          "--master", cluster], env=env, capture_output=True, text=True,
                         timeout=240, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"starting Spark ({cluster})" in run.stderr
    got = {(r.group, r.topic, r.partition): (r.committed_offset, r.metadata)
           for r in spark.read.parquet(str(out)).collect()}
    assert got == store.fetched
    # The work ran on the cluster: the worker started an executor for the application.
    (app,) = (work / "work").glob("app-*")
    assert list(app.glob("*/stderr")), list(app.iterdir())
