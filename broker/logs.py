"""structlog setup: readable lines on a terminal, one JSON object per line with
``--log-format json``."""

from __future__ import annotations

import logging
import sys

import structlog


# Python's level names as log4j names them (what Kafka's DescribeConfigs of a
# BROKER_LOGGER answers).
_LOG4J_NAMES = {"WARNING": "WARN", "CRITICAL": "FATAL"}
_level = logging.INFO


def configure(log_format: str = "console", level: str = "info") -> None:
    global _level
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    _level = numeric
    processors = [
        structlog.contextvars.merge_contextvars,
        _drop_empty,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if log_format == "json":
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        processors += [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def _drop_empty(_logger, _method, event: dict) -> dict:
    """A field that says nothing (None) is left out of the line."""
    if None in event.values():
        return {k: v for k, v in event.items() if v is not None}
    return event


def root_level() -> str:
    """The level the broker logs at, named as log4j names it (INFO, WARN, ...)."""
    name = logging.getLevelName(_level)
    return _LOG4J_NAMES.get(name, name)
