"""Loggers and their levels (``broker.logs``): the hierarchy a BROKER_LOGGER's
levels follow, as log4j's, and the names DescribeConfigs lists."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import structlog

from kcoord.broker import logs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def out():
    """What the broker's loggers write, configured as ``kcoord serve --log-format
    json`` (at INFO) configures them."""
    written = io.StringIO()
    logs.configure("json", "info", file=written)
    yield written
    logs.configure("console", "warning")  # as tests/conftest.py has it


def _lines(out) -> list[tuple[str, str]]:
    return [(e["event"], e["level"]) for e in map(json.loads, out.getvalue().splitlines())]


def test_the_listed_loggers_are_the_ones_the_modules_use():
    used = set()
    for folder in ("broker", "storage", "protocol", "pipeline"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            used |= set(re.findall(r'structlog\.get_logger\("([^"]+)"\)', text))
            # a coordinator runtime logs as kcoord.<its name>
            used |= {f"kcoord.{name}" for name in
                     re.findall(r'CoordinatorRuntime\(\s*\w+,\s*name="([^"]+)"', text)}
    assert {"kcoord.groups", "kcoord.transactions"} <= used
    assert used <= set(logs.LOGGERS)
    # each listed one is used, or is the ancestor of one that is
    assert all(any(u == n or u.startswith(n + ".") for u in used) for n in logs.LOGGERS)


def test_a_logger_follows_its_nearest_ancestor_with_a_level(out):
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
    assert _lines(out) == [("shown", "debug"), ("shown", "error"), ("shown", "debug"),
                              ("shown", "info")]
    assert {level for _name, level in logs.levels()} == {"INFO"}


def test_the_root_s_level_is_every_logger_s_without_one(out):
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
    assert _lines(out) == [("shown", "warning"), ("shown", "debug")]
    with pytest.raises(ValueError):
        logs.set_level("root", None)


def test_a_level_change_moves_the_generation_on(out):
    before = logs.generation
    logs.set_level("kcoord.server", "DEBUG")
    assert logs.generation > before


def test_a_program_s_own_structlog_configuration_is_kept(out):
    """A broker embedded in a program that set up structlog itself: a level
    change is recorded and described, and the program's configuration stays
    (it decides what is logged), a test's capture included."""
    import logging

    theirs = io.StringIO()
    structlog.configure(processors=[structlog.processors.JSONRenderer()],
                        logger_factory=structlog.PrintLoggerFactory(theirs),
                        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    before = structlog.get_config()
    logs.set_level("kcoord.server", "ERROR")
    assert structlog.get_config() == before
    assert dict(logs.levels())["kcoord.server"] == "ERROR"
    assert logs.enabled("kcoord.server", logging.DEBUG)  # the program's level decides
    structlog.get_logger("kcoord.server").debug("theirs")
    assert json.loads(theirs.getvalue())["event"] == "theirs"
    with structlog.testing.capture_logs() as captured:
        logs.set_level("kcoord.server", "DEBUG")
        structlog.get_logger("kcoord.server").info("captured")
    assert [e["event"] for e in captured] == ["captured"]
