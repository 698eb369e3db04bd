"""Every command's ``--help`` says what each of its options does, ``exec`` included."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.cli.parser import build_parser
from supervisor.exec.exec_args import AS_WRITTEN, OPTIONS, VALUE_FLAGS, help_text

_CONSOLE_SCRIPT = Path(sys.executable).parent / "fleet-supervisor"


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _undescribed(parser: argparse.ArgumentParser) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            # Each subcommand's one-line help shows in its parent's list.
            missing += [
                f"subcommand {choice.dest}"
                for choice in action._choices_actions
                if not (choice.help or "").strip()
            ]
            continue
        if action.help == argparse.SUPPRESS:
            continue  # hidden on purpose (written by `clients wrap` for `clients unwrap`)
        if not (action.help or "").strip():
            missing.append("/".join(action.option_strings) or action.dest)
    return missing


def test_the_walk_reaches_every_command() -> None:
    found = {" ".join(path) for path, _ in _commands(build_parser())}
    assert {"run", "exec", "clients wrap", "reap plan", "work assign", "token create"} <= found
    assert {"service install", "service status", "service uninstall", "doctor"} <= found


def test_every_option_of_every_command_has_a_description() -> None:
    missing = {
        " ".join(path) or "(top)": gaps
        for path, parser in _commands(build_parser())
        if (gaps := _undescribed(parser))
    }
    assert missing == {}


def test_a_described_option_shows_in_the_printed_help() -> None:
    # The walk above reads the parser; this reads what a user sees.
    for path, parser in _commands(build_parser()):
        text = parser.format_help()
        for action in parser._actions:
            if action.option_strings and action.help not in (None, argparse.SUPPRESS):
                assert action.option_strings[-1] in text, (path, action.option_strings)


def test_exec_help_describes_every_flag_the_wrapper_takes() -> None:
    described = {flag for flag, _, what in OPTIONS if what.strip()}
    taken = {*VALUE_FLAGS, "--no-parent-death-signal"} - {AS_WRITTEN}
    assert described == taken
    text = help_text()
    for flag, _, what in OPTIONS:
        assert flag in text
        assert " ".join(what.split()[:4]) in " ".join(text.split())


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_the_console_script_prints_the_exec_help_without_the_cli(flag: str) -> None:
    # `fleet-supervisor exec` never loads argparse: its help is the wrapper's own text.
    done = subprocess.run(
        [str(_CONSOLE_SCRIPT), "exec", flag],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == help_text()
    for option, _, _ in OPTIONS:
        assert option in done.stdout
