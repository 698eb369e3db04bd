"""`work health`, `work health-gate` and `work link`: arguments to socket ops, exits, summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.cli import build_parser
from supervisor.cli.work import format_work, succeeded, work_request
from supervisor.errors import ProtocolError


def request(*argv: str) -> tuple[str, dict[str, object]]:
    return work_request(build_parser().parse_args(["work", *argv]))


def test_health_reads_the_probe_and_process_files(tmp_path: Path) -> None:
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps({"success": False, "error": "EOF"}), encoding="utf-8")
    op, args = request(
        "health",
        "--session",
        "s",
        "--namespace",
        "gitea-merger",
        "--probe-result",
        str(probe),
        "--tools",
        "gitea_whoami, gitea_merge_pr",
        "--not-configured",
    )
    assert op == "namespace_health_assess"
    assert args["probe_result"] == {"success": False, "error": "EOF"}
    assert args["registered_tools"] == ["gitea_whoami", "gitea_merge_pr"]
    assert args["configured"] is False
    assert args["process"] is None
    probe.write_text("[1]", encoding="utf-8")
    with pytest.raises(ProtocolError):
        request("health", "--session", "s", "--namespace", "n", "--probe-result", str(probe))


def test_link_reads_without_a_provider_and_upserts_with_one() -> None:
    issue = ["link", "--gitea-org", "o", "--gitea-repo", "r", "--gitea-issue", "3"]
    assert request(*issue) == (
        "incident_link_get",
        {"gitea_org": "o", "gitea_repo": "r", "gitea_issue_number": 3},
    )
    op, args = request(*issue, "--provider", "sentry", "--issue-id", "9", "--prs", "1,2")
    assert (op, args["provider_issue_id"], args["linked_pr_numbers"]) == (
        "incident_link_upsert",
        "9",
        [1, 2],
    )
    with pytest.raises(ProtocolError):
        request(*issue, "--provider", "sentry")
    with pytest.raises(ProtocolError):
        request(*issue, "--provider", "sentry", "--issue-id", "9", "--prs", "a")


def test_exit_status_and_summary() -> None:
    blocked = {"success": True, "allowed": False, "task": "merge_pr", "reasons": ["broken"]}
    assert succeeded("health-gate", blocked) is False
    assert succeeded("health-gate", {**blocked, "allowed": True}) is True
    verdict = {"success": False, "namespace": "gitea-merger", "error_type": "namespace_eof"}
    assert succeeded("health", verdict) is False
    text = format_work({**verdict, "remediation": ["reconnect"]})
    assert "error_type: namespace_eof" in text
    assert "remediation: reconnect" in text
    link = {"provider": "sentry", "provider_issue_id": "9", "link_id": 1, "status": "open"}
    link |= {"gitea_org": "o", "gitea_repo": "r", "gitea_issue_number": 3}
    shown = format_work({"success": True, "incident_link": link, "incident_links": [link]})
    assert "incident link 1: sentry 9 -> o/r#3 (open)" in shown
    assert "incident link: none" in format_work({"success": True, "incident_link": None})
