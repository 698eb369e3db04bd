"""Structured logging: JSON lines on stderr (ours and stdlib ``logging``'s), per-actor context."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

import structlog
from structlog.typing import FilteringBoundLogger, Processor

from supervisor.errors import ConfigError

__all__ = ["bind_actor", "configure_logging", "get_logger"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


#: Third-party libraries (the MCP SDK, uvicorn, ...) log through stdlib ``logging``; below
#: this level they narrate every request, so only the supervisor's own records go lower.
_FOREIGN_FLOOR = logging.WARNING
_OWN_LOGGERS = ("supervisor", "actors")


class _JsonHandler(logging.Handler):
    """Writes formatted records to ``stream``, or to whatever ``sys.stderr`` is at the time."""

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__()
        self._stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = self._stream if self._stream is not None else sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]


def _route_stdlib(threshold: int, stream: TextIO | None) -> None:
    """Send every stdlib record through the same JSON rendering, on the same stream."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _JsonHandler)]:
        root.removeHandler(handler)
    handler = _JsonHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*_shared_processors(), structlog.stdlib.add_logger_name],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.dict_tracebacks,
                structlog.processors.JSONRenderer(sort_keys=True),
            ],
        )
    )
    # A handler on the root logger also makes the SDK's logging.basicConfig a no-op, so
    # its plain-text handler never lands on stderr beside the JSON lines.
    root.addHandler(handler)
    root.setLevel(max(threshold, _FOREIGN_FLOOR))
    for name in _OWN_LOGGERS:
        logging.getLogger(name).setLevel(threshold)


def configure_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog and stdlib logging for the whole process; calling it again
    replaces the previous setup.

    Output goes to `stream`, or to stderr when none is given: stdout belongs
    to the MCP stdio transport, and a stray log line there corrupts it.
    Records of other libraries' stdlib loggers become the same JSON lines, at
    warning and above (or the configured level, if higher).
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
            *_shared_processors(),
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(sort_keys=True),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=logger_factory,
        # Caching would pin loggers used before a reconfiguration to the old
        # level and stream; the supervisor logs too little for it to matter.
        cache_logger_on_first_use=False,
    )
    _route_stdlib(threshold, stream)


def get_logger(**bind: Any) -> FilteringBoundLogger:
    """A logger with `bind` as initial context; resolved lazily, so module-level use is fine."""
    return cast(FilteringBoundLogger, structlog.get_logger(**bind))


@contextmanager
def bind_actor(name: str) -> Iterator[None]:
    """Tag every log line of the current task (and tasks it starts) with `actor=name`."""
    with structlog.contextvars.bound_contextvars(actor=name):
        yield
