"""kcoord as a user installs it: the wheel and the sdist that ``python -m build``
makes add one import name, ``kcoord``, and nothing else; installed into a fresh
virtual environment next to a project that has packages of its own called
``storage``, ``broker``, ``protocol`` and ``pipeline``, the CLI, the embedded
broker and the pytest fixture all work, and the project's packages stay its own."""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from kcoord.pipeline.cli import install_hint

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FOLDERS = ("broker", "protocol", "storage", "pipeline")

pytestmark = pytest.mark.timeout(600)


def test_every_source_folder_is_a_listed_subpackage_of_kcoord():
    setup = PYPROJECT["tool"]["setuptools"]
    assert setup["package-dir"] == {f"kcoord.{name}": name for name in FOLDERS}
    on_disk = {".".join(("kcoord", *init.parent.relative_to(ROOT).parts))
               for name in FOLDERS for init in (ROOT / name).rglob("__init__.py")}
    assert sorted(setup["packages"]) == sorted(on_disk)
    # A folder of modules without __init__.py would be left out of the wheel.
    for name in FOLDERS:
        for module in (ROOT / name).rglob("*.py"):
            assert (module.parent / "__init__.py").exists(), module


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist, and the wheel built from it, as ``python -m build`` makes them."""
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out),
                          str(ROOT)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("kcoord-*.whl")
    return wheel


def test_the_wheel_holds_kcoord_alone(dist):
    names = zipfile.ZipFile(_wheel(dist)).namelist()
    version = PYPROJECT["project"]["version"]
    assert {n.split("/")[0] for n in names} == {"kcoord", f"kcoord-{version}.dist-info"}
    for name in FOLDERS:
        assert f"kcoord/{name}/__init__.py" in names
    assert "kcoord/pipeline/log4j2.properties" in names
    assert "kcoord/broker/apis/k010_find_coordinator.py" in names
    assert not [n for n in names if n.startswith("kcoord/tests/") or "__pycache__" in n]
    entry_points = zipfile.ZipFile(_wheel(dist)).read(
        f"kcoord-{version}.dist-info/entry_points.txt").decode()
    assert "kcoord = kcoord.broker.cli:main" in entry_points
    assert "kcoord = kcoord.broker.pytest_plugin" in entry_points


def test_the_sdist_holds_the_repository_folders(dist):
    (sdist,) = dist.glob("kcoord-*.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    for name in FOLDERS:
        assert f"{name}/__init__.py" in names
    assert {"pyproject.toml", "README.md", "pipeline/log4j2.properties"} <= names


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed by pip.  kcoord's
    dependencies come from this interpreter's site-packages through a ``.pth``
    (a path only: the editable install's finder there stays inactive), so the
    test needs no index."""
    home = tmp_path_factory.mktemp("venv")
    _fresh_venv(home, _wheel(dist))
    return home


def _fresh_venv(home: Path, package: Path, *pip_options: str) -> None:
    """A virtual environment at ``home`` with ``package`` (a wheel or an sdist)
    installed by pip, its dependencies this interpreter's."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True,
                   timeout=120)
    python = home / "bin" / "python"
    (inner,) = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, check=True).stdout.split()
    (Path(inner) / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    run = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                          "--quiet", "--no-deps", "--no-index", *pip_options, str(package)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_the_sdist_installs_with_pip_and_runs(dist, tmp_path):
    """pip builds and installs kcoord from the sdist alone (as from an index
    without a wheel for the platform): the CLI and the fixture's module run."""
    (sdist,) = dist.glob("kcoord-*.tar.gz")
    home = tmp_path / "venv"
    _fresh_venv(home, sdist, "--no-build-isolation")
    python = home / "bin" / "python"
    version = _in(home, tmp_path, home / "bin" / "kcoord", "--version")
    assert version.returncode == 0 and PYPROJECT["project"]["version"] in version.stdout
    probe = ("import kcoord.broker.testing, kcoord.pipeline, pathlib; "
             "print(pathlib.Path(kcoord.pipeline.__file__).with_name('log4j2.properties')"
             ".exists(), kcoord.broker.testing.__file__)")
    run = _in(home, tmp_path, python, "-c", probe)
    assert run.returncode == 0, run.stderr
    exists, where = run.stdout.split()
    assert exists == "True" and where.startswith(str(home)), run.stdout


def _in(venv: Path, where: Path, *args, timeout=120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([str(a) for a in args], cwd=where, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _project(tmp_path: Path) -> Path:
    """A user's project whose own packages have the names of kcoord's folders."""
    for name in FOLDERS:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"OWNER = 'the project: {name}'\n")
    (tmp_path / "storage" / "files.py").write_text("def read():\n    return 'project data'\n")
    return tmp_path


def test_installed_kcoord_adds_no_other_import_name(venv, tmp_path):
    probe = ("import importlib.util as u, json, kcoord.broker.cli as cli\n"
             "print(json.dumps({'others': [n for n in ('broker', 'protocol', 'storage', "
             "'pipeline', 'tests') if u.find_spec(n)], 'cli': cli.__file__}))")
    run = _in(venv, tmp_path, venv / "bin" / "python", "-c", probe)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    assert found["others"] == []
    assert found["cli"].startswith(str(venv)), found["cli"]


def test_a_project_with_its_own_storage_package_runs_the_cli_and_the_fixture(venv, tmp_path):
    project = _project(tmp_path)
    version = _in(venv, project, venv / "bin" / "kcoord", "--version")
    assert version.returncode == 0 and PYPROJECT["project"]["version"] in version.stdout

    (project / "test_with_kcoord.py").write_text(
        "from storage.files import read\n"
        "import broker\n\n"
        "def test_broker_and_own_packages(kcoord):\n"
        "    topic = kcoord.create_topic('orders', partitions=2)\n"
        "    assert kcoord.produce(topic, [b'a', b'b']) == [0, 1]\n"
        "    assert read() == 'project data'\n"
        "    assert broker.OWNER == 'the project: broker'\n\n"
        "def test_embedded_broker_as_a_child_process():\n"
        "    from kcoord.broker.embedded import EmbeddedBroker\n"
        "    from kcoord.broker.testing import Kcoord\n"
        "    with EmbeddedBroker(process=True) as node, Kcoord(node.bootstrap) as k:\n"
        "        assert k.produce(k.create_topic('t'), [b'x']) == [0]\n")
    (project / "pytest.ini").write_text("[pytest]\n")
    run = _in(venv, project, venv / "bin" / "python", "-m", "pytest", "-q", "-p",
              "no:cacheprovider", "-W", "ignore", "test_with_kcoord.py", timeout=300)
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]


def test_the_installed_cli_serves_and_its_tools_talk_to_it(venv, tmp_path):
    project = _project(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    server = subprocess.Popen([venv / "bin" / "kcoord", "serve", "--port", "0", "--data-dir",
                               tmp_path / "data", "--log-format", "json"], cwd=project, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        port = None
        for line in server.stdout:  # bounded by the process: it exits if it cannot start
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("event") == "broker.started":
                port = event["port"]
                break
        assert port, "kcoord serve did not start"
        bootstrap = f"127.0.0.1:{port}"
        created = _in(venv, project, venv / "bin" / "kcoord", "topics", "--bootstrap-server",
                      bootstrap, "--create", "--topic", "installed", "--partitions", "3")
        assert created.returncode == 0, created.stderr
        listed = _in(venv, project, venv / "bin" / "kcoord", "topics", "--bootstrap-server",
                     bootstrap, "--list")
        assert listed.stdout.split() == ["__consumer_offsets", "installed"]
        groups = _in(venv, project, venv / "bin" / "kcoord", "groups", "--bootstrap-server",
                     bootstrap, "--list")
        assert groups.returncode == 0 and groups.stdout.strip() == "", groups.stderr
    finally:
        server.terminate()
        server.wait(30)


def _extra(name: str) -> list[str]:
    return [r.replace(" ", "") for r in PYPROJECT["project"]["optional-dependencies"][name]]


def test_the_install_hint_names_the_extras_requirements_not_an_index_package(venv, tmp_path):
    # `pip install 'kcoord[pipeline]'` needs kcoord on an index; the hint installs
    # the extra's requirements themselves, so it works next to a wheel or a clone.
    assert install_hint("pipeline").split()[:4] == [sys.executable, "-m", "pip", "install"]
    assert install_hint("pipeline").split()[4:] == [f"'{r}'" if re.search("[<>]", r) else r
                                                    for r in _extra("pipeline")]
    run = _in(venv, tmp_path, venv / "bin" / "python", "-c",
              "from kcoord.pipeline.cli import install_hint; print(install_hint('pipeline'))")
    # The installed kcoord's own interpreter, wherever the command is run from.
    assert run.stdout.split()[0] == str(venv / "bin" / "python")
    assert run.stdout.split()[1:] == install_hint("pipeline").split()[1:]
    assert "kcoord" not in run.stdout.replace(str(venv), "")
