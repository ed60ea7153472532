"""The pytest plugin as a user's suite meets it: installed, with no conftest.py
and no configuration of its own, the example suite (``tests/plugin_suite``) and
the README's example pass; under pytest-xdist each worker has a broker of its
own; the option gives the session broker Kafka's defaults."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "plugin_suite"


def _readme_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def _suite(tmp_path: Path, *files: tuple[str, str]) -> Path:
    """A directory holding only test files and an empty pytest configuration."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for name, text in files:
        (tmp_path / name).write_text(text)
    return tmp_path


def _pytest(where: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-c", "pytest.ini", "--confcutdir", ".", "-W", "ignore", *args],
                          cwd=where, capture_output=True, text=True, timeout=300)


def _passed(run: subprocess.CompletedProcess) -> int:
    found = re.search(r"(\d+) passed", run.stdout)
    assert run.returncode == 0 and found, run.stdout[-3000:] + run.stderr[-2000:]
    assert "failed" not in run.stdout.splitlines()[-1], run.stdout[-3000:]
    return int(found.group(1))


def test_the_example_suite_and_the_readme_example_pass_with_the_plugin_alone(tmp_path):
    example = next(b for b in _readme_blocks() if b.startswith("# test_orders.py"))
    files = [(p.name, p.read_text()) for p in sorted(SUITE.glob("test_*.py"))]
    where = _suite(tmp_path, *files, ("test_orders.py", example))
    examples = sum(text.count("\ndef test_") + text.count("\nasync def test_")
                   for _name, text in files + [("", example)])
    assert _passed(_pytest(where)) == examples + 1  # one test runs twice (parametrized)


def test_the_example_suite_passes_with_kafka_s_defaults_too(tmp_path):
    """Every example waits on conditions, not on kcoord's quick development
    defaults: under --kcoord-kafka-defaults (a new group's first rebalance held
    3 s, as on Kafka) they pass as well."""
    files = [(p.name, p.read_text()) for p in sorted(SUITE.glob("test_*.py"))]
    where = _suite(tmp_path, *files)
    examples = sum(text.count("\ndef test_") + text.count("\nasync def test_")
                   for _name, text in files)
    assert _passed(_pytest(where, "--kcoord-kafka-defaults")) == examples + 1


def test_under_xdist_each_worker_has_a_broker_of_its_own(tmp_path):
    probe = '''
import pytest

@pytest.mark.parametrize("n", range(8))
def test_where(kcoord, kcoord_broker, worker_id, n):
    topic = kcoord.create_topic("same")
    assert kcoord.produce(topic, [b"x"]) == [0]
    with open(f"broker-{worker_id}", "a") as out:
        out.write(kcoord_broker.bootstrap + "\\n")
'''
    where = _suite(tmp_path, ("test_where.py", probe))
    assert _passed(_pytest(where, "-n", "2")) == 8
    seen = {p.name: set(p.read_text().split()) for p in where.glob("broker-gw*")}
    assert sorted(seen) == ["broker-gw0", "broker-gw1"]
    assert all(len(addresses) == 1 for addresses in seen.values())  # one broker per worker
    assert seen["broker-gw0"] != seen["broker-gw1"]


def test_the_option_gives_the_session_broker_kafka_s_defaults(tmp_path):
    probe = '''
def test_delay(kcoord):
    answer = kcoord.call(32, 4, {"resources": [
        {"resource_type": 4, "resource_name": "1",
         "configuration_keys": ["group.initial.rebalance.delay.ms"]}],
        "include_synonyms": False, "include_documentation": False})
    print("DELAY", answer["results"][0]["configs"][0]["value"])
'''
    where = _suite(tmp_path, ("test_delay.py", probe))
    run = _pytest(where, "-s", "--kcoord-kafka-defaults")
    assert _passed(run) == 1 and "DELAY 3000" in run.stdout
    run = _pytest(where, "-s")
    assert _passed(run) == 1 and "DELAY 0" in run.stdout


def test_the_readme_embedded_broker_example_runs(tmp_path):
    example = next(b for b in _readme_blocks() if "EmbeddedBroker(process=True)" in b)
    script = tmp_path / "embedded.py"
    script.write_text(example)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    addresses = run.stdout.split()
    assert len(addresses) == 2 and all(re.fullmatch(r"127\.0\.0\.1:\d+", a) for a in addresses)
    assert addresses[0] != addresses[1]
