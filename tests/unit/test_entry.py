"""The console script's dispatch: ``exec`` (after global options) skips the CLI entirely."""

from __future__ import annotations

import pytest

from supervisor.entry import is_exec


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["exec"], True),
        (["exec", "--", "srv"], True),
        (["--config", "x", "exec"], True),
        (["--config=x", "exec", "--", "srv"], True),
        (["--socket=y", "exec"], True),
        (["--socket", "y", "--config", "x", "exec"], True),
        (["--config", "exec", "status"], False),  # "exec" is the config file's name here
        (["status"], False),
        (["--config", "x", "status"], False),
        (["--socket=y", "run"], False),
        ([], False),
        (["--version"], False),
        (["-h"], False),
        (["--config"], False),
        (["--config", "x"], False),
        (["--unknown", "exec"], False),  # left to the CLI, which reports the option
        (["launch-config", "exec"], False),
        (["EXEC"], False),
    ],
)
def test_is_exec(argv: list[str], expected: bool) -> None:
    assert is_exec(argv) is expected
