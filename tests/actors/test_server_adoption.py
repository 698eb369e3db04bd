"""Which found trees a guard adopts: only its own daemon's, this boot's, not watched twice."""

from __future__ import annotations

from actors.server_guard.adoption import unwatched
from supervisor.policy.identity.exec_marker import ExecMarker

KEY = "0123456789abcdef"
BOOT = "51830653-4c84-4df4-a9c5-a54cc7513577"


def _marker(leader: int, *, daemon: str = KEY, boot: str = BOOT, start: str = "100") -> ExecMarker:
    return ExecMarker(
        leader_pid=leader,
        leader_start=start,
        client_pid=7,
        client_start="50",
        boot_id=boot,
        client="claude_code",
        name="s",
        namespace="",
        daemon=daemon,
    )


def _keys(found: list[tuple[tuple[int, str], ExecMarker]]) -> list[tuple[int, str]]:
    return [key for key, _ in found]


def test_only_markers_sent_to_this_daemon_on_this_boot_are_taken() -> None:
    markers = [
        _marker(10),
        _marker(11, daemon="fedcba9876543210"),  # another daemon's server
        _marker(12, boot="00000000-0000-0000-0000-000000000000"),  # an earlier boot
    ]
    found = unwatched(markers, daemon_key=KEY, boot=BOOT, watched=(), pending=())
    assert _keys(found) == [(10, "ticks-100")]


def test_one_entry_per_tree_sorted_and_nothing_watched_or_pending() -> None:
    markers = [
        _marker(30),
        _marker(20),
        _marker(20),  # a child carries its leader's marker too
        _marker(40),
        _marker(50),
    ]
    found = unwatched(markers, daemon_key=KEY, boot=BOOT, watched={(40, "ticks-100")}, pending={50})
    assert _keys(found) == [(20, "ticks-100"), (30, "ticks-100")]


def test_a_reused_leader_pid_is_another_tree() -> None:
    markers = [_marker(20, start="100"), _marker(20, start="200")]
    found = unwatched(markers, daemon_key=KEY, boot=BOOT, watched={(20, "ticks-100")}, pending=())
    assert _keys(found) == [(20, "ticks-200")]


def test_a_guard_without_an_exec_socket_or_boot_adopts_nothing() -> None:
    markers = [_marker(10)]
    assert unwatched(markers, daemon_key=None, boot=BOOT, watched=(), pending=()) == []
    assert unwatched(markers, daemon_key=KEY, boot=None, watched=(), pending=()) == []
