"""Structured logging: JSON lines on stderr (ours and stdlib ``logging``'s), per-actor context."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

import structlog
from structlog.typing import FilteringBoundLogger, Processor

from supervisor.errors import ConfigError

__all__ = ["bind_actor", "configure_logging", "get_logger"]

#: The fields the client library's records carry in ``extra``; only these are added, so
#: a foreign library's extras (uvicorn's colored duplicate message) stay out.
_CLIENT_FIELDS = ("action", "code", "detail", "error", "retry_in_seconds", "worker_identity")

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


class _Sink:
    """Where log lines go; writing a line never raises.

    A client that exits closes the pipe our stderr is (Node MCP clients do), and
    the next write fails: EPIPE, EBADF, EIO, ENOSPC as OSError, a closed file as
    ValueError. A log call must not turn that into an exception in the task that
    logged (it killed the reaper once), so the line is dropped and the stream is
    remembered as dead: later lines to it are dropped without a write, rather than
    failing again on every call.

    With ``stream=None`` the target is whatever ``sys.stderr`` is at each write.
    Death is remembered per stream *object*: when ``sys.stderr`` is replaced
    (pytest's capture, a redirection) the new object is written to, and only the
    object that failed stays silent. ``sys.stderr`` being None drops lines too.
    A reconfiguration starts a new sink, which tries each stream afresh once.
    """

    __slots__ = ("_dead", "_lock", "_stream")

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream
        # The failed object itself, not its id(): holding it keeps the id from
        # being reused by a new stream that would then be wrongly skipped.
        self._dead: object | None = None
        # Re-entrant: a signal handler that logs on the thread holding it must not deadlock.
        self._lock = threading.RLock()

    def write_line(self, line: str) -> None:
        target: TextIO | None = self._stream if self._stream is not None else sys.stderr
        if target is None:
            return
        with self._lock:
            if target is self._dead:
                return
            try:
                target.write(line + "\n")
                target.flush()
            except (BlockingIOError, UnicodeError):
                # A non-blocking pipe that is full right now, or a line the stream
                # cannot encode: the stream lives, only this line is lost.
                pass
            except Exception:
                # OSError (BrokenPipeError, EBADF, EIO, ENOSPC), ValueError (closed
                # file), or a stand-in stream that cannot write at all.
                self._dead = target


class _SinkLogger:
    """structlog's ``WriteLogger`` interface, writing through a :class:`_Sink`."""

    __slots__ = ("_sink",)

    def __init__(self, sink: _Sink) -> None:
        self._sink = sink

    def msg(self, message: str) -> None:
        self._sink.write_line(message)

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


class _JsonHandler(logging.Handler):
    """Writes formatted records through the sink structlog's lines use."""

    def __init__(self, sink: _Sink) -> None:
        super().__init__()
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self._sink.write_line(line)

    def handleError(self, record: logging.LogRecord) -> None:
        """A record that cannot be formatted (bad ``%`` arguments) becomes one fixed line.

        Never stdlib's traceback on ``sys.stderr``: that stream may be the broken
        one, and writing it there raises (closed file) or spams a dead pipe.
        """
        error = sys.exc_info()[1]
        try:
            fields: dict[str, Any] = {
                "event": "log_record_unformattable",
                "level": "error",
                "logger": record.name,
                "error": f"{type(error).__name__}: {error}",
                "template": str(record.msg),
            }
            line = json.dumps(_TIMESTAMP(None, "error", fields), sort_keys=True)
        except Exception:
            return
        self._sink.write_line(line)


_TIMESTAMP = structlog.processors.TimeStamper(fmt="iso", utc=True)


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        _TIMESTAMP,
        structlog.processors.StackInfoRenderer(),
    ]


def _route_stdlib(threshold: int, sink: _Sink) -> None:
    """Send every stdlib record through the same JSON rendering, on the same stream."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _JsonHandler)]:
        root.removeHandler(handler)
    handler = _JsonHandler(sink)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            # ExtraAdder: a stdlib record's ``extra={...}`` become fields, so the
            # client library's fixed event words keep their data (worker_identity, code).
            foreign_pre_chain=[
                *_shared_processors(),
                structlog.stdlib.add_logger_name,
                structlog.stdlib.ExtraAdder(allow=_CLIENT_FIELDS),
            ],
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

    # One sink for structlog's lines and stdlib's records: a pipe found dead by
    # either is skipped by both. It looks sys.stderr up per line, not here, so a
    # replaced stderr (test capture, daemon redirection) is honoured.
    sink = _Sink(stream)

    def logger_factory(*_args: Any) -> _SinkLogger:
        return _SinkLogger(sink)

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
    _route_stdlib(threshold, sink)


def get_logger(**bind: Any) -> FilteringBoundLogger:
    """A logger with `bind` as initial context; resolved lazily, so module-level use is fine."""
    return cast(FilteringBoundLogger, structlog.get_logger(**bind))


@contextmanager
def bind_actor(name: str) -> Iterator[None]:
    """Tag every log line of the current task (and tasks it starts) with `actor=name`."""
    with structlog.contextvars.bound_contextvars(actor=name):
        yield
