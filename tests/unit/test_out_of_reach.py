"""out_of_reach on tables of descriptors: every way in keeps a survivor; unknown keeps it."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from actors.census.unreached import out_of_reach

_WIRE = ("pipe:[1]", "pipe:[2]")


class _Peers:
    """sock_diag as a table: inode -> (listening, peer inode); absent: not described."""

    def __init__(self, table: Mapping[int, tuple[bool, int | None]]) -> None:
        self._table = table

    def listening(self, inode: int) -> bool | None:
        found = self._table.get(inode)
        return None if found is None else found[0]

    def peer(self, inode: int) -> int | None:
        found = self._table.get(inode)
        return None if found is None else found[1]


def _fixed(value: frozenset[str] | None) -> Callable[[], frozenset[str] | None]:
    return lambda: value


def _reach(
    held: frozenset[str] | None,
    *,
    wire: tuple[str, ...] = _WIRE,
    owner: frozenset[str] | None = frozenset({"pipe:[1]", "pipe:[2]", "pipe:[9]"}),
    others: frozenset[str] | None = frozenset({"socket:[70]"}),
    peers: Mapping[int, tuple[bool, int | None]] | None = None,
    writes: bool | None = False,
    netlink: frozenset[str] | None = frozenset({"socket:[80]"}),
) -> tuple[bool | None, str]:
    return out_of_reach(
        held,
        wire,
        owner,
        _fixed(others),
        _Peers(peers or {}),
        owner_writes=lambda _link: writes,
        netlink=_fixed(netlink),
    )


_INTERNAL = {50: (False, 51), 51: (False, 50)}  # a socket pair inside the tree

_CASES = [
    # (name, held, options, expected)
    (
        "private pipes, internal sockets, a netlink line",
        frozenset({"pipe:[5]", "pipe:[6]", "socket:[50]", "socket:[51]", "socket:[80]"}),
        {"peers": _INTERNAL},
        True,
    ),
    (
        "a peer outside that no server holds (a bus)",
        frozenset({"socket:[60]"}),
        {"peers": {60: (False, 61)}},
        True,
    ),
    ("a released peer", frozenset({"socket:[60]"}), {"peers": {60: (False, None)}}, True),
    ("a pipe the owner only reads (its stderr)", frozenset({"pipe:[9]"}), {}, True),
    ("the leader's stdio was not seen", frozenset({"pipe:[5]"}), {"wire": ()}, None),
    ("its descriptors cannot be read", None, {}, None),
    ("the owner's descriptors cannot be read", frozenset({"pipe:[5]"}), {"owner": None}, None),
    ("it holds the leader's stdin", frozenset({"pipe:[1]"}), {}, None),
    ("a pipe the owner writes", frozenset({"pipe:[9]"}), {"writes": True}, None),
    ("a pipe whose owner's mode cannot be read", frozenset({"pipe:[9]"}), {"writes": None}, None),
    (
        "a socket the owner holds",
        frozenset({"socket:[60]"}),
        {"owner": frozenset({"socket:[60]"}), "peers": {60: (False, None)}},
        None,
    ),
    (
        "a connection from the owner",
        frozenset({"socket:[60]"}),
        {"owner": frozenset({"socket:[61]"}), "peers": {60: (False, 61)}},
        None,
    ),
    ("it listens", frozenset({"socket:[60]"}), {"peers": {60: (True, None)}}, None),
    ("a network socket", frozenset({"socket:[90]"}), {}, None),
    ("netlink cannot be read", frozenset({"socket:[80]"}), {"netlink": None}, None),
    ("another server is connected", frozenset({"socket:[60]"}), {"peers": {60: (False, 70)}}, None),
    (
        "another server holds its pipe",
        frozenset({"pipe:[5]"}),
        {"others": frozenset({"pipe:[5]"})},
        None,
    ),
    (
        "other servers cannot be read",
        frozenset({"socket:[60]"}),
        {"peers": {60: (False, 61)}, "others": None},
        None,
    ),
]


@pytest.mark.parametrize(("held", "options", "expected"), [c[1:] for c in _CASES],
                         ids=[c[0] for c in _CASES])  # fmt: skip
def test_out_of_reach(
    held: frozenset[str] | None, options: dict[str, object], expected: bool | None
) -> None:
    found, why = _reach(held, **options)  # type: ignore[arg-type]
    assert found is expected, why
    assert why


def test_other_servers_are_read_only_when_a_connection_leaves_the_tree() -> None:
    asked: list[bool] = []

    def others() -> frozenset[str] | None:
        asked.append(True)
        return frozenset()

    held = frozenset({"socket:[50]", "socket:[51]"})
    found, _ = out_of_reach(held, _WIRE, frozenset(), others, _Peers(_INTERNAL),
                            owner_writes=lambda _link: False)  # fmt: skip
    assert found is True
    assert asked == []
