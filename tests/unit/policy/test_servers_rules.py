"""The discovery rule table: which processes are clients, which commands servers, and why."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.policy.identity.instance import CLIENT_ALIASES
from supervisor.policy.known_clients import KNOWN_CLIENTS
from supervisor.policy.servers.census import ProcessRef
from supervisor.policy.servers.discovery import (
    ConfiguredServer,
    ParentSight,
    Sighting,
    classify,
    configured_match,
    plain_argv,
)
from supervisor.policy.servers.rules import (
    SDK_DEFAULT_ENV,
    client_of,
    mcp_word,
    parse_extra_clients,
    with_extras,
)

NODE_CLAUDE = ["node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"]


@pytest.mark.parametrize(
    ("argv", "comm", "expected"),
    [
        (["claude", "--resume"], "claude", "claude_code"),
        (NODE_CLAUDE, "node", "claude_code"),
        (["/usr/local/bin/codex"], "codex", "codex"),
        (["node", "/x/node_modules/@google/gemini-cli/dist/index.js"], "node", "gemini"),
        (["node", "/x/.bin/gemini", "mcp", "list"], "node", "gemini"),
        # Gemini CLI relaunches itself with a heap option before its script.
        (["node", "--max-old-space-size=12052", "/x/.bin/gemini", "mcp"], "node", "gemini"),
        (
            ["node", "--max-old-space-size=1", "/x/node_modules/@google/gemini-cli/dist/i.js"],
            "node",
            "gemini",
        ),
        (["/opt/cursor/cursor", "--type=utility"], "cursor", "cursor"),
        (["/usr/share/code/code", "--ms-enable-electron-run-as-node"], "code", "vscode"),
        (["zed"], "zed", "zed"),
        (
            ["node", "/x/node_modules/@modelcontextprotocol/inspector-cli/build/cli.js"],
            "node",
            "mcp_inspector",
        ),
        (["claude-desktop"], "claude-desktop", "claude_desktop"),
        (["/usr/local/bin/grok"], "grok", "grok"),
        # Not clients: a shell, an editor we do not know, a directory named after a client.
        (["bash", "-c", "claude"], "bash", None),
        (["vim"], "vim", None),
        (["/home/u/codex/tool"], "tool", None),
        (["python3", "/home/u/claude/agent.py"], "python3", None),
        ([], "claude", "claude_code"),
    ],
)
def test_known_clients_are_told_by_program_script_or_package(
    argv: list[str], comm: str, expected: str | None
) -> None:
    assert client_of(argv, comm) == expected


def test_every_family_a_launch_is_credited_to_is_a_client_discovery_knows() -> None:
    # One table: a server launched by any seed family is owned by that client in discovery.
    assert set(CLIENT_ALIASES.values()) <= {client.name for client in KNOWN_CLIENTS}


@pytest.mark.parametrize(
    ("parent", "child_env", "expected"),
    [
        (["python3", "agent.py"], ["HOME", "PATH", "USER"], "mcp_python_sdk"),
        (["python3.12", "agent.py"], sorted(SDK_DEFAULT_ENV), "mcp_python_sdk"),
        (["node", "client.js"], ["HOME", "PATH", "MY_TOKEN"], "mcp_typescript_sdk"),
        # A whole inherited environment is no SDK's doing.
        (["python3", "agent.py"], ["PATH", *(f"V{i}" for i in range(40))], None),
        (["python3", "agent.py"], ["HOME"], None),
        (["bash"], ["HOME", "PATH"], None),
    ],
)
def test_sdk_clients_are_told_by_the_environment_they_give_a_server(
    parent: list[str], child_env: list[str], expected: str | None
) -> None:
    assert client_of(parent, parent[0], child_env=child_env) == expected


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["mcp-server-time"], "mcp-server-time"),
        (["/venv/bin/python", "/venv/bin/mcp-server-time"], "/venv/bin/mcp-server-time"),
        (
            ["npm", "exec", "-y", "@modelcontextprotocol/server-everything"],
            "@modelcontextprotocol/server-everything",
        ),
        (["uvx", "mcp-server-fetch"], "mcp-server-fetch"),
        (["python3", "-m", "mcp_server_git"], "mcp_server_git"),
        (["node", "/srv/github-mcp-server/index.js"], "/srv/github-mcp-server/index.js"),
        (["npx", "@playwright/mcp"], "@playwright/mcp"),
        (["fastmcp", "run", "s.py"], "fastmcp"),
        # A shell's script is not a program name; options are not words either.
        (["bash", "-c", "mcp-server-time"], None),
        (["node", "--mcp", "server.js"], None),
        (["rg", "mcp"], None),
        (["mcpd"], None),
        (["node", "server.js"], None),
    ],
)
def test_a_command_names_an_mcp_server_by_its_program_or_what_a_runner_runs(
    argv: list[str], expected: str | None
) -> None:
    assert mcp_word(argv) == expected


def test_operator_extras_add_clients_first_and_server_words() -> None:
    rules = with_extras(["acme=acme-agent", "claude_code=my-claude"], ["serena"])
    assert client_of(["acme-agent"], "acme-agent", rules=rules) == "acme"
    assert client_of(["my-claude"], "my-claude", rules=rules) == "claude_code"
    assert mcp_word(["uvx", "serena", "start"], rules) == "serena"
    assert mcp_word(["uvx", "serena", "start"]) is None
    with pytest.raises(ValueError, match="NAME=PROGRAM"):
        parse_extra_clients(["acme"])


EVERYTHING = ConfiguredServer(
    client="claude_code",
    name="everything",
    command="npx",
    args=("-y", "@modelcontextprotocol/server-everything"),
)
TIME = ConfiguredServer(client="gemini", name="time", command="mcp-server-time", args=())
LOCAL = ConfiguredServer(client="codex", name="local", command="node", args=("/srv/s.js",))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["npm exec -y @modelcontextprotocol/server-everything"], EVERYTHING),
        (["node", "/usr/bin/npx", "-y", "@modelcontextprotocol/server-everything"], EVERYTHING),
        (["/venv/bin/python", "/venv/bin/mcp-server-time"], TIME),
        (["/usr/bin/node", "/srv/s.js"], LOCAL),
        (["node", "/srv/other.js"], None),
        (["npm", "exec", "@modelcontextprotocol/server-everything"], None),
        (["mcp-server-time", "--local-timezone", "UTC"], None),
    ],
)
def test_a_command_line_runs_a_configured_server_only_with_its_exact_arguments(
    argv: list[str], expected: ConfiguredServer | None
) -> None:
    assert configured_match(argv, [EVERYTHING, TIME, LOCAL]) == expected


def test_a_rewritten_title_is_split_back_into_words() -> None:
    assert plain_argv(["npm exec -y pkg"]) == ("npm", "exec", "-y", "pkg")
    assert plain_argv(["/a b/c", "d"]) == ("/a b/c", "d")


PARENT = ProcessRef(pid=100, start="ticks-5")
GEMINI_RELAUNCHED = ["/usr/bin/node", "--max-old-space-size=12052", "/x/.bin/gemini", "mcp", "list"]


def seen(
    argv: Sequence[str],
    *,
    stdio: str = "pipe",
    stdout: str | None = None,
    wrapped: bool = False,
    moved: bool = False,
    abandoned: bool = False,
) -> Sighting:
    return Sighting(
        process=ProcessRef(pid=200, start="ticks-9"),
        ppid=100,
        argv=tuple(argv),
        comm=argv[0][:15] if argv else "",
        env_keys=("HOME", "PATH", "TERM_PROGRAM", "XDG_RUNTIME_DIR", *(f"V{i}" for i in range(20))),
        stdin=stdio,
        stdout=stdout or stdio,
        wrapped=wrapped,
        moved=moved,
        abandoned=abandoned,
    )


def parent(argv: Sequence[str], connected: bool | None = True) -> ParentSight:
    return ParentSight(process=PARENT, argv=tuple(argv), comm=argv[0], connected=connected)


@pytest.mark.parametrize(
    ("child", "parent_", "configured", "owner", "evidence"),
    [
        (
            seen(["mcp-server-time"]),
            parent(["claude"]),
            (),
            "claude_code",
            (
                "stdio_pipes_to_parent",
                "parent_known_client:claude_code",
                "command_names_mcp:mcp-server-time",
            ),
        ),
        (
            seen(["mcp-server-time"], stdio="socket"),
            parent(NODE_CLAUDE),
            (),
            "claude_code",
            (
                "stdio_socketpair_to_parent",
                "parent_known_client:claude_code",
                "command_names_mcp:mcp-server-time",
            ),
        ),
        # The MCP Python SDK moved its stdio above fd 2; the kinds are the wire's.
        (
            seen(["python", "/venv/bin/mcp-server-time"], moved=True),
            parent(["claude"]),
            (),
            "claude_code",
            (
                "stdio_moved_pipes_to_parent",
                "parent_known_client:claude_code",
                "command_names_mcp:/venv/bin/mcp-server-time",
            ),
        ),
        # Abandoned: its client left it (before this supervisor ran); adopted by init.
        (
            seen(["node", "/x/.bin/mcp-server-everything"], stdio="socket", abandoned=True),
            parent(["/sbin/init"], connected=False),
            (),
            None,
            (
                "stdio_socketpair",
                "stdio_abandoned",
                "command_names_mcp:/x/.bin/mcp-server-everything",
            ),
        ),
        (
            seen(["node", "/srv/s.js"], stdio="socket", abandoned=True),
            None,
            (LOCAL,),
            None,
            ("stdio_socketpair", "stdio_abandoned", "configured:codex:local"),
        ),
        # Configured: found whatever its parent, owned by whoever holds its stdio.
        (
            seen(["node", "/srv/s.js"]),
            parent(["myagent"]),
            (LOCAL,),
            "unknown",
            ("stdio_pipes_to_parent", "configured:codex:local"),
        ),
        (
            seen(["node", "/srv/s.js"]),
            None,
            (LOCAL,),
            None,
            ("stdio_pipes", "configured:codex:local"),
        ),
        (seen([]), None, (), None, ("exec_marker",)),
    ],
)
def test_servers_are_found_with_owner_and_evidence(
    child: Sighting,
    parent_: ParentSight | None,
    configured: tuple[ConfiguredServer, ...],
    owner: str | None,
    evidence: tuple[str, ...],
) -> None:
    if not child.argv:
        child = seen(["anything"], wrapped=True)
    judged = classify(child, parent_, configured)
    assert judged is not None
    assert judged.owner_name == owner
    assert judged.evidence == evidence
    assert (judged.owner is not None) == (owner is not None and not child.wrapped)


@pytest.mark.parametrize(
    ("child", "parent_"),
    [
        (seen(["mcp-server-time"]), parent(["myagent"])),  # no client, not configured
        (seen(["ripgrep"]), parent(["claude"])),  # a client's tool, not a server
        (seen(["mcp-server-time"], stdio="null"), parent(["claude"])),  # a daemon
        # Moved, but no descriptor above fd 2 goes to the parent: the stdio stays /dev/null.
        (seen(["mcp-server-time"], stdio="null", moved=True), parent(["claude"], False)),
        (seen(["mcp-server-time"], moved=True), parent(["myagent"])),  # no client
        # Abandoned, but its command names no MCP server, or it is a client itself.
        (seen(["node", "/srv/other.js"], stdio="socket", abandoned=True), None),
        (seen(["claude", "mcp", "serve"], stdio="socket", abandoned=True), None),
        # Gemini CLI relaunching itself (``gemini mcp list``): the client's own process.
        (seen(GEMINI_RELAUNCHED, moved=True), parent(["/usr/bin/node", "/x/.bin/gemini"])),
        (seen(["mcp-server-time"], stdout="tty"), parent(["claude"])),
        (seen(["mcp-server-time"]), parent(["claude"], connected=False)),  # stdio elsewhere
        (seen(["mcp-server-time"]), parent(["claude"], connected=None)),
        (seen(["bash", "-c", "npx mcp-server-time | cat"]), parent(["claude"])),
        (seen(["mcp-server-time"]), None),
    ],
)
def test_processes_that_are_not_servers_are_never_judged_servers(
    child: Sighting, parent_: ParentSight | None
) -> None:
    assert classify(child, parent_, (LOCAL,)) is None


_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_/.@0123456789", min_size=1, max_size=12)


@given(argv=st.lists(_words, min_size=1, max_size=6), kind=st.sampled_from(["null", "tty", "file"]))
def test_no_rule_takes_a_process_without_piped_stdio(argv: list[str], kind: str) -> None:
    configured = (ConfiguredServer(client="c", name="n", command=argv[0], args=tuple(argv[1:])),)
    assert classify(seen(argv, stdio=kind), parent(["claude"]), configured) is None


@given(
    argv=st.lists(
        _words.filter(lambda w: "mcp" not in w and "modelcontext" not in w), min_size=1, max_size=6
    ),
    client=st.sampled_from([["claude"], ["codex"], NODE_CLAUDE, ["myagent"]]),
)
def test_without_a_configured_match_a_command_that_names_no_server_is_never_found(
    argv: list[str], client: list[str]
) -> None:
    assert mcp_word(argv) is None
    assert classify(seen(argv), parent(client), ()) is None


@given(argv=st.lists(_words, min_size=1, max_size=6))
def test_a_non_client_parent_never_makes_a_server_without_a_configured_match(
    argv: list[str],
) -> None:
    assert classify(seen(argv), parent(["myagent"]), ()) is None
