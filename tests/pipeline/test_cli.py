"""How ``kcoord pipeline`` starts Spark when no session runs yet: the master it
was given, Spark's progress bar unless ``--quiet``, and an environment that
suits a local or a cluster master.  Nothing here starts Spark."""

from __future__ import annotations

import os
import sys

import pytest

from kcoord.pipeline import cli, jobs


class _Started(Exception):
    """Raised instead of starting Spark."""


def _start(monkeypatch, capsys, argv):
    """Run the CLI up to the point where it starts a session: what it asks for,
    and what it printed."""
    from kcoord.broker.cli import main

    asked = []

    def session(**kwargs):
        asked.append(kwargs)
        raise _Started

    monkeypatch.setattr(cli, "java_problem", lambda: None)  # this is not about Java
    monkeypatch.setattr(jobs, "existing_session", lambda: None)
    monkeypatch.setattr(jobs, "session", session)
    with pytest.raises(_Started):
        main(["pipeline", *argv])
    assert len(asked) == 1
    return asked[0], capsys.readouterr().err


class _Terminal:
    """stderr as a terminal: Spark's progress bar is for people watching."""

    def __init__(self, stream):
        self._stream = stream

    def isatty(self) -> bool:
        return True

    def __getattr__(self, name):
        return getattr(self._stream, name)


def test_the_cli_starts_spark_on_the_master_it_is_given_with_progress(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "stderr", _Terminal(sys.stderr))
    asked, err = _start(monkeypatch, capsys, ["lag", "--data-dir", str(tmp_path), "--out",
                                              str(tmp_path / "out"), "--master", "spark://10.0.0.5:7077"])
    assert "starting Spark (spark://10.0.0.5:7077)" in err
    conf = jobs.settings(**asked)
    assert conf["spark.master"] == "spark://10.0.0.5:7077"
    assert conf["spark.app.name"] == "kcoord pipeline lag"
    assert conf["spark.ui.showConsoleProgress"] == "true"  # long jobs show their progress
    assert "spark.sql.shuffle.partitions" not in conf  # a cluster keeps Spark's own default


def test_the_cli_defaults_to_every_local_core_and_quiet_turns_progress_off(monkeypatch, capsys, tmp_path):
    asked, err = _start(monkeypatch, capsys, ["offsets", "--data-dir", str(tmp_path), "--out",
                                              str(tmp_path / "out"), "--quiet"])
    assert err == ""
    conf = jobs.settings(**asked)
    assert (conf["spark.master"], conf["spark.ui.showConsoleProgress"],
            conf["spark.sql.shuffle.partitions"]) == ("local[*]", "false", "8")


def test_no_progress_bar_when_the_output_is_not_a_terminal(monkeypatch, capsys, tmp_path):
    asked, err = _start(monkeypatch, capsys, ["history", "--data-dir", str(tmp_path), "--out",
                                              str(tmp_path / "out")])
    assert "starting Spark" in err  # a CI log still gets the progress lines
    assert jobs.settings(**asked)["spark.ui.showConsoleProgress"] == "false"


def test_a_store_that_compaction_has_cleaned_is_said_to_be(tmp_path):
    from kcoord.pipeline.segments import compaction_note
    from kcoord.storage.layout import CLEANER_FILE, OFFSETS_TOPIC
    from kcoord.storage.manager import write_checkpoint

    assert compaction_note([str(tmp_path)]) is None  # no checkpoint: nothing cleaned
    write_checkpoint(str(tmp_path / CLEANER_FILE), {("orders", 0): 50, (OFFSETS_TOPIC, 3): 0})
    assert compaction_note([str(tmp_path)]) is None  # only a user topic was cleaned
    write_checkpoint(str(tmp_path / CLEANER_FILE), {(OFFSETS_TOPIC, 3): 120,
                                                   (OFFSETS_TOPIC, 7): 40})
    note = compaction_note([str(tmp_path), "s3a://bucket/elsewhere"])
    assert note.startswith("compaction has already cleaned 2 __consumer_offsets partition(s) "
                           "(up to offset 120)")


def test_settings_given_by_the_caller_win():
    conf = jobs.settings("local[2]", conf={"spark.sql.shuffle.partitions": "2", "spark.x": "y"})
    assert (conf["spark.sql.shuffle.partitions"], conf["spark.x"]) == ("2", "y")


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local-cluster[2,1,1024]"])
def test_a_local_driver_binds_to_the_loopback_address(master):
    assert jobs.environment(master, {}) == {"SPARK_LOCAL_IP": "127.0.0.1",
                                            "PYSPARK_PYTHON": sys.executable,
                                            "PYSPARK_DRIVER_PYTHON": sys.executable}


@pytest.mark.parametrize("master", ["spark://10.0.0.5:7077", "yarn", "k8s://https://10.0.0.5:6443"])
def test_a_driver_on_a_cluster_keeps_the_address_spark_picks(master):
    env = jobs.environment(master, {})
    assert "SPARK_LOCAL_IP" not in env
    assert env["PYSPARK_PYTHON"] == sys.executable


def test_a_users_own_environment_wins():
    mine = {"SPARK_LOCAL_IP": "10.0.0.9", "PYSPARK_PYTHON": "/opt/spark-python/bin/python3"}
    assert jobs.environment("local[*]", dict(mine)) == {**mine, "PYSPARK_DRIVER_PYTHON": sys.executable}
    assert jobs.environment("spark://10.0.0.5:7077", dict(mine))["PYSPARK_PYTHON"] == \
        "/opt/spark-python/bin/python3"


def test_the_environment_is_set_in_the_process_by_default(monkeypatch):
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)  # restored after the test
    assert jobs.environment("local[2]") is os.environ
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"


@pytest.mark.timeout(600)
def test_quiet_prints_nothing_but_errors_with_a_real_spark(store, tmp_path):
    """The whole command as a user runs it, Spark's own JVM included: with
    ``--quiet`` neither the JVM's start-up notices nor Spark's log-level hint
    reach the terminal; a failing job still says why."""
    import subprocess
    import sys

    from tests.support import REPO

    def pipeline(*args):
        return subprocess.run([sys.executable, "-m", "kcoord.broker.cli", "pipeline", *args],
                              capture_output=True, text=True, cwd=REPO, timeout=300)

    quiet = pipeline("offsets", "--data-dir", str(store.data_dir), "--out",
                     str(tmp_path / "offsets"), "--quiet")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert (quiet.stdout, quiet.stderr) == ("", "")
    assert any((tmp_path / "offsets").glob("*.parquet"))
    # a job that fails under --quiet still reports its error (an output folder
    # inside a file)
    (tmp_path / "a-file").write_text("x")
    failed = pipeline("offsets", "--data-dir", str(store.data_dir), "--out",
                      str(tmp_path / "a-file" / "offsets"), "--quiet")
    assert failed.returncode != 0
    assert failed.stderr.strip()
