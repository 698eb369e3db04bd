"""Every ``fleet-supervisor …`` command the README and docs/ show parses with the real CLI."""

from __future__ import annotations

import argparse
import math
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from supervisor.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]

#: Where a command starts: the program's name as a word of its own (``.venv/bin/`` and
#: ``$(`` may precede it; ``fleet-supervisor.sock`` or ``…/fleet-supervisor/`` are paths).
_PROGRAM = re.compile(r"(?:^|(?<=[\s(/`]))fleet-supervisor(?=\s|$|`)")
#: Single-backtick code spans; a span may run over a line break inside a paragraph.
_SPAN = re.compile(r"`([^`]+)`")
#: Words that stand for something left out: never a subcommand, flag or positional.
_ELLIPSES = frozenset({"…", "..."})
#: A flag value written as a placeholder (``PATH``, ``<ID>``, ``$SESSION``, ``wkr-…``).
_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$|[<…$]|\.\.\.")
#: A redirection (``> out``, ``2>&1``, ``< in``); ``<ID>`` is a placeholder, not one.
_REDIRECT = re.compile(r"^\d*>|^<$")


@dataclass(frozen=True, slots=True)
class Shown:
    """One command as a page shows it: where, and the words after the program name."""

    where: str
    argv: tuple[str, ...]


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _fragments(markdown: str) -> Iterator[tuple[int, str, bool]]:
    """Code-block lines (``\\`` continuations joined) and inline code spans (``True``)."""
    prose: list[str] = []
    fenced = False
    pending: list[str] = []
    start = 0
    for number, line in enumerate(markdown.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            prose.append("")
            continue
        if not fenced:
            prose.append(line)
            continue
        prose.append("")  # keeps the prose's line numbers those of the page
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        yield start, " ".join([*pending, line]), False
        pending = []
    text = "\n".join(prose)
    for span in _SPAN.finditer(text):
        if "\n\n" not in span.group(1):  # a span never crosses a paragraph
            yield text.count("\n", 0, span.start()) + 1, span.group(1).replace("\n", " "), True


def _command_text(rest: str) -> str:
    """The command's own text: up to a shell operator, a comment or the end of the span."""
    quote = ""
    depth = 0
    for index, char in enumerate(rest):
        before = rest[index - 1] if index else " "
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif _ends_command(char, before, depth):
            return rest[:index]
    return rest


def _ends_command(char: str, before: str, depth: int) -> bool:
    # ``|`` inside ``[--set PR | --clear]`` separates alternatives; outside, it pipes.
    if char in ";)`\n" or (char == "#" and before.isspace()):
        return True
    return char in "&|" and depth == 0 and (before.isspace() or before in "&|")


def _words(text: str) -> list[str]:
    """Shell words with the usage brackets of ``[--json]`` and ``[--set PR | --clear]`` gone."""
    words: list[str] = []
    for word in shlex.split(text):
        if _REDIRECT.match(word):
            break
        bare = word.strip("[]")
        if bare and bare != "|":
            words.append(bare)
    return words


def commands_in(markdown: str, page: str, subcommands: frozenset[str]) -> list[Shown]:
    """Every ``fleet-supervisor`` command in a page's code blocks and inline code.

    Prose also writes a command without the program's name (``snapshot --history``): an
    inline span of more than one word whose first word is one of ``subcommands``.
    """
    shown: list[Shown] = []
    for line, fragment, inline in _fragments(markdown):
        starts = [match.end() for match in _PROGRAM.finditer(fragment)]
        first, _, rest = fragment.partition(" ")
        if inline and not starts and first in subcommands and rest.strip():
            starts = [0]
        for start in starts:
            words = _words(_command_text(fragment[start:]))
            if words:
                shown.append(Shown(f"{page}:{line}", tuple(words)))
    return shown


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return None


def _value_count(action: argparse.Action) -> float:
    """How many words an action takes (after its flag, or as a positional)."""
    nargs = action.nargs
    if nargs is None or nargs == argparse.OPTIONAL:
        return 1
    if isinstance(nargs, int):
        return nargs
    return math.inf  # *, +, REMAINDER: every word up to the next flag


def _positional_room(parser: argparse.ArgumentParser) -> float:
    room: float = 0
    for action in parser._actions:
        if action.option_strings or isinstance(action, argparse._SubParsersAction):
            continue
        room += _value_count(action)
    return room


def _bad_value(action: argparse.Action, value: str) -> str | None:
    if action.choices is None or _PLACEHOLDER.search(value):
        return None
    # ``--scope user|project`` shows every choice at once.
    if all(choice in action.choices for choice in value.split("|")):
        return None
    return f"{value!r} is not one of {sorted(action.choices)} for {action.option_strings[0]}"


def problem(argv: Sequence[str], parser: argparse.ArgumentParser) -> str | None:
    """Why ``fleet-supervisor ARGV`` would not parse, or None when every word has its place.

    Walks the parser as argparse would: global flags, then subcommand after subcommand,
    then the leaf's flags (exact names, never abbreviations) and positionals. Required
    arguments may be left out: prose names a command without all of them.
    """
    path = ["fleet-supervisor"]
    positionals = 0
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        if word in _ELLIPSES:
            continue
        if word == "--":
            return None  # the rest is the command exec or launch-config wraps
        if word.startswith("-") and word != "-":
            flag, has_value, value = word.partition("=")
            action = parser._option_string_actions.get(flag)
            if action is None:
                return f"{' '.join(path)}: unknown flag {flag}"
            wanted = _value_count(action)
            if has_value:
                if wanted == 0:
                    return f"{' '.join(path)}: {flag} takes no value"
                values = [value]
            else:
                values = []
                while len(values) < wanted and index < len(argv):
                    if argv[index].startswith("-") and argv[index] not in _ELLIPSES:
                        break
                    values.append(argv[index])
                    index += 1
            for given in values:
                if (bad := _bad_value(action, given)) is not None:
                    return f"{' '.join(path)}: {bad}"
            continue
        choices = _subcommands(parser)
        if choices is not None:
            if word not in choices:
                return f"{' '.join(path)}: unknown subcommand {word!r}"
            parser = choices[word]
            path.append(word)
            continue
        positionals += 1
        if positionals > _positional_room(parser):
            return f"{' '.join(path)}: unexpected argument {word!r}"
    return None


def _top_level() -> frozenset[str]:
    return frozenset(_subcommands(build_parser()) or ())


def _all_shown() -> list[Shown]:
    return [
        shown
        for page in doc_pages()
        for shown in commands_in(
            page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)), _top_level()
        )
    ]


SHOWN = _all_shown()


@pytest.mark.parametrize("shown", SHOWN, ids=[s.where for s in SHOWN])
def test_every_shown_command_parses(shown: Shown) -> None:
    assert problem(shown.argv, build_parser()) is None, f"{shown.where}: {' '.join(shown.argv)}"


def test_the_pages_show_commands_of_every_kind() -> None:
    # The extraction must find what the pages show, or the test above proves nothing.
    found = {(s.where.split(":")[0], s.argv[:2]) for s in SHOWN}
    assert ("README.md", ("clients", "wrap")) in found
    assert ("README.md", ("run",)) in found
    assert ("docs/operations.md", ("token", "create")) in found  # inside $( … )
    assert ("docs/multi-host.md", ("--config", "supervisor.toml")) in found
    pages = {where for where, _ in found}
    assert len(pages) >= 8
    assert len(SHOWN) >= 40


def test_extraction_handles_continuations_prompts_pipes_and_brackets() -> None:
    page = "\n".join(
        [
            "Run `fleet-supervisor plan --reason CODE\n--limit 5` first.",
            "```sh",
            "$ fleet-supervisor snapshot --json | jq .workers",
            "fleet-supervisor apply --scope-fingerprint <FP> \\",
            "    --candidate-fingerprint … --workers ID,ID && echo done",
            "export T=$(fleet-supervisor token create prgs-reconciler)  # shown once",
            "fleet-supervisor work lock [--set PR | --clear] > lock.txt",
            "fleet-supervisor exec --name x -- python -m server --anything",
            "```",
            "Paths such as `fleet-supervisor.sock` and `~/.config/fleet-supervisor/` are not",
            "commands, nor is `fleet-supervisor: cannot start`.",
        ]
    )
    assert [(s.where, s.argv) for s in commands_in(page, "p", _top_level())] == [
        ("p:4", ("snapshot", "--json")),
        (
            "p:5",
            (
                "apply",
                "--scope-fingerprint",
                "<FP>",
                "--candidate-fingerprint",
                "…",
                "--workers",
                "ID,ID",
            ),
        ),
        ("p:7", ("token", "create", "prgs-reconciler")),
        ("p:8", ("work", "lock", "--set", "PR", "--clear")),
        ("p:9", ("exec", "--name", "x", "--", "python", "-m", "server", "--anything")),
        ("p:1", ("plan", "--reason", "CODE", "--limit", "5")),
    ]


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["frobnicate"], "fleet-supervisor: unknown subcommand 'frobnicate'"),
        (["hosts", "retire", "HOST"], "fleet-supervisor hosts: unknown subcommand 'retire'"),
        (["plan", "--no-such-flag"], "fleet-supervisor plan: unknown flag --no-such-flag"),
        (["run", "--token", "T"], "fleet-supervisor run: unknown flag --token"),
        (["--db", "x", "run"], "fleet-supervisor: unknown flag --db"),
        (["status", "--json=yes"], "fleet-supervisor status: --json takes no value"),
        (["snapshot", "extra"], "fleet-supervisor snapshot: unexpected argument 'extra'"),
        (
            ["clients", "wrap", "--scope", "global"],
            "fleet-supervisor clients wrap: 'global' is not one of ['project', 'user'] for --scope",
        ),
    ],
)
def test_the_checker_refuses_what_the_parser_refuses(argv: list[str], complaint: str) -> None:
    assert problem(argv, build_parser()) == complaint
    with pytest.raises(SystemExit):  # argparse itself agrees
        build_parser().parse_args(argv)


def test_flags_are_spelt_out_in_full() -> None:
    # argparse would take the prefix; a page should not teach one.
    assert problem(["plan", "--ful"], build_parser()) == "fleet-supervisor plan: unknown flag --ful"


@pytest.mark.parametrize(
    "argv",
    [
        ["--config", "supervisor.toml", "run", "--db", "r.sqlite3"],
        [
            "hosts",
            "apply",
            "HOST",
            "--host-token",
            "T",
            "--candidate-fingerprint",
            "F",
            "--workers",
            "ID,ID",
        ],
        ["clients", "wrap", "--scope", "user|project", "--dry-run"],
        ["namespace-probe", "--namespace", "NAME", "...", "--json"],
        ["exec", "--client", "claude_code", "--", "python", "--whatever"],
        ["--version"],
    ],
)
def test_the_checker_accepts_what_the_pages_may_show(argv: list[str]) -> None:
    assert problem(argv, build_parser()) is None
