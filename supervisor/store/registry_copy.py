"""Copy a SQLite registry, history included, into an empty PostgreSQL one, and prove it equal."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread

from supervisor.errors import StoreError
from supervisor.policy.canonical import canon, digest
from supervisor.policy.retirement.fingerprints import registry_fingerprint
from supervisor.store.postgres.connection import PgConnection, coercer, connect, redact_url
from supervisor.store.postgres.open import migrate_postgres
from supervisor.store.schema.tables import CURRENT_VERSION

__all__ = ["CopyReport", "TableCopy", "copy_sqlite_to_postgres", "parse_sqlite_source"]

#: PostgreSQL's information_schema spelling → the coercer's type name.
_PG_TYPES = {"text": "text", "integer": "int4", "bigint": "int8", "double precision": "float8"}


@dataclass(frozen=True, slots=True, kw_only=True)
class TableCopy:
    table: str
    rows: int
    fingerprint: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyReport:
    """Per table: rows and a content fingerprint, equal on both sides (else StoreError)."""

    source: str
    target: str
    schema_version: int
    tables: tuple[TableCopy, ...]
    registry_fingerprint: str


def parse_sqlite_source(value: str) -> Path:
    """``sqlite:PATH`` (or ``sqlite:///PATH``) → the file path."""
    if not value.startswith("sqlite:"):
        raise StoreError(f"--from must be sqlite:PATH, got {value!r}")
    rest = value.removeprefix("sqlite:")
    rest = rest.removeprefix("//") if rest.startswith("///") else rest
    if not rest:
        raise StoreError("--from sqlite: needs a path")
    return Path(rest).expanduser()


def _fingerprint(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    # canon(): the same value reads the same from either engine (900 and 900.0 alike).
    units = ["\x1f".join(f"{c}={canon(v)}" for c, v in zip(columns, r, strict=True)) for r in rows]
    return digest("tablefp-v1", units, "tablefp")


#: Kept by the stores from the other tables (the history digest and its change log,
#: the active-row change log and heartbeat batch counter): not copied, as the
#: PostgreSQL triggers log every row the copy inserts (and PostgreSQL keeps no
#: active-row log).
_DERIVED_TABLES = frozenset(
    {
        "registry_history_digest",
        "registry_history_changes",
        "registry_active_changes",
        "registry_stamp_batches",
    }
)


def _read_sqlite(path: Path) -> tuple[int, dict[str, tuple[list[str], list[tuple[Any, ...]]]]]:
    """Schema version and every table's columns and rows (read-only, one snapshot)."""
    if not path.is_file():
        raise StoreError(f"no SQLite registry at {path}")
    uri = f"file:{path}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            conn.execute("BEGIN")  # one consistent snapshot of every table
            names = [
                str(r[0])
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY name"
                )
            ]
            if "schema_migrations" not in names:
                raise StoreError(f"{path} is not a fleet-supervisor registry")
            version = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
            tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = {}
            for name in names:
                if name == "schema_migrations" or name in _DERIVED_TABLES:
                    continue
                columns = [str(c[1]) for c in conn.execute(f'PRAGMA table_info("{name}")')]
                rows = list(conn.execute(f'SELECT * FROM "{name}" ORDER BY rowid'))
                tables[name] = (columns, rows)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read SQLite registry {path}: {exc}") from exc
    return int(version or 0), tables


async def _target_columns(conn: PgConnection, table: str) -> dict[str, str]:
    found = await conn.fetch(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = $1",
        (table,),
    )
    return {str(name): str(kind) for name, kind in found}


async def _copy_table(
    conn: PgConnection, table: str, columns: list[str], rows: list[tuple[Any, ...]]
) -> None:
    target = await _target_columns(conn, table)
    if not target:
        raise StoreError(f"the PostgreSQL registry has no table {table!r}")
    missing = [c for c in columns if c not in target]
    if missing:
        raise StoreError(f"{table}: the PostgreSQL table lacks {', '.join(missing)}")
    count = await conn.fetch(f'SELECT count(*) FROM "{table}"')
    if count[0][0]:
        # Never merge two registries: the copy is only ever into an empty one.
        raise StoreError(f"{table} already has rows in the PostgreSQL registry; refusing")
    coerce = [coercer(_PG_TYPES.get(target[c], "other")) for c in columns]
    records = [tuple(f(v) for f, v in zip(coerce, row, strict=True)) for row in rows]
    try:
        await conn.raw.copy_records_to_table(table, records=records, columns=columns)
    except Exception as exc:
        raise StoreError(f"copying {table} failed: {type(exc).__name__}: {exc}") from exc
    # Store-generated ids continue after the copied ones.
    for column in columns:
        sequence = await conn.fetch("SELECT pg_get_serial_sequence($1, $2)", (f'"{table}"', column))
        if sequence and sequence[0][0]:
            await conn.fetch(
                f'SELECT setval($1, COALESCE((SELECT MAX("{column}") FROM "{table}"), 0) + 1, '
                "false)",
                (sequence[0][0],),
            )


async def _verify(
    conn: PgConnection, tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]]
) -> tuple[TableCopy, ...]:
    report: list[TableCopy] = []
    for table, (columns, rows) in tables.items():
        quoted = ", ".join(f'"{c}"' for c in columns)
        # Unordered: the fingerprint sorts its units, so row order never matters.
        copied = await conn.fetch(f'SELECT {quoted} FROM "{table}"')
        expected = _fingerprint(columns, rows)
        actual = _fingerprint(columns, copied)
        if len(copied) != len(rows) or actual != expected:
            raise StoreError(
                f"{table}: copy differs from the source ({len(copied)} of {len(rows)} rows)"
            )
        report.append(TableCopy(table=table, rows=len(rows), fingerprint=actual))
    return tuple(report)


async def copy_sqlite_to_postgres(source: Path, url: str) -> CopyReport:
    """Copy every table of the SQLite registry at ``source`` into the empty one at ``url``.

    The source must be at this supervisor's schema version (start the supervisor on it
    once to upgrade it); it is opened read-only. The target is migrated, then filled in
    one transaction, then re-read and compared table by table: row counts and a
    fingerprint over every value. Any difference rolls the whole copy back.
    """
    version, tables = await anyio.to_thread.run_sync(_read_sqlite, source)
    if version != CURRENT_VERSION:
        raise StoreError(
            f"{source} is at schema version {version}, this supervisor at {CURRENT_VERSION}: "
            "open it with this supervisor first"
        )
    await migrate_postgres(url)
    conn = await connect(url, connect_timeout=10.0)
    try:
        await conn.command("BEGIN")
        try:
            for table, (columns, rows) in tables.items():
                await _copy_table(conn, table, columns, rows)
            report = await _verify(conn, tables)
            registrations = tables.get("worker_registrations", ([], []))
            rows_as_dicts = [dict(zip(registrations[0], r, strict=True)) for r in registrations[1]]
            copied = await conn.fetch(
                f"SELECT {', '.join(registrations[0])} FROM worker_registrations"
            )
            copied_dicts = [dict(zip(registrations[0], r, strict=True)) for r in copied]
            token = registry_fingerprint(rows_as_dicts)
            if registry_fingerprint(copied_dicts) != token:
                raise StoreError("the registry fingerprint of the copy differs from the source")
        except BaseException:
            await conn.command("ROLLBACK")
            raise
        status = await conn.command("COMMIT")
        if status != "COMMIT":
            raise StoreError("the copy was rolled back by PostgreSQL")
    finally:
        await conn.close()
    return CopyReport(
        source=str(source),
        target=redact_url(url),
        schema_version=version,
        tables=report,
        registry_fingerprint=token,
    )
