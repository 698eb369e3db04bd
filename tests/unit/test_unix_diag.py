"""The kernel's sock_diag, asked about real socket pairs: the peer, and a peer released."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from supervisor.system.unix_diag import UnixPeers


@pytest.fixture
def peers() -> Iterator[UnixPeers]:
    asker = UnixPeers()
    yield asker
    asker.close()


def _inode(sock: socket.socket) -> int:
    return os.fstat(sock.fileno()).st_ino


def test_a_pair_names_its_peer_until_the_peer_is_closed(peers: UnixPeers) -> None:
    mine, theirs = socket.socketpair()
    with mine:
        assert peers.peer(_inode(mine)) == _inode(theirs)
        assert peers.peer_closed(_inode(mine)) is False
        theirs.close()
        assert peers.peer(_inode(mine)) is None
        assert peers.peer_closed(_inode(mine)) is True


def test_what_the_kernel_does_not_name_is_unknown(peers: UnixPeers) -> None:
    mine, theirs = socket.socketpair()
    gone = _inode(mine)
    mine.close()
    theirs.close()
    assert peers.peer_closed(gone) is None  # no such socket any more
    assert peers.peer_closed(0) is None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as lone:
        assert peers.peer_closed(_inode(lone)) is None  # never connected: not shut down
