"""How a command line names what it runs: the program's name, and the script a runner runs."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["command_name", "runner_script"]

_SUFFIXES = (".exe", ".js", ".cjs", ".mjs", ".py")


def command_name(arg: str) -> str:
    """A program's name from a path: its last component, lowercased, without ``.js``/``.exe``."""
    name = arg.replace("\\", "/").rpartition("/")[2].lower()
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def runner_script(argv: Sequence[str]) -> str:
    """The script a runner (``node``, ``python3``) runs, with ``/`` separators, or "".

    It is the runner's first word that is not an option: Gemini CLI relaunches itself
    as ``node --max-old-space-size=N …/gemini``.
    """
    script = next((arg for arg in argv[1:] if not arg.startswith("-")), "")
    return script.replace("\\", "/")
