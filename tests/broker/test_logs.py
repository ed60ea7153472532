"""Loggers and their levels (``broker.logs``): the hierarchy a BROKER_LOGGER's
levels follow, as log4j's, and the names DescribeConfigs lists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import structlog

from kcoord.broker import logs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh():
    logs.configure("json", "info")
    yield
    logs.configure("console", "warning")  # as tests/conftest.py has it


def _lines(capsys) -> list[tuple[str, str]]:
    return [(e["event"], e["level"]) for e in map(json.loads, capsys.readouterr().err.splitlines())]


def test_the_listed_loggers_are_the_ones_the_modules_use():
    used = set()
    for folder in ("broker", "storage", "protocol", "pipeline"):
        for path in (ROOT / folder).rglob("*.py"):
            used |= set(re.findall(r'structlog\.get_logger\("([^"]+)"\)', path.read_text()))
    used |= {"kcoord.groups", "kcoord.transactions"}  # the coordinator runtimes' (by name)
    assert used <= set(logs.LOGGERS)
    # each listed one is used, or is the ancestor of one that is
    assert all(any(u == n or u.startswith(n + ".") for u in used) for n in logs.LOGGERS)


def test_a_logger_follows_its_nearest_ancestor_with_a_level(fresh, capsys):
    groups = structlog.get_logger("kcoord.groups")
    cleaner = structlog.get_logger("kcoord.storage.cleaner")
    groups.debug("hidden")
    logs.set_level("kcoord", "DEBUG")
    groups.debug("shown")
    logs.set_level("kcoord.storage", "ERROR")
    cleaner.warning("hidden")
    cleaner.error("shown")
    structlog.get_logger("kcoord.storage.cleaner").info("hidden")
    assert dict(logs.levels())["kcoord.storage.cleaner"] == "ERROR"
    assert dict(logs.levels())["kcoord.groups"] == "DEBUG"
    logs.set_level("kcoord.storage", None)  # follows kcoord again
    cleaner.debug("shown")
    logs.set_level("kcoord", None)
    groups.debug("hidden")
    groups.info("shown")
    assert _lines(capsys) == [("shown", "debug"), ("shown", "error"), ("shown", "debug"),
                              ("shown", "info")]
    assert {level for _name, level in logs.levels()} == {"INFO"}


def test_the_root_s_level_is_every_logger_s_without_one(fresh, capsys):
    logs.set_level("kcoord.server", "WARN")
    logs.set_level("root", "ERROR")
    levels = dict(logs.levels())
    assert levels["root"] == levels["kcoord.groups"] == "ERROR"
    assert levels["kcoord.server"] == "WARN" and logs.root_level() == "ERROR"
    structlog.get_logger("kcoord.groups").warning("hidden")
    structlog.get_logger("kcoord.server").warning("shown")
    logs.set_level("root", "TRACE")
    structlog.get_logger("kcoord.groups").debug("shown")
    assert logs.enabled("kcoord.groups", 5) and not logs.enabled("kcoord.server", 20)
    assert _lines(capsys) == [("shown", "warning"), ("shown", "debug")]
    with pytest.raises(ValueError):
        logs.set_level("root", None)


def test_a_level_change_moves_the_generation_on(fresh):
    before = logs.generation
    logs.set_level("kcoord.server", "DEBUG")
    assert logs.generation > before
