"""Tests for supervisor.logs: JSON lines, stderr only, actor binding, reconfiguration."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import structlog

from supervisor.errors import ConfigError
from supervisor.logs import bind_actor, configure_logging, get_logger


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
    logging.getLogger("supervisor.client").info("registered as %s", "wkr-1")
    captured = capsys.readouterr()
    assert captured.out == ""
    foreign, own = (json.loads(line) for line in captured.err.splitlines())
    assert foreign["event"] == "session s-1 crashed"
    assert foreign["level"] == "warning"
    assert foreign["logger"] == "mcp.server.lowlevel"
    assert datetime.fromisoformat(foreign["timestamp"]).utcoffset() == timedelta(0)
    assert own["event"] == "registered as wkr-1"
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
