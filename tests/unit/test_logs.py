"""Tests for supervisor.observe.logs: JSON lines, stderr only, actor binding, reconfiguration."""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import structlog

from supervisor.errors import ConfigError
from supervisor.observe.logs import _JsonHandler, bind_actor, configure_logging, get_logger


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    own = {name: logging.getLogger(name).level for name in ("supervisor", "actors")}
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, own_level in own.items():
        logging.getLogger(name).setLevel(own_level)


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_log_line_is_json_with_actor_level_and_iso_timestamp() -> None:
    stream = io.StringIO()
    configure_logging("info", stream=stream)

    with bind_actor("registry_writer"):
        get_logger(component="store").info("batch_committed", rows=42)
    get_logger().info("outside_actor")

    inside, outside = _lines(stream)
    assert inside["event"] == "batch_committed"
    assert inside["actor"] == "registry_writer"
    assert inside["component"] == "store"
    assert inside["rows"] == 42
    assert inside["level"] == "info"
    stamp = datetime.fromisoformat(inside["timestamp"])
    assert stamp.utcoffset() == timedelta(0)
    # The binding ends with the block.
    assert "actor" not in outside


def test_default_stream_is_stderr_never_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging()
    get_logger().warning("disk_nearly_full")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert json.loads(captured.err)["event"] == "disk_nearly_full"


def test_level_filters_lower_levels() -> None:
    stream = io.StringIO()
    configure_logging("WARNING", stream=stream)
    log = get_logger()
    log.info("dropped")
    log.debug("dropped")
    log.error("kept")
    assert [line["event"] for line in _lines(stream)] == ["kept"]


def test_configure_is_idempotent_and_reconfigures_existing_loggers() -> None:
    first = io.StringIO()
    configure_logging("info", stream=first)
    log = get_logger()
    log.info("one")
    configure_logging("info", stream=first)
    log.info("two")
    assert [line["event"] for line in _lines(first)] == ["one", "two"]

    second = io.StringIO()
    configure_logging("error", stream=second)
    log.info("filtered_now")
    log.error("moved")
    assert [line["event"] for line in _lines(first)] == ["one", "two"]
    assert [line["event"] for line in _lines(second)] == ["moved"]


def test_unknown_level_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="verbose"):
        configure_logging("verbose")


def test_exceptions_are_rendered_as_json() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    try:
        raise RuntimeError("probe failed")
    except RuntimeError:
        get_logger().exception("sweep_crashed")
    (line,) = _lines(stream)
    assert line["event"] == "sweep_crashed"
    assert line["level"] == "error"
    assert "probe failed" in json.dumps(line["exception"])


@pytest.mark.anyio
async def test_actor_binding_is_per_task() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)

    async def actor(name: str) -> None:
        with bind_actor(name):
            await anyio.lowlevel.checkpoint()
            get_logger().info("tick")

    async with anyio.create_task_group() as tg:
        tg.start_soon(actor, "heartbeat")
        tg.start_soon(actor, "liveness")

    assert sorted(line["actor"] for line in _lines(stream)) == ["heartbeat", "liveness"]


def test_stdlib_records_become_json_lines_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info")
    logging.getLogger("mcp.server.lowlevel").warning("session %s crashed", "s-1")
    logging.getLogger("uvicorn.error").info("Started server process")  # below the floor
    logging.getLogger("supervisor.client").info("registered", extra={"worker_identity": "wkr-1"})
    captured = capsys.readouterr()
    assert captured.out == ""
    foreign, own = (json.loads(line) for line in captured.err.splitlines())
    assert foreign["event"] == "session s-1 crashed"
    assert foreign["level"] == "warning"
    assert foreign["logger"] == "mcp.server.lowlevel"
    assert datetime.fromisoformat(foreign["timestamp"]).utcoffset() == timedelta(0)
    # A fixed event word, its data in fields: lines can be counted and filtered by event.
    assert own["event"] == "registered"
    assert own["worker_identity"] == "wkr-1"
    assert own["logger"] == "supervisor.client"


def test_stdlib_exceptions_are_json_and_basic_config_adds_no_text_handler() -> None:
    stream = io.StringIO()
    configure_logging("info", stream=stream)
    # What the MCP SDK does when a server is built: it must not add a plain-text handler.
    logging.basicConfig(level="INFO", format="%(message)s")
    try:
        raise ValueError("bad frame")
    except ValueError:
        logging.getLogger("uvicorn.error").exception("request failed")
    (line,) = _lines(stream)
    assert line["event"] == "request failed"
    assert line["level"] == "error"
    assert "bad frame" in json.dumps(line["exception"])


def test_reconfiguring_replaces_the_stdlib_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("info", stream=first)
    configure_logging("info", stream=second)
    logging.getLogger("mcp").error("once")
    assert first.getvalue() == ""
    assert [line["event"] for line in _lines(second)] == ["once"]


# --- a stream that has gone (issue 22: a client closed our stderr) ----------------------


class _DeadStream(io.StringIO):
    """A stream whose writes fail with ``error``; counts the attempts."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error
        self.attempts = 0

    def write(self, text: str) -> int:
        self.attempts += 1
        raise self.error


_DEATHS = [
    BrokenPipeError(errno.EPIPE, "Broken pipe"),
    OSError(errno.EPIPE, "Broken pipe"),
    OSError(errno.EBADF, "Bad file descriptor"),
    OSError(errno.ENOSPC, "No space left on device"),
    OSError(errno.EIO, "Input/output error"),
    ValueError("I/O operation on closed file."),
]


@pytest.mark.parametrize("error", _DEATHS, ids=repr)
def test_a_failing_stream_is_tried_once_then_dropped_and_nothing_raises(
    error: BaseException,
) -> None:
    dead = _DeadStream(error)
    configure_logging("info", stream=dead)
    get_logger().info("first")
    get_logger().error("second", detail="x")
    logging.getLogger("mcp.server").error("stdlib too")
    logging.getLogger("supervisor.client").info("own stdlib")
    # One attempt found the stream dead; the other three lines were dropped unwritten.
    assert dead.attempts == 1

    fresh = io.StringIO()
    configure_logging("info", stream=fresh)
    get_logger().info("after")
    logging.getLogger("mcp").error("stdlib after")
    assert [line["event"] for line in _lines(fresh)] == ["after", "stdlib after"]


def test_a_stdlib_record_finding_the_stream_dead_stops_structlog_too() -> None:
    dead = _DeadStream(BrokenPipeError(errno.EPIPE, "Broken pipe"))
    configure_logging("info", stream=dead)
    logging.getLogger("uvicorn.error").error("first")
    get_logger().info("second")
    assert dead.attempts == 1


def test_a_flush_that_fails_counts_as_a_dead_stream() -> None:
    class _FlushFails(io.StringIO):
        def flush(self) -> None:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    stream = _FlushFails()
    configure_logging("info", stream=stream)
    get_logger().info("written_not_flushed")
    get_logger().info("dropped")
    assert [line["event"] for line in _lines(stream)] == ["written_not_flushed"]


def test_a_closed_stream_and_a_real_broken_pipe_raise_nothing() -> None:
    closed = io.StringIO()
    closed.close()
    configure_logging("info", stream=closed)
    get_logger().info("into_a_closed_file")

    read_end, write_end = os.pipe()
    os.close(read_end)
    pipe = open(write_end, "w", encoding="utf-8")  # noqa: SIM115 (closed below, after a dup2)
    try:
        configure_logging("info", stream=pipe)
        get_logger().info("into_a_pipe_nobody_reads")
        _our_handler().handle(logging.makeLogRecord({"name": "mcp", "msg": "stdlib too"}))
    finally:
        # The failed line stays in the file's buffer: let its closing flush land in
        # /dev/null, as the CLI does for a dead stderr at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, write_end)
        os.close(devnull)
        pipe.close()


def test_a_full_nonblocking_pipe_loses_the_line_but_not_the_stream() -> None:
    class _Full(io.StringIO):
        full = True

        def write(self, text: str) -> int:
            if self.full:
                raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
            return super().write(text)

    stream = _Full()
    configure_logging("info", stream=stream)
    get_logger().info("lost")
    stream.full = False
    get_logger().info("kept")
    assert [line["event"] for line in _lines(stream)] == ["kept"]


def test_default_stream_follows_a_replaced_stderr_and_skips_only_the_dead_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dead = _DeadStream(BrokenPipeError(errno.EPIPE, "Broken pipe"))
    monkeypatch.setattr(sys, "stderr", dead)
    configure_logging("info")
    get_logger().info("lost")
    logging.getLogger("mcp").error("lost too")
    assert dead.attempts == 1

    # A redirection (or pytest's capture) is a new object: written to without reconfiguring.
    replacement = io.StringIO()
    monkeypatch.setattr(sys, "stderr", replacement)
    get_logger().info("found")
    logging.getLogger("mcp").error("found too")
    assert [line["event"] for line in _lines(replacement)] == ["found", "found too"]

    # Back to the dead one: still not retried.
    monkeypatch.setattr(sys, "stderr", dead)
    get_logger().info("lost again")
    assert dead.attempts == 1


def test_no_stderr_at_all_drops_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", None)
    configure_logging("info")
    get_logger().info("nowhere")
    logging.getLogger("mcp").error("nowhere either")


def _our_handler() -> logging.Handler:
    """The handler configure_logging put on the root logger.

    Called directly where pytest's own capture handler (also on the root logger)
    would raise for the same record, or keep a reference to a pipe.
    """
    (handler,) = [h for h in logging.getLogger().handlers if isinstance(h, _JsonHandler)]
    return handler


def _unformattable() -> logging.LogRecord:
    return logging.makeLogRecord(
        {
            "name": "mcp.server",
            "levelno": logging.ERROR,
            "levelname": "ERROR",
            "msg": "%d sessions",
            "args": ("many",),
        }
    )


def test_an_unformattable_stdlib_record_is_one_fixed_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stream = io.StringIO()
    configure_logging("info", stream=stream)
    _our_handler().handle(_unformattable())
    (line,) = _lines(stream)
    assert line["event"] == "log_record_unformattable"
    assert line["logger"] == "mcp.server"
    assert line["template"] == "%d sessions"
    assert line["error"].startswith("TypeError")
    assert datetime.fromisoformat(line["timestamp"]).utcoffset() == timedelta(0)
    # stdlib's handleError would have printed "--- Logging error ---" here.
    assert capsys.readouterr().err == ""


def test_an_unformattable_record_on_a_dead_stderr_prints_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dead = _DeadStream(ValueError("I/O operation on closed file."))
    monkeypatch.setattr(sys, "stderr", dead)
    configure_logging("info")
    get_logger().info("finds_it_dead")
    _our_handler().handle(_unformattable())
    assert dead.attempts == 1
