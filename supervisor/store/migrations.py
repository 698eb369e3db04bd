"""The engine-neutral migration loop: which versions to apply, in order, and never a downgrade."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from supervisor.errors import StoreError
from supervisor.store.schema.tables import CURRENT_VERSION, MIGRATIONS, Migration

__all__ = ["run_migrations"]


async def run_migrations(
    current: int, target_version: int, apply: Callable[[Migration], Awaitable[bool]]
) -> tuple[int, ...]:
    """Apply every migration in ``current < version <= target_version``; the versions
    this call applied (``apply`` answers False when another process got there first)."""
    if not 0 <= target_version <= CURRENT_VERSION:
        raise StoreError(f"target_version must be in 0..{CURRENT_VERSION}, got {target_version}")
    if current > CURRENT_VERSION:
        # A newer supervisor wrote this database; writing with an older schema idea
        # could drop columns' meaning on the floor. Refuse instead of guessing.
        raise StoreError(
            f"database schema version {current} is newer than this supervisor's "
            f"{CURRENT_VERSION}; upgrade the supervisor"
        )
    applied: list[int] = []
    for migration in MIGRATIONS:
        if current < migration.version <= target_version and await apply(migration):
            applied.append(migration.version)
    return tuple(applied)
