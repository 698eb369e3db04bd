"""Structured logging: JSON lines on stderr, with per-actor context bound through contextvars."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

import structlog
from structlog.typing import FilteringBoundLogger

from supervisor.errors import ConfigError

__all__ = ["bind_actor", "configure_logging", "get_logger"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


def configure_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog for the whole process; calling it again replaces the previous setup.

    Output goes to `stream`, or to stderr when none is given: stdout belongs
    to the MCP stdio transport, and a stray log line there corrupts it.
    """
    threshold = _LEVELS.get(level.strip().lower())
    if threshold is None:
        raise ConfigError(f"unknown log level {level!r}; expected one of {', '.join(_LEVELS)}")

    def logger_factory(*_args: Any) -> structlog.WriteLogger:
        # sys.stderr is looked up per logger, not captured here, so a
        # replaced stderr (test capture, daemon redirection) is honoured.
        return structlog.WriteLogger(stream if stream is not None else sys.stderr)

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(sort_keys=True),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=logger_factory,
        # Caching would pin loggers used before a reconfiguration to the old
        # level and stream; the supervisor logs too little for it to matter.
        cache_logger_on_first_use=False,
    )


def get_logger(**bind: Any) -> FilteringBoundLogger:
    """A logger with `bind` as initial context; resolved lazily, so module-level use is fine."""
    return cast(FilteringBoundLogger, structlog.get_logger(**bind))


@contextmanager
def bind_actor(name: str) -> Iterator[None]:
    """Tag every log line of the current task (and tasks it starts) with `actor=name`."""
    with structlog.contextvars.bound_contextvars(actor=name):
        yield
