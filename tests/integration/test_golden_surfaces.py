"""Golden answers: the MCP ``tools/list`` of both MCP surfaces and one socket answer per op.

The stored JSON under ``tests/golden/`` is the compatibility contract of the wire format
and the tool schemas: a refactor must leave it byte-for-byte equal. Volatile values
(timestamps, generated ids, pids, paths) are normalised before comparing. Regenerate
with ``FLEET_UPDATE_GOLDEN=1 pytest tests/integration/test_golden_surfaces.py`` only
when a change of the contract is intended.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client as McpClient

from supervisor.operations.fleet import OPERATOR_OPS, WORKER_OPS
from supervisor.operations.registry import CONTROL_OPS, HOST_OPS
from supervisor.settings.config import SocketConfig
from supervisor.settings.profile_edits import create_token
from supervisor.settings.profiles import ProfileBook
from supervisor.surfaces.mcp.bridge import SocketToolBackend
from supervisor.surfaces.mcp.tools import build_mcp_server
from tests.actors.harness import INSTANCE, READER, REPO
from tests.actors.helpers_app import SettledHarness, harness
from tests.actors.helpers_retirement import PAST_TTL, enroll, ensure_swept
from tests.integration.socket_helpers import read_frames, serve, short_dir

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("FLEET_UPDATE_GOLDEN") == "1"

PROFILES = """\
[profiles.g-controller]
role_kind = "controller"
allowed_operations = ["gitea.read", "gitea.workflow.lease", "gitea.worker_registry.retire"]

[profiles.g-author]
role_kind = "author"
allowed_operations = ["gitea.read", "gitea.workflow.lease"]

[profiles.g-bystander]
role_kind = "reviewer"
allowed_operations = []
"""
NAMES = ("g-controller", "g-author", "g-bystander")
WHERE = {"remote": "prgs", "org": "org", "repo": "repo"}
ITEM = {**WHERE, "kind": "issue", "number": 600}
SHA = "a" * 40


def _check(name: str, actual: Any) -> None:
    path = GOLDEN / name
    text = json.dumps(actual, indent=2, sort_keys=True) + "\n"
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"{path} is missing; run with FLEET_UPDATE_GOLDEN=1 to write it")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    expected = json.loads(path.read_text(encoding="utf-8"))
    assert actual == expected, f"{name} differs from the stored golden"
    assert text == path.read_text(encoding="utf-8")


# --- MCP tools/list ----------------------------------------------------------------------


async def _tools(server: Any) -> list[dict[str, Any]]:
    async with McpClient(server) as client:
        listed = (await client.list_tools()).tools
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed]


async def test_the_daemon_side_mcp_tools_list_is_unchanged(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        tools = await _tools(build_mcp_server(h.handle, profile_resolver=lambda: READER))
    _check("mcp_tools_daemon.json", tools)


async def test_the_stdio_bridge_mcp_tools_list_is_unchanged(tmp_path: Path) -> None:
    # The bridge connects on its first call only, so no daemon is needed to list tools.
    async with SocketToolBackend(tmp_path / "absent.sock", "token") as backend:
        tools = await _tools(build_mcp_server(backend, profile_resolver=lambda: None))
    _check("mcp_tools_stdio_bridge.json", tools)


# --- socket answers ----------------------------------------------------------------------

_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)?$")
#: Minted ids and fingerprints: uuids, prefixed random hex (``lease-…``), digests.
_HEX_ID = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<![0-9A-Za-z])[0-9a-f]{12,}"
)
#: Keys whose values change from run to run (ids minted at random, this process's pid).
_VOLATILE_KEYS = frozenset({"pid", "socket_path", "owner_pid", "peer_pid", "sweeps_completed"})


class _Normaliser:
    """Volatile values become stable placeholders; equal inputs get equal placeholders."""

    def __init__(self, replacements: dict[str, str]) -> None:
        self._seen: dict[str, str] = dict(replacements)

    def _alias(self, value: str, kind: str) -> str:
        if value not in self._seen:
            self._seen[value] = (
                f"<{kind}-{sum(v.startswith(f'<{kind}') for v in self._seen.values()) + 1}>"
            )
        return self._seen[value]

    def __call__(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: self(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v, key) for v in value]
        if key in _VOLATILE_KEYS and isinstance(value, int | str):
            return f"<{key}>"
        if isinstance(value, str):
            for raw, alias in self._seen.items():
                if raw and raw in value and raw != value:
                    value = value.replace(raw, alias)
            if value in self._seen:
                return self._seen[value]
            if _TIMESTAMP.match(value):
                return "<timestamp>"
            if _HEX_ID.search(value):
                return _HEX_ID.sub(lambda m: self._alias(m.group(0), "hex"), value)
        return value


def _requests(
    tokens: dict[str, str], pid: int
) -> list[tuple[str, str, str | None, dict[str, Any]]]:
    """(op, case, token, args): one valid request per op, then one per refusal code."""
    ctl, author, nobody = tokens["g-controller"], tokens["g-author"], tokens["g-bystander"]
    bad = "not-a-token"
    claims = {
        "client_name": "codex",
        "client_instance_id": INSTANCE,
        "session_id": "sess-golden",
        "namespace": "author",
        "role": "author",
        "profile": "prgs-author",
        "repository_binding": REPO,
    }
    session = {"session_id": "s-1"}
    assess = {"session_id": "s-1", "namespace": "gitea-merger"}
    link = {"gitea_org": "org", "gitea_repo": "repo", "gitea_issue_number": 7}
    upsert_link = {**link, "provider": "sentry", "provider_issue_id": "42", "status": "open"}
    return [
        # workers: peer credentials, not tokens
        ("register", "valid", None, {"claims": claims}),
        ("register", "bad_request", None, {"claims": "nope"}),
        ("register", "permission_denied", None, {"claims": claims, "pid": 1}),
        ("heartbeat", "valid", None, {"$registration": True}),
        ("heartbeat", "bad_request", None, {"worker_identity": "w"}),
        ("heartbeat", "permission_denied", None, {"$registration": True, "pid": 1}),
        ("heartbeat", "refused_by_actor", None, {"$registration": True, "fencing_epoch": 999}),
        ("release", "valid", None, {"$registration": True}),
        ("release", "bad_request", None, {"pid": pid}),
        ("release", "permission_denied", None, {"$registration": True, "pid": 1}),
        # operator ops
        ("status", "valid", ctl, {}),
        ("status", "owner_without_token", None, {}),
        ("status", "unauthenticated", bad, {}),
        ("status", "denied", nobody, {}),
        ("snapshot", "valid", ctl, {}),
        ("snapshot", "bad_request", ctl, {"expected_manifest": "nope"}),
        ("snapshot", "unauthenticated", None, {}),
        ("snapshot", "denied", author, {}),
        ("plan", "valid", ctl, {"full": True}),
        ("plan", "bad_request", ctl, {"limit": 0}),
        ("plan", "unauthenticated", bad, {}),
        ("plan", "denied", nobody, {}),
        ("apply", "valid", ctl, {"$plan": True}),
        ("apply", "bad_request", ctl, {"worker_identities": []}),
        ("apply", "unauthenticated", None, {"candidate_fingerprint": "x"}),
        ("apply", "denied", author, {"candidate_fingerprint": "x", "registry_fingerprint": "r"}),
        (
            "apply",
            "stale_tokens",
            ctl,
            {"candidate_fingerprint": "x", "registry_fingerprint": "r", "worker_identities": ["w"]},
        ),
        # control plane
        ("session_upsert", "valid", author, {**session, "role": "author", "pid": pid}),
        ("session_upsert", "bad_request", author, {**session, "nope": 1}),
        ("session_upsert", "unauthenticated", None, session),
        ("session_upsert", "denied", nobody, session),
        ("session_upsert", "invalid_argument", author, {**session, "status": "sleeping"}),
        ("work_item_upsert", "valid", author, {**ITEM, "state": "open", "title": "T"}),
        ("work_item_upsert", "bad_request", author, {**ITEM, "number": "x"}),
        ("work_item_upsert", "unauthenticated", bad, ITEM),
        ("work_item_upsert", "denied", nobody, ITEM),
        ("work_item_upsert", "invalid_work_kind", author, {**ITEM, "kind": "incident"}),
        ("assign", "valid", ctl, {**ITEM, "session_id": "s-0", "role": "author"}),
        ("assign", "bad_request", ctl, {**ITEM, "session_id": "s-0"}),
        ("assign", "unauthenticated", None, {**ITEM, "session_id": "s-0", "role": "author"}),
        ("assign", "denied", author, {**ITEM, "session_id": "s-0", "role": "author"}),
        ("assign", "invalid_role", ctl, {**ITEM, "session_id": "s-0", "role": "wizard"}),
        (
            "allocate",
            "valid",
            author,
            {**WHERE, **session, "apply": True, "candidates": [{"kind": "issue", "number": 601}]},
        ),
        ("allocate", "bad_request", author, {**WHERE, **session}),
        ("allocate", "unauthenticated", None, {**WHERE, **session, "candidates": []}),
        ("allocate", "denied", nobody, {**WHERE, **session, "candidates": []}),
        (
            "allocate",
            "role_ineligible",
            author,
            {**WHERE, **session, "candidates": [], "role": "merger"},
        ),
        (
            "allocate",
            "invalid_work_kind",
            author,
            {**WHERE, **session, "candidates": [{"kind": "glitchtip_incident", "number": 3}]},
        ),
        (
            "assignment_check",
            "valid",
            author,
            {**WHERE, **session, "kind": "issue", "number": 601, "action": "push"},
        ),
        ("assignment_check", "bad_request", author, {**ITEM, **session}),
        ("assignment_check", "unauthenticated", None, {**ITEM, **session, "action": "push"}),
        ("assignment_check", "denied", nobody, {**ITEM, **session, "action": "push"}),
        ("assignment_check", "not_covered", author, {**ITEM, **session, "action": "merge"}),
        ("lease_heartbeat", "valid", author, {**session, "$lease": True}),
        ("lease_heartbeat", "bad_request", author, {**session, "lease_id": 5}),
        ("lease_heartbeat", "unauthenticated", bad, {**session, "lease_id": "l"}),
        ("lease_heartbeat", "denied", nobody, {**session, "lease_id": "l"}),
        ("lease_heartbeat", "unknown_lease", author, {**session, "lease_id": "no-such-lease"}),
        ("lease_release", "valid", author, {**session, "$lease": True}),
        ("lease_release", "bad_request", author, session),
        ("lease_release", "unauthenticated", None, {**session, "lease_id": "l"}),
        ("lease_release", "denied", nobody, {**session, "lease_id": "l"}),
        ("lease_release", "invalid_argument", author, {**session, "lease_id": " "}),
        ("terminal_lock_set", "valid", ctl, {**WHERE, "terminal_pr": 9, "decision": "approve"}),
        ("terminal_lock_set", "bad_request", ctl, WHERE),
        ("terminal_lock_set", "unauthenticated", None, {**WHERE, "terminal_pr": None}),
        ("terminal_lock_set", "denied", author, {**WHERE, "terminal_pr": None}),
        ("terminal_lock_set", "invalid_argument", ctl, {**WHERE, "remote": "", "terminal_pr": 1}),
        ("terminal_lock_get", "valid", author, WHERE),
        ("terminal_lock_get", "bad_request", author, {"remote": "prgs"}),
        ("terminal_lock_get", "unauthenticated", bad, WHERE),
        ("terminal_lock_get", "denied", nobody, WHERE),
        ("terminal_lock_get", "invalid_argument", author, {**WHERE, "org": ""}),
        (
            "namespace_health_assess",
            "valid",
            author,
            {**assess, "probe_source": "client_namespace", "probe_result": {"success": True}},
        ),
        ("namespace_health_assess", "bad_request", author, {**assess, "configured": "yes"}),
        ("namespace_health_assess", "unauthenticated", None, assess),
        ("namespace_health_assess", "denied", nobody, assess),
        ("namespace_health_assess", "invalid_argument", author, {**assess, "namespace": " "}),
        ("namespace_health_gate", "valid", author, {**session, "task": "merge_pr"}),
        ("namespace_health_gate", "bad_request", author, session),
        ("namespace_health_gate", "unauthenticated", bad, {**session, "task": "merge_pr"}),
        ("namespace_health_gate", "denied", nobody, {**session, "task": "merge_pr"}),
        ("namespace_health_gate", "invalid_argument", author, {**session, "task": " "}),
        ("incident_link_upsert", "valid", ctl, upsert_link),
        ("incident_link_upsert", "bad_request", ctl, {**upsert_link, "linked_pr_numbers": ["x"]}),
        ("incident_link_upsert", "unauthenticated", None, upsert_link),
        ("incident_link_upsert", "denied", author, upsert_link),
        ("incident_link_upsert", "invalid_argument", ctl, {**upsert_link, "provider": ""}),
        ("incident_link_get", "valid", author, link),
        ("incident_link_get", "bad_request", author, {"gitea_org": "org"}),
        ("incident_link_get", "unauthenticated", bad, link),
        ("incident_link_get", "denied", nobody, link),
        ("incident_link_get", "invalid_argument", author, {**link, "gitea_issue_number": -1}),
        # host leases
        ("host_status", "valid", ctl, {}),
        ("host_status", "bad_request", ctl, {"host_id": "h"}),
        ("host_status", "unauthenticated", None, {}),
        ("host_plan", "valid", ctl, {"host_id": "host-b"}),
        ("host_plan", "bad_request", ctl, {"host_id": 5}),
        ("host_plan", "unauthenticated", bad, {"host_id": "host-b"}),
        ("host_plan", "denied", author, {"host_id": "host-b"}),
        (
            "host_apply",
            "valid",
            ctl,
            {
                "host_id": "host-b",
                "host_token": "t",
                "candidate_fingerprint": "c",
                "worker_identities": [],
            },
        ),
        ("host_apply", "bad_request", ctl, {"host_id": "host-b"}),
        (
            "host_apply",
            "unauthenticated",
            None,
            {
                "host_id": "host-b",
                "host_token": "t",
                "candidate_fingerprint": "c",
                "worker_identities": [],
            },
        ),
        # the envelope
        ("no_such_op", "unknown_op", ctl, {}),
        # the reap of orphaned MCP servers (the harness's census lists none)
        ("reap_plan", "valid", ctl, {}),
        ("reap_plan", "bad_request", ctl, {"plan_token": "t"}),
        ("reap_plan", "unauthenticated", None, {}),
        ("reap_plan", "denied", nobody, {}),
        ("reap_apply", "valid", ctl, {"$reap_plan": True}),
        ("reap_apply", "bad_request", ctl, {"plan_token": 5}),
        ("reap_apply", "unauthenticated", bad, {"plan_token": "t"}),
        ("reap_apply", "denied", author, {"plan_token": "t"}),
        ("reap_apply", "plan_changed", ctl, {"plan_token": "reap-v1-reviewed-earlier"}),
    ]


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with short_dir() as path:
        yield path


@asynccontextmanager
async def _daemon(
    tmp_path: Path, sock_dir: Path
) -> AsyncIterator[tuple[SettledHarness, Path, dict[str, str]]]:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES, encoding="utf-8")
    tokens = {name: create_token(profiles, name) for name in NAMES}
    config = SocketConfig(path=sock_dir / "s.sock")
    book = ProfileBook(profiles)
    async with harness(tmp_path) as h:
        # The retirement actor re-checks the grant by profile name just before it mutates.
        for token in tokens.values():
            profile = book.authenticate(token)
            assert profile is not None
            h.profiles.by_name[profile.name] = profile
        h.probes.set(os.getpid(), alive=True, start_time="ticks-self", cwd=REPO)
        async with serve(h, config, book, hosts=h.supervisor.hosts) as path:
            yield h, path, tokens


async def _ask(path: Path, frame: dict[str, Any]) -> dict[str, Any]:
    [answer] = await read_frames(path, json.dumps(frame).encode() + b"\n", count=1)
    return answer


async def test_one_socket_answer_per_op_is_unchanged(tmp_path: Path, sock_dir: Path) -> None:
    pid = os.getpid()
    async with _daemon(tmp_path, sock_dir) as (h, path, tokens):
        # A stale worker for the plan and apply to find.
        await ensure_swept(h)
        dead = await enroll(h)
        h.probes.kill(int(dead["pid"]))
        await h.clock.advance(PAST_TTL)
        await ensure_swept(h)
        requests = _requests(tokens, pid)
        covered = {op for op, *_ in requests}
        assert covered >= WORKER_OPS | OPERATOR_OPS | CONTROL_OPS | HOST_OPS
        registration: dict[str, Any] = {}
        planned: dict[str, Any] = {}
        lease: dict[str, Any] = {}
        reaped: dict[str, Any] = {}
        answers: dict[str, Any] = {}
        for number, (op, case, token, raw) in enumerate(requests):
            args = dict(raw)
            if args.pop("$registration", False):
                fenced = ("worker_identity", "pid", "generation_id", "fencing_epoch")
                args = {**{k: registration[k] for k in fenced}, **args}
            if args.pop("$plan", False):
                args = {
                    "candidate_fingerprint": planned["candidate_fingerprint"],
                    "registry_fingerprint": planned["registry_fingerprint"],
                    "worker_identities": planned["candidate_worker_identities"],
                    **args,
                }
            if args.pop("$lease", False):
                args["lease_id"] = lease["lease_id"]
            if args.pop("$reap_plan", False):
                args["plan_token"] = reaped["plan_token"]
            frame: dict[str, Any] = {"v": 1, "id": f"r{number}", "op": op, "args": args}
            if token is not None:
                frame["token"] = token
            answer = await _ask(path, frame)
            answers[f"{op}/{case}"] = {"request": frame, "answer": answer}
            result = answer.get("result") or {}
            if (op, case) == ("register", "valid"):
                registration = dict(result["registration"])
            if (op, case) == ("plan", "valid"):
                planned = dict(result)
            if (op, case) == ("allocate", "valid"):
                lease = dict(result["lease_proof"])
            if (op, case) == ("reap_plan", "valid"):
                reaped = dict(result)
    secrets = {token: f"<token:{name}>" for name, token in tokens.items()}
    secrets[str(tmp_path)] = "<tmp>"
    secrets[str(sock_dir)] = "<sock_dir>"
    secrets[f"(pid {pid})"] = "(pid <pid>)"
    secrets[f":{pid}:"] = ":<pid>:"
    _check("socket_answers.json", _Normaliser(secrets)(answers))
