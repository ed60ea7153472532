"""structlog setup: readable lines on a terminal, one JSON object per line with
``--log-format json``.

Loggers are named as the modules name them (``kcoord.groups``, ...), in a
hierarchy as log4j's: a logger without a level of its own logs at its nearest
ancestor's, and the root's level is the ``--log-level`` the broker started
with.  Levels change while the broker runs, as Kafka's broker loggers do
(IncrementalAlterConfigs of a BROKER_LOGGER, ``kafka-configs --entity-type
broker-loggers``); they are not kept over a restart, as on Kafka.  The
levels are the process's: brokers embedded in one program share them, and a
program that set up structlog itself keeps its own configuration (the levels
are then recorded and described, and its configuration decides what is logged).
"""

from __future__ import annotations

import logging
import sys
import threading

import structlog

# The loggers the broker has (what DescribeConfigs of a BROKER_LOGGER lists
# beside the root; a test keeps it equal to the names the modules use).
LOGGERS = (
    "kcoord", "kcoord.broker", "kcoord.cli", "kcoord.config", "kcoord.data", "kcoord.embedded",
    "kcoord.groups", "kcoord.produce", "kcoord.producers", "kcoord.security", "kcoord.server",
    "kcoord.storage", "kcoord.storage.cleaner", "kcoord.topics", "kcoord.transactions",
)
ROOT = "root"
# log4j's level names (Kafka's LogLevelConfig.VALID_LOG_LEVELS) and Python's
# numbers for them; TRACE is below DEBUG.
LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
_NAMES = {number: name for name, number in LEVELS.items()}
# structlog's method names -> the level of the event
_METHODS = {"debug": logging.DEBUG, "info": logging.INFO, "msg": logging.INFO,
            "warning": logging.WARNING, "warn": logging.WARNING, "error": logging.ERROR,
            "exception": logging.ERROR, "critical": logging.CRITICAL,
            "fatal": logging.CRITICAL}

_level = logging.INFO  # the root's
# moves on whenever a level changes: what asked ``enabled`` once may ask again
generation = 0
_own: dict[str, int] = {}  # loggers given a level of their own
_format = "console"
_lock = threading.Lock()  # level changes (from any broker embedded in the process)


def configure(log_format: str = "console", level: str = "info", file=None) -> None:
    """Set up logging at start: the output format, the root's level (the
    loggers' own levels are cleared) and the stream (stderr by default)."""
    global _level, _format, _factory
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    with _lock:
        _level, _format = numeric, log_format
        _own.clear()
        _factory = _NamedLoggerFactory(sys.stderr if file is None else file)
        _apply()


def _ours() -> bool:
    """Whether structlog runs on kcoord's configuration now (not an embedding
    program's, nor a test's capture)."""
    config = structlog.get_config()
    return config["logger_factory"] is _factory and _by_logger in config["processors"]


def _apply() -> None:
    global generation
    generation += 1
    processors = [
        _by_logger,
        structlog.contextvars.merge_contextvars,
        _drop_empty,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if _format == "json":
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        processors += [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    structlog.configure(
        processors=processors,
        # the lowest level any logger logs at (structlog's lowest is DEBUG, which
        # TRACE lets through): the rest is filtered by name
        wrapper_class=structlog.make_filtering_bound_logger(
            max(logging.DEBUG, min([_level, *_own.values()]))),
        logger_factory=_factory,
        cache_logger_on_first_use=False,
    )


class _NamedLogger(structlog.PrintLogger):
    """structlog's PrintLogger that knows the name it was asked for."""

    def __init__(self, file, name: str = ROOT):
        super().__init__(file)
        self.name = name

    def __deepcopy__(self, memodict):
        return self.__class__(self._file, self.name)


class _NamedLoggerFactory:
    """Loggers writing to the stream that was stderr when logging was set up."""

    def __init__(self, file):
        self.file = file

    def __call__(self, *args) -> _NamedLogger:
        return _NamedLogger(self.file, args[0] if args and isinstance(args[0], str) else ROOT)


_factory = _NamedLoggerFactory(sys.stderr)


def _by_logger(logger, method: str, event: dict) -> dict:
    """Drop an event below its logger's level (only loggers given a level of
    their own make one differ from the root's, which the wrapper filters)."""
    if _own and _METHODS.get(method, logging.INFO) < effective(getattr(logger, "name", ROOT)):
        raise structlog.DropEvent
    return event


def _drop_empty(_logger, _method, event: dict) -> dict:
    """A field that says nothing (None) is left out of the line."""
    if None in event.values():
        return {k: v for k, v in event.items() if v is not None}
    return event


def effective(name: str) -> int:
    """The level ``name`` logs at: its own, else its nearest ancestor's, else the root's."""
    while True:
        own = _own.get(name)
        if own is not None:
            return own
        if "." not in name:
            return _level
        name = name.rsplit(".", 1)[0]


def enabled(name: str, level: int) -> bool:
    """Whether logger ``name`` logs events of ``level`` now: as structlog's
    filter says, and (on kcoord's configuration) as the logger's level says."""
    check = getattr(structlog.get_logger(name).bind(), "is_enabled_for", None)
    if check is not None and not check(max(level, logging.DEBUG)):  # (no TRACE there)
        return False
    return level >= effective(name) if _ours() else True


def _log4j(number: int) -> str:
    if number in _NAMES:
        return _NAMES[number]
    name = logging.getLevelName(number)
    return {"WARNING": "WARN", "CRITICAL": "FATAL"}.get(name, name)


def root_level() -> str:
    """The level the broker logs at, named as log4j names it (INFO, WARN, ...)."""
    return _log4j(_level)


def levels() -> list[tuple[str, str]]:
    """(logger, log4j level) of the root and of every logger, as each logs now."""
    return [(ROOT, root_level())] + [(name, _log4j(effective(name))) for name in LOGGERS]


def exists(name: str) -> bool:
    return name == ROOT or name in LOGGERS


def set_level(name: str, level: str | None) -> None:
    """Give ``name`` a level (a key of ``LEVELS``), or with None take its own
    away (it follows its ancestors again); the root's can be set, not removed."""
    global _level, generation
    if name == ROOT and level is None:
        raise ValueError("the root logger's level cannot be removed")
    with _lock:
        if name == ROOT:
            _level = LEVELS[level]
        elif level is None:
            _own.pop(name, None)
        else:
            _own[name] = LEVELS[level]
        if _ours():
            _apply()
        else:
            generation += 1
