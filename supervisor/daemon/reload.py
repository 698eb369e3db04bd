"""SIGHUP: supervisor.toml read again, checked, and what can change in a running daemon applied."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace

from supervisor.errors import ConfigError
from supervisor.handle import SupervisorHandle
from supervisor.observe.logs import configure_logging, get_logger
from supervisor.settings.config import Settings

__all__ = ["RELOADABLE", "reload_settings", "settings_changed"]

_log = get_logger()

#: What a running daemon takes from a reloaded file; anything else needs a restart
#: (sockets, the database, actor timings are claimed or built once, at start-up).
RELOADABLE = frozenset(
    {"retirement.mass_guard_share", "retirement.mass_guard_floor", "supervisor.log_level"}
)


def settings_changed(old: Settings, new: Settings) -> tuple[str, ...]:
    """The dotted keys whose values differ, in the file's table order."""
    changed = []
    for table in fields(old):
        before, after = getattr(old, table.name), getattr(new, table.name)
        for key in fields(before):
            if getattr(before, key.name) != getattr(after, key.name):
                changed.append(f"{table.name}.{key.name}")
    return tuple(changed)


def _taken(current: Settings, fresh: Settings) -> Settings:
    """``current`` with every ``RELOADABLE`` key's value from ``fresh``."""
    taken = current
    for dotted in RELOADABLE:
        table, key = dotted.split(".")
        body = replace(getattr(taken, table), **{key: getattr(getattr(fresh, table), key)})
        taken = replace(taken, **{table: body})
    return taken


async def reload_settings(
    current: Settings, read: Callable[[], Settings], handle: SupervisorHandle
) -> Settings:
    """Read the settings again; a file that does not load is logged and changes nothing.
    Returns the settings now in effect."""
    try:
        fresh = read()
    except ConfigError as exc:
        _log.error("config_reload_failed", error=exc.detail, kept="the settings in effect")
        return current
    in_effect = _taken(current, fresh)
    applied = settings_changed(current, in_effect)
    if "supervisor.log_level" in applied:
        configure_logging(in_effect.supervisor.log_level)
    guard = in_effect.retirement
    if {"retirement.mass_guard_share", "retirement.mass_guard_floor"} & set(applied):
        await handle.set_mass_guard(share=guard.mass_guard_share, floor=guard.mass_guard_floor)
    _log.info(
        "config_reloaded",
        applied=list(applied),
        needs_restart=list(settings_changed(in_effect, fresh)),
    )
    return in_effect
