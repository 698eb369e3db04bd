"""Launch identity: trusted ids derived from the client incarnation, sessions, client families."""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from supervisor.policy.identity.exec_marker import safe_label
from supervisor.policy.identity.instance import (
    CLIENT_ALIASES,
    UNKNOWN_CLIENT,
    assess_instance_identity,
)
from supervisor.policy.identity.launch import (
    client_family_from_command,
    launch_instance_id,
    server_session_id,
)

FAMILIES = sorted({*CLIENT_ALIASES.values(), UNKNOWN_CLIENT})
MACHINES = st.text(alphabet=string.ascii_lowercase + string.digits + "-", min_size=1, max_size=40)
BOOTS = st.uuids().map(str)
PIDS = st.integers(min_value=1, max_value=2**31 - 1)
TICKS = st.integers(min_value=0, max_value=10**12).map(str)
#: Client starts between 1970 and 2100: the stamp keeps four year digits.
STARTED = st.floats(min_value=0, max_value=4_102_444_799, allow_nan=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    client: str
    machine: str
    boot_id: str
    client_pid: int
    client_start: str
    started: float

    def instance_id(self) -> str:
        return launch_instance_id(
            self.client,
            machine=self.machine,
            boot_id=self.boot_id,
            client_pid=self.client_pid,
            client_start=self.client_start,
            started=self.started,
        )


launches = st.builds(
    Launch,
    client=st.sampled_from(FAMILIES),
    machine=MACHINES,
    boot_id=BOOTS,
    client_pid=PIDS,
    client_start=TICKS,
    started=STARTED,
)


def _digest(instance_id: str) -> str:
    return instance_id.rsplit("-", 1)[1]


def _stamp(instance_id: str) -> str:
    return instance_id.rsplit("-", 2)[1]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_gets_a_trusted_id(family: str) -> None:
    instance = launch_instance_id(
        family,
        machine="machine-1",
        boot_id="boot-1",
        client_pid=4200,
        client_start="987000",
        started=1_767_225_600.0,
    )
    assert instance.startswith(f"inst-{family}-20260101T000000Z-")
    assessed = assess_instance_identity(instance)
    assert assessed.trusted, assessed.reason


@given(launches)
def test_the_id_always_has_the_trusted_form(launch: Launch) -> None:
    instance = launch.instance_id()
    assert assess_instance_identity(instance).trusted
    stamp = datetime.fromtimestamp(int(launch.started), UTC).strftime("%Y%m%dT%H%M%SZ")
    assert _stamp(instance) == stamp
    assert instance.startswith(f"inst-{launch.client}-{stamp}-")


@given(launches)
def test_equal_launches_get_equal_ids(launch: Launch) -> None:
    assert replace(launch).instance_id() == launch.instance_id()


@given(launches, st.sampled_from(["client_pid", "client_start", "boot_id", "machine"]), st.data())
def test_another_incarnation_gets_another_digest(
    launch: Launch, field: str, data: st.DataObject
) -> None:
    draws: dict[str, Callable[[], Launch]] = {
        "client_pid": lambda: replace(launch, client_pid=data.draw(PIDS)),
        "client_start": lambda: replace(launch, client_start=data.draw(TICKS)),
        "boot_id": lambda: replace(launch, boot_id=data.draw(BOOTS)),
        "machine": lambda: replace(launch, machine=data.draw(MACHINES)),
    }
    changed = draws[field]()
    assume(changed != launch)
    assert _digest(changed.instance_id()) != _digest(launch.instance_id())


@given(launches, STARTED)
def test_the_start_moves_only_the_stamp(launch: Launch, started: float) -> None:
    moved = replace(launch, started=started).instance_id()
    assert _digest(moved) == _digest(launch.instance_id())
    if int(started) == int(launch.started):
        assert moved == launch.instance_id()
    else:
        assert _stamp(moved) != _stamp(launch.instance_id())


@given(launches, st.sampled_from(FAMILIES))
def test_the_family_is_a_label_not_part_of_the_digest(launch: Launch, family: str) -> None:
    # One client launch is one launch whatever family word its id carries.
    assert _digest(replace(launch, client=family).instance_id()) == _digest(launch.instance_id())


# --- sessions ----------------------------------------------------------------------------------

INSTANCE = "inst-codex-20260101T000000Z-0123456789ab"


@given(st.text(max_size=80), PIDS, TICKS)
def test_a_session_embeds_the_safe_name(name: str, pid: int, start: str) -> None:
    session = server_session_id(INSTANCE, name=name, server_pid=pid, server_start=start)
    label = safe_label(name) or "server"
    assert session.startswith(f"sess-{label}-")
    digest = session.removeprefix(f"sess-{label}-")
    assert len(digest) == 12
    assert set(digest) <= set(string.hexdigits.lower())


@given(PIDS, PIDS, TICKS, TICKS)
def test_sessions_differ_per_server_incarnation(
    pid_a: int, pid_b: int, start_a: str, start_b: str
) -> None:
    a = server_session_id(INSTANCE, name="gitea", server_pid=pid_a, server_start=start_a)
    b = server_session_id(INSTANCE, name="gitea", server_pid=pid_b, server_start=start_b)
    assert (a == b) == ((pid_a, start_a) == (pid_b, start_b))


def test_sessions_differ_per_launch_and_the_name_only_labels() -> None:
    other = "inst-codex-20260101T000000Z-ba9876543210"
    one = server_session_id(INSTANCE, name="gitea", server_pid=7, server_start="70")
    assert one != server_session_id(other, name="gitea", server_pid=7, server_start="70")
    renamed = server_session_id(INSTANCE, name="other", server_pid=7, server_start="70")
    assert renamed.rsplit("-", 1)[1] == one.rsplit("-", 1)[1]
    assert server_session_id(INSTANCE, name="", server_pid=7, server_start="70").startswith(
        "sess-server-"
    )
    assert server_session_id(INSTANCE, name="a b/c", server_pid=7, server_start="70").startswith(
        "sess-a_b_c-"
    )


# --- client families ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "family"),
    [
        (["claude"], "claude_code"),
        (["/usr/local/bin/claude", "--resume"], "claude_code"),
        (
            ["/x/node_modules/@anthropic-ai/claude-code/bin/claude.exe", "mcp", "list"],
            "claude_code",
        ),
        (["node", "/x/node_modules/@anthropic-ai/claude-code/cli.js"], "claude_code"),
        (["Claude"], "claude_code"),
        (["node", "/x/.bin/gemini", "mcp", "list"], "gemini"),
        (["node", "/x/@google/gemini-cli/dist/index.js"], "gemini"),
        # Gemini CLI relaunches itself with runner options before its script.
        (["node", "--max-old-space-size=8192", "/x/.bin/gemini", "mcp", "list"], "gemini"),
        (["node", "--max-old-space-size=8192", "/x/@google/gemini-cli/dist/index.js"], "gemini"),
        (["node", "--inspect", "/srv/app/server.js", "codex"], None),
        (["codex"], "codex"),
        (["/opt/codex/bin/codex", "exec"], "codex"),
        (["cursor"], "cursor"),
        # The install paths are discovery's (policy/known_clients.py): one table for both.
        (["node", "/opt/cursor/resources/app/out/cli.js"], "cursor"),
        (["node", "/usr/lib/node_modules/@openai/codex/bin/codex.js"], "codex"),
        (["grok"], "grok"),
        (["C:\\Program Files\\Claude\\claude.exe"], "claude_code"),
        (["python3", "client.py"], None),
        (["/home/u/codex-tools/run"], None),
        (["/usr/bin/geminiish"], None),
        (["node", "/srv/app/server.js"], None),
        ([], None),
        ([""], None),
        # Only the first three arguments are looked at: a flag value later on is no name.
        (["python3", "client.py", "--flag", "codex"], None),
    ],
)
def test_client_family_from_command(argv: list[str], family: str | None) -> None:
    assert client_family_from_command(argv, CLIENT_ALIASES) == family


def test_aliases_name_families_too() -> None:
    assert client_family_from_command(["openai_codex"], CLIENT_ALIASES) == "codex"
    assert client_family_from_command(["claudecode"], CLIENT_ALIASES) == "claude_code"
    assert client_family_from_command(["mytool"], {"mytool": "cursor"}) == "cursor"


@given(st.lists(st.text(max_size=30), max_size=5))
def test_a_detected_family_is_always_a_known_one(argv: list[str]) -> None:
    family = client_family_from_command(argv, CLIENT_ALIASES)
    assert family is None or family in CLIENT_ALIASES.values()
