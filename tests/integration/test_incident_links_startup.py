"""Real ``fleet-supervisor run`` on a legacy incident_links table whose twins disagree."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

LEGACY = """
CREATE TABLE incident_links (
    link_id INTEGER PRIMARY KEY AUTOINCREMENT,
    provider TEXT NOT NULL, provider_base_url TEXT, provider_org TEXT, provider_project TEXT,
    provider_issue_id TEXT NOT NULL, fingerprint TEXT, gitea_org TEXT NOT NULL,
    gitea_repo TEXT NOT NULL, gitea_issue_number INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'open',
    UNIQUE (provider, provider_base_url, provider_org, provider_project, provider_issue_id)
);
INSERT INTO incident_links (provider, provider_issue_id, fingerprint, gitea_org, gitea_repo,
    gitea_issue_number)
VALUES ('sentry', 'dup', 'fingerprint-A', 'org', 'repo', 42),
       ('sentry', 'dup', 'fingerprint-B', 'org', 'repo', 42);
"""


def test_the_daemon_refuses_to_start_and_deletes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "registry.sqlite3"
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.executescript(LEGACY)
    config = tmp_path / "supervisor.toml"
    config.write_text(
        f'[database]\npath = "{db}"\n[socket]\npath = "{tmp_path / "s.sock"}"\n'
        f'[auth]\nprofiles_path = "{tmp_path / "profiles.toml"}"\n',
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "--config", str(config), "run"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("fleet-supervisor: cannot start: store_error: ")
    assert "conflicting observation metadata" in line
    assert "fingerprint" in line
    with closing(sqlite3.connect(db)) as conn:
        kept = conn.execute("SELECT fingerprint FROM incident_links ORDER BY link_id").fetchall()
    assert kept == [("fingerprint-A",), ("fingerprint-B",)]
    assert not (tmp_path / "s.sock").exists()
