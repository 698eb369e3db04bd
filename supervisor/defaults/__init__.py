"""The shipped default config files, read from the installed package (copies of config/)."""

from __future__ import annotations

from importlib import resources

__all__ = ["DEFAULT_NAMES", "PROFILES", "SUPERVISOR", "read_default"]

SUPERVISOR = "supervisor.toml"
PROFILES = "profiles.toml"
DEFAULT_NAMES = (SUPERVISOR, PROFILES)


def read_default(name: str) -> str:
    """The text of a shipped default file.

    Read through importlib.resources so it works from a wheel, a zip or a
    checkout alike: the repository's top-level ``config/`` is not installed.
    """
    if name not in DEFAULT_NAMES:
        raise ValueError(f"no shipped default named {name!r}; known: {', '.join(DEFAULT_NAMES)}")
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
