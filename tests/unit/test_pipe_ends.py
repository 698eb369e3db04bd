"""The pipe probe against the real kernel: released exactly when no process holds the other side.

Random holder sets: copies of the other end kept by this process and by child processes,
and the probed end's own copies; the probe must say released exactly when none of the
other side is left, and must not know (None) a descriptor that is gone.
"""

from __future__ import annotations

import os
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.system.pipe_ends import probe_pipe


def _link(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@settings(max_examples=40, deadline=None)
@given(
    copies=st.integers(0, 2),
    child_holds=st.booleans(),
    same_side_copies=st.integers(0, 2),
    probe_writer=st.booleans(),
)
def test_released_exactly_when_no_other_side_is_held(
    copies: int, child_holds: bool, same_side_copies: int, probe_writer: bool
) -> None:
    read, write = os.pipe()
    mine, other = (write, read) if probe_writer else (read, write)
    kept = [os.dup(other) for _ in range(copies)]
    same = [os.dup(mine) for _ in range(same_side_copies)]
    child = None
    if child_holds:
        child = subprocess.Popen(["sleep", "60"], pass_fds=(other,))
    os.close(other)
    try:
        end = probe_pipe(os.getpid(), mine, _link(mine))
        held = copies > 0 or child_holds
        assert end.released is (not held), end
        assert end.access == ("write" if probe_writer else "read")
    finally:
        if child is not None:
            child.kill()  # our own child, by its Popen
            child.wait()
        for fd in (mine, *kept, *same):
            os.close(fd)


def test_a_descriptor_that_is_gone_or_changed_is_not_known() -> None:
    read, write = os.pipe()
    link = _link(read)
    os.close(write)
    assert probe_pipe(os.getpid(), read, link).released is True
    os.close(read)
    assert probe_pipe(os.getpid(), read, link).released is None
    other_read, other_write = os.pipe()
    try:
        # A link that no longer names the descriptor's pipe: never judged.
        changed = probe_pipe(os.getpid(), other_read, link)
        assert changed.released is None
        assert "changed" in changed.why
    finally:
        os.close(other_read)
        os.close(other_write)


def test_a_descriptor_holding_both_ends_is_held() -> None:
    read, write = os.pipe()
    both = os.open(f"/proc/self/fd/{read}", os.O_RDWR)
    os.close(write)
    try:
        end = probe_pipe(os.getpid(), both, _link(both))
        assert end.released is False
        assert end.access == "both"
    finally:
        os.close(both)
        os.close(read)
