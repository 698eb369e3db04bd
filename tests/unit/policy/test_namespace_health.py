"""The namespace health classifier and its gate helpers: evidence tables and properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.policy.control.namespace_health import (
    ACTION_GATE_TASKS,
    EOF_PATTERNS,
    REQUIRED_NAMESPACE_TOOLS,
    SAFE_ENV_KEYS,
    classify_namespace_probe,
    mutation_gate_from_session,
    namespace_health_blocks_task,
    normalize_probe_source,
    required_namespace_for_task,
)

OUTPUT_KEYS = {
    "success",
    "healthy",
    "namespace",
    "required_tool",
    "configured",
    "registered_tools_checked",
    "required_tool_registered",
    "required_tool_callable",
    "probe_source",
    "ide_namespace_proven",
    "error_type",
    "error_message",
    "reasons",
    "remediation",
    "diagnostics",
    "blocks_merge_workflow",
}
OK = {"success": True, "result": {"login": "x"}}


def classify(**kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("registered_tools", ["gitea_whoami", "gitea_list_profiles"])
    return classify_namespace_probe(kwargs.pop("namespace", "gitea-merger"), **kwargs)


def test_registered_but_eof_through_the_client_blocks_and_names_the_path() -> None:
    result = classify(
        namespace="gitea-reviewer",
        probe_result={"success": False, "error": "client is closing: EOF"},
        process={
            "pid": 4321,
            "profile": "prgs-reviewer",
            "env": {"GITEA_MCP_PROFILE": "prgs-reviewer", "GITEA_TOKEN": "must-not-leak"},
        },
        config_path="/home/op/.gemini/config/mcp_config.json",
        probe_source="client_namespace",
    )
    assert set(result) == OUTPUT_KEYS
    assert (result["healthy"], result["success"]) == (False, False)
    assert result["error_type"] == "namespace_eof"
    assert result["required_tool_registered"] is True
    assert result["required_tool_callable"] is False
    assert result["blocks_merge_workflow"] is True
    assert result["ide_namespace_proven"] is False
    assert "gitea-reviewer" in result["reasons"][0]
    assert "gitea_whoami" in result["reasons"][0]
    diagnostics = result["diagnostics"]
    assert (diagnostics["process_pid"], diagnostics["profile"]) == (4321, "prgs-reviewer")
    assert diagnostics["env"] == {"GITEA_MCP_PROFILE": "prgs-reviewer"}
    assert "must-not-leak" not in repr(result)
    assert any("4321" in step and "informational" in step for step in result["remediation"])


def test_a_client_success_is_proven() -> None:
    result = classify(namespace="gitea-author", probe_result=OK, probe_source="client_namespace")
    assert result["healthy"]
    assert result["ide_namespace_proven"]
    assert result["blocks_merge_workflow"] is False
    assert result["error_type"] is None
    assert result["error_message"] is None
    assert result["remediation"] == [
        "The client-managed namespace 'gitea-author' can invoke 'gitea_whoami' "
        "(probe_source=client_namespace)."
    ]


def test_offline_success_is_healthy_but_no_proof_and_offline_failure_never_blocks() -> None:
    good = classify(probe_result=OK, probe_source="offline_spawn", process={"pid": 99})
    assert (good["healthy"], good["ide_namespace_proven"]) == (True, False)
    assert good["blocks_merge_workflow"] is False
    note = [r for r in good["reasons"] if "offline_spawn" in r]
    assert note
    assert "not prove" in note[0]
    # The pid of an offline child is never offered as something to act on.
    assert not any("99" in step for step in good["remediation"])
    bad = classify(probe_result={"success": False, "error": "EOF"}, probe_source="offline_spawn")
    assert (bad["healthy"], bad["blocks_merge_workflow"]) == (False, False)


def test_a_missing_required_tool_wins_over_a_successful_call() -> None:
    result = classify(
        namespace="gitea-tools",
        registered_tools=["gitea_whoami"],
        probe_result=OK,
        probe_source="client_namespace",
    )
    assert result["required_tool"] == "gitea_list_profiles"
    assert (result["required_tool_registered"], result["error_type"]) == (False, "tool_missing")
    assert result["healthy"] is False
    assert "gitea_list_profiles" in result["reasons"][0]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        *((f"xx {p.upper()} yy", "namespace_eof") for p in EOF_PATTERNS),
        ("request Timeout after 30s", "namespace_timeout"),
        ("permission denied", "namespace_call_failed"),
    ],
)
def test_error_text_classification(message: str, expected: str) -> None:
    result = classify(probe_result={"success": False, "error": message})
    assert result["error_type"] == expected
    assert result["error_message"] == message


@pytest.mark.parametrize("field", ["error", "message", "stderr", "exception"])
def test_the_first_non_empty_error_field_is_the_message(field: str) -> None:
    probe = {"success": False, "error": "", field: "transport closed"}
    assert classify(probe_result=probe)["error_message"] == "transport closed"


def test_error_field_order() -> None:
    probe = {"success": False, "message": "timeout", "stderr": "broken pipe"}
    result = classify(probe_result=probe)
    assert (result["error_message"], result["error_type"]) == ("timeout", "namespace_timeout")


def test_a_given_error_type_is_kept_trimmed() -> None:
    result = classify(probe_result={"success": False, "error": "EOF", "error_type": " custom "})
    assert result["error_type"] == "custom"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        # Overrides in order: not configured beats a missing tool beats a missing probe.
        (
            {"configured": False, "registered_tools": [], "probe_result": None},
            "namespace_not_configured",
        ),
        ({"registered_tools": ["other"], "probe_result": None}, "tool_missing"),
        ({"probe_result": None}, "live_probe_missing"),
        ({"probe_result": {}}, "live_probe_missing"),
        ({"probe_result": {"success": False}}, "namespace_call_failed"),
        ({"configured": False, "probe_result": OK}, "namespace_not_configured"),
    ],
)
def test_precedence_of_error_types(kwargs: dict[str, Any], expected: str) -> None:
    result = classify(probe_source="client_namespace", **kwargs)
    assert result["error_type"] == expected
    assert result["healthy"] is False
    assert result["blocks_merge_workflow"] is True


def test_reasons_follow_the_evidence_in_order() -> None:
    result = classify(configured=False, registered_tools=["x"], probe_result=None)
    assert "not configured" in result["reasons"][0]
    assert "not registered" in result["reasons"][1]
    missing = classify(probe_result=None, probe_source="client_namespace")
    assert missing["reasons"] == [
        "No live invocation proof was given for 'gitea-merger.gitea_whoami'."
    ]


def test_defaults_when_nothing_is_checked() -> None:
    result = classify_namespace_probe("gitea-controller")
    assert result["required_tool"] == "gitea_whoami"
    assert result["registered_tools_checked"] is False
    assert result["required_tool_registered"] is None
    assert result["probe_source"] == "unknown"
    assert result["error_type"] == "live_probe_missing"
    # No probe result, so no note about the unspecified source.
    assert not any("unspecified" in r for r in result["reasons"])
    single = classify_namespace_probe("gitea-merger", registered_tools="gitea_whoami")
    assert single["required_tool_registered"] is True
    named = classify_namespace_probe("gitea-merger", required_tool="gitea_merge_pr")
    assert named["required_tool"] == "gitea_merge_pr"


def test_an_unknown_source_with_a_success_is_healthy_but_asks_for_client_proof() -> None:
    result = classify(probe_result=OK, probe_source="ide")
    assert result["probe_source"] == "unknown"
    assert (result["healthy"], result["ide_namespace_proven"]) == (True, False)
    assert result["blocks_merge_workflow"] is False
    assert any("client_namespace" in r for r in result["reasons"])
    failed = classify(probe_result={"success": False, "error": "EOF"}, probe_source=None)
    assert failed["blocks_merge_workflow"] is True


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("  CLIENT_NAMESPACE ", "client_namespace"),
        ("Offline_Spawn", "offline_spawn"),
        ("ide", "unknown"),
        ("", "unknown"),
        (None, "unknown"),
        (7, "unknown"),
    ],
)
def test_probe_source_normalization(given: object, expected: str) -> None:
    assert normalize_probe_source(given) == expected


def test_profile_argument_overrides_the_process_profile_and_environment_key() -> None:
    result = classify(
        probe_result=OK,
        process={"profile": "from-process", "environment": {"GITEA_SERVICE": "gitea", "X": "1"}},
        profile="explicit",
    )
    assert result["diagnostics"]["profile"] == "explicit"
    assert result["diagnostics"]["env"] == {"GITEA_SERVICE": "gitea"}


_ENV_KEYS = st.sampled_from([*SAFE_ENV_KEYS, "GITEA_TOKEN", "DATABASE_URL", "PASSWORD", "X"])


# No deadline: the machine is shared, and a slow example is not a wrong one.
@settings(deadline=None)
@given(env=st.dictionaries(_ENV_KEYS, st.one_of(st.none(), st.text(max_size=8)), max_size=8))
def test_env_diagnostics_are_an_allowlist_of_non_empty_strings(env: dict[str, Any]) -> None:
    shown = classify(probe_result=OK, process={"env": env})["diagnostics"]["env"]
    assert set(shown) <= set(SAFE_ENV_KEYS)
    assert shown == {
        k: str(v) for k, v in env.items() if k in SAFE_ENV_KEYS and v not in (None, "")
    }


_SOURCES = st.sampled_from(["client_namespace", "offline_spawn", "unknown", None, "IDE"])
_PROBES: st.SearchStrategy[dict[str, Any] | None] = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries({"success": st.booleans()}, optional={"error": st.text(max_size=20)}),
)


@settings(deadline=None)
@given(
    configured=st.booleans(),
    tools=st.one_of(st.none(), st.lists(st.sampled_from(["gitea_whoami", "other"]), max_size=3)),
    probe=_PROBES,
    source=_SOURCES,
)
def test_invariants_of_every_verdict(
    configured: bool, tools: list[str] | None, probe: dict[str, Any] | None, source: str | None
) -> None:
    r = classify_namespace_probe(
        "gitea-merger",
        registered_tools=tools,
        probe_result=probe,
        configured=configured,
        probe_source=source,
    )
    assert r["success"] == r["healthy"]
    assert r["healthy"] == (
        configured and r["required_tool_registered"] is not False and r["required_tool_callable"]
    )
    assert r["ide_namespace_proven"] == (r["healthy"] and r["probe_source"] == "client_namespace")
    assert (r["error_type"] is None) == r["healthy"]
    if r["probe_source"] == "offline_spawn":
        assert r["blocks_merge_workflow"] is False
    else:
        assert r["blocks_merge_workflow"] == (not r["healthy"])
    assert r["remediation"]


# --- gate helpers ------------------------------------------------------------------------


def test_required_namespaces_and_blocking_tasks() -> None:
    assert required_namespace_for_task("merge_pr") == "gitea-merger"
    assert required_namespace_for_task(" submit_review ") == "gitea-reviewer"
    assert required_namespace_for_task("review_pr") == "gitea-reviewer"
    assert required_namespace_for_task("create_pr") is None
    for task in ("merge_pr", "review_pr", "submit_review"):
        assert namespace_health_blocks_task(task, False) is True
        assert namespace_health_blocks_task(task, True) is False
    assert namespace_health_blocks_task("create_pr", False) is False
    assert REQUIRED_NAMESPACE_TOOLS["gitea-tools"] == "gitea_list_profiles"
    assert ACTION_GATE_TASKS == {
        "merge": "merge_pr",
        "review": "submit_review",
        "approve": "submit_review",
        "request_changes": "submit_review",
    }


def _verdict(**kwargs: Any) -> dict[str, Any]:
    return classify(**kwargs)


def test_mutation_gate_rules() -> None:
    broken = _verdict(
        probe_result={"success": False, "error": "EOF"}, probe_source="client_namespace"
    )
    proven = _verdict(probe_result=OK, probe_source="client_namespace")
    offline = _verdict(probe_result=OK, probe_source="offline_spawn")
    assert mutation_gate_from_session("create_pr", {"gitea-merger": broken}) == []
    assert mutation_gate_from_session("merge_pr", None) == []
    assert mutation_gate_from_session("merge_pr", {"gitea-reviewer": broken}) == []
    assert mutation_gate_from_session("merge_pr", {"gitea-merger": proven}) == []
    [reason] = mutation_gate_from_session("merge_pr", {"gitea-merger": offline})
    assert "probe_source=offline_spawn" in reason
    assert "client_namespace" in reason
    [reason] = mutation_gate_from_session("merge_pr", {"gitea-merger": broken})
    assert "gitea-merger" in reason
    assert "namespace_eof" in reason
    assert "fail closed" in reason
    [reason] = mutation_gate_from_session(
        "merge_pr", {"gitea-merger": {"probe_source": "client_namespace"}}
    )
    assert "unhealthy" in reason
    # Client source, healthy, but not marked proven: ask for a client probe.
    odd = {"probe_source": "client_namespace", "healthy": True, "ide_namespace_proven": False}
    [reason] = mutation_gate_from_session("submit_review", {"gitea-reviewer": odd})
    assert "not proven" in reason
    assert "client_namespace" in reason


@settings(deadline=None)
@given(
    entry=st.fixed_dictionaries(
        {
            "probe_source": _SOURCES,
            "healthy": st.booleans(),
            "ide_namespace_proven": st.booleans(),
            "blocks_merge_workflow": st.booleans(),
        }
    )
)
def test_only_a_proven_healthy_client_verdict_allows(entry: dict[str, Any]) -> None:
    allowed = mutation_gate_from_session("merge_pr", {"gitea-merger": entry}) == []
    assert allowed == (
        normalize_probe_source(entry["probe_source"]) == "client_namespace"
        and entry["healthy"]
        and entry["ide_namespace_proven"]
    )
