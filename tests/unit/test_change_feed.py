"""ChangeFeed: the latest value per key since a reader's take, bounded, else start over."""

from __future__ import annotations

from supervisor.store.change_feed import ChangeFeed


def test_nothing_is_kept_before_a_first_take_and_a_first_take_starts_over() -> None:
    feed: ChangeFeed[str, int] = ChangeFeed(lambda: 10)
    feed.note("a", 1)
    first = feed.take(0)
    assert first.changes is None
    feed.note("a", 2)
    feed.note("b", 3)
    feed.note("a", 4)
    second = feed.take(first.cursor)
    assert second.changes == {"a": 4, "b": 3}
    assert feed.take(second.cursor).changes == {}


def test_another_readers_take_or_a_loss_makes_the_next_take_start_over() -> None:
    feed: ChangeFeed[str, int] = ChangeFeed(lambda: 10)
    mine = feed.take(0).cursor
    theirs = feed.take(0).cursor
    feed.note("a", 1)
    assert feed.take(mine).changes is None
    again = feed.take(theirs)  # the take in between moved the cursor on
    assert again.changes is None
    feed.note("a", 1)
    feed.lose()
    assert feed.take(again.cursor).changes is None


def test_changes_past_twice_the_source_are_dropped_for_a_start_over() -> None:
    feed: ChangeFeed[int, int] = ChangeFeed(lambda: 600)
    cursor = feed.take(0).cursor
    for key in range(1200):
        feed.note(key, key)
    taken = feed.take(cursor)
    assert taken.changes is not None
    assert len(taken.changes) == 1200
    for key in range(1201):
        feed.note(key, key)
    assert feed.take(taken.cursor).changes is None
