"""Schema v4 incident_links: NOT NULL scope, one UNIQUE key, and the fail-closed legacy collapse."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from supervisor.errors import StoreError, SupervisorError
from supervisor.store.sqlite.open import open_sqlite_store, sqlite_store
from tests.store.rowdata import raw_query

pytestmark = pytest.mark.anyio

# The seed's version-1 layout: nullable scope columns under a UNIQUE that SQLite lets
# NULL twins through.
LEGACY_FULL = """
CREATE TABLE incident_links (
    link_id INTEGER PRIMARY KEY AUTOINCREMENT,
    provider TEXT NOT NULL, provider_base_url TEXT, provider_org TEXT, provider_project TEXT,
    provider_issue_id TEXT NOT NULL, provider_short_id TEXT, provider_permalink TEXT,
    fingerprint TEXT, gitea_org TEXT NOT NULL, gitea_repo TEXT NOT NULL,
    gitea_issue_number INTEGER NOT NULL, linked_pr_numbers TEXT, first_seen TEXT,
    last_seen TEXT, event_count INTEGER, status TEXT NOT NULL DEFAULT 'open',
    release_resolved_at TEXT, last_sync_at TEXT,
    UNIQUE (provider, provider_base_url, provider_org, provider_project, provider_issue_id)
);
"""
# An older variant that lacks every observation column but status.
LEGACY_MINIMAL = """
CREATE TABLE incident_links (
    link_id INTEGER PRIMARY KEY AUTOINCREMENT,
    provider TEXT NOT NULL, provider_base_url TEXT, provider_org TEXT, provider_project TEXT,
    provider_issue_id TEXT NOT NULL, gitea_org TEXT NOT NULL, gitea_repo TEXT NOT NULL,
    gitea_issue_number INTEGER NOT NULL, status TEXT NOT NULL DEFAULT 'open',
    UNIQUE (provider, provider_base_url, provider_org, provider_project, provider_issue_id)
);
"""


def legacy_db(path: Path, ddl: str, inserts: str) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executescript(ddl + inserts)


def link_rows(path: Path) -> list[tuple[object, ...]]:
    return raw_query(
        path,
        "SELECT link_id, provider_base_url, provider_org, provider_project, provider_issue_id, "
        "gitea_issue_number, fingerprint FROM incident_links ORDER BY link_id",
    )


async def test_fresh_table_refuses_null_scope_and_twins(db_path: Path) -> None:
    async with sqlite_store(db_path):
        pass
    columns = raw_query(
        db_path, "SELECT name, \"notnull\", dflt_value FROM pragma_table_info('incident_links')"
    )
    scope = {name: (notnull, default) for name, notnull, default in columns}
    for field in ("provider_base_url", "provider_org", "provider_project"):
        assert scope[field] == (1, "''"), field
    assert scope["status"] == (1, "'open'")
    with closing(sqlite3.connect(db_path)) as conn:
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(
                "INSERT INTO incident_links (provider, provider_base_url, provider_issue_id, "
                "gitea_org, gitea_repo, gitea_issue_number) VALUES ('s', NULL, 'i', 'o', 'r', 1)"
            )
        insert = (
            "INSERT INTO incident_links (provider, provider_issue_id, gitea_org, gitea_repo, "
            "gitea_issue_number) VALUES ('s', 'i', 'o', 'r', 1)"
        )
        conn.execute(insert)
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(insert)
    # Incidents still never become work items: the kind CHECK is unchanged.
    with closing(sqlite3.connect(db_path)) as conn, pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO work_items (work_item_key, remote, org, repo, kind, number, state) "
            "VALUES ('k', 'prgs', 'o', 'r', 'sentry', 1, 'open')"
        )


async def test_agreeing_null_scope_twins_collapse_to_the_lowest_link_id(db_path: Path) -> None:
    legacy_db(
        db_path,
        LEGACY_FULL,
        """
        INSERT INTO incident_links (provider, provider_base_url, provider_org, provider_project,
            provider_issue_id, gitea_org, gitea_repo, gitea_issue_number, fingerprint, status)
        VALUES ('sentry', NULL, NULL, NULL, 'dup-1', 'org', 'repo', 10, 'fp', 'open'),
               ('sentry', '', '  ', NULL, 'dup-1', 'org', 'repo', 10, 'fp', 'open'),
               ('sentry', 'https://s.example', 'acme', NULL, 'solo', 'org', 'repo', 11, NULL,
                'open');
        """,
    )
    async with sqlite_store(db_path) as store:
        assert 4 in store.applied_migrations
    assert link_rows(db_path) == [
        (1, "", "", "", "dup-1", 10, "fp"),
        (3, "https://s.example", "acme", "", "solo", 11, None),
    ]
    tables = {r[0] for r in raw_query(db_path, "SELECT name FROM sqlite_master")}
    assert "incident_links_legacy" not in tables


async def test_a_legacy_table_without_observation_columns_collapses(db_path: Path) -> None:
    legacy_db(
        db_path,
        LEGACY_MINIMAL,
        """
        INSERT INTO incident_links (provider, provider_base_url, provider_org, provider_project,
            provider_issue_id, gitea_org, gitea_repo, gitea_issue_number)
        VALUES ('sentry', NULL, NULL, NULL, 'dup', 'org', 'repo', 1),
               ('sentry', NULL, NULL, NULL, 'dup', 'org', 'repo', 1);
        """,
    )
    async with sqlite_store(db_path):
        pass
    assert link_rows(db_path) == [(1, "", "", "", "dup", 1, None)]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            "('sentry', NULL, NULL, NULL, 'dup-c', 'org', 'repo', 1, 'fp', 1),"
            "('sentry', NULL, NULL, NULL, 'dup-c', 'org', 'repo', 2, 'fp', 1)",
            ["conflicting", "provider_issue_id='dup-c'"],
        ),
        (
            "('sentry', NULL, NULL, NULL, 'dup-m', 'org', 'repo', 42, 'fingerprint-A', 1),"
            "('sentry', NULL, NULL, NULL, 'dup-m', 'org', 'repo', 42, 'fingerprint-B', 99)",
            [
                "conflicting observation metadata",
                "provider_issue_id='dup-m'",
                "fingerprint",
                "event_count",
            ],
        ),
        (
            # NULL against a value is a difference too.
            "('sentry', NULL, NULL, NULL, 'dup-n', 'org', 'repo', 42, NULL, 1),"
            "('sentry', NULL, NULL, NULL, 'dup-n', 'org', 'repo', 42, 'fp', 1)",
            ["conflicting observation metadata", "fingerprint"],
        ),
    ],
)
async def test_disagreeing_twins_fail_closed_and_delete_nothing(
    db_path: Path, values: str, expected: list[str]
) -> None:
    legacy_db(
        db_path,
        LEGACY_FULL,
        "INSERT INTO incident_links (provider, provider_base_url, provider_org, "
        "provider_project, provider_issue_id, gitea_org, gitea_repo, gitea_issue_number, "
        f"fingerprint, event_count) VALUES {values};",
    )
    before = raw_query(db_path, "SELECT * FROM incident_links ORDER BY link_id")
    with pytest.raises(StoreError) as refused:
        await open_sqlite_store(db_path)
    assert isinstance(refused.value, SupervisorError)
    message = str(refused.value)
    for part in expected:
        assert part in message
    # The v4 transaction rolled back: the legacy rows and layout are untouched.
    assert raw_query(db_path, "SELECT * FROM incident_links ORDER BY link_id") == before
    versions = [r[0] for r in raw_query(db_path, "SELECT version FROM schema_migrations")]
    assert versions == [1, 2, 3]
    tables = {r[0] for r in raw_query(db_path, "SELECT name FROM sqlite_master")}
    assert "namespace_health" not in tables
    assert "incident_links_legacy" not in tables
