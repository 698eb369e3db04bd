"""The liveness actor's standing verdicts, with their counts by state and the dead feed."""

from __future__ import annotations

from actors.replies import DeadChanges, LivenessCounts, LivenessVerdict
from supervisor.policy.evidence import PidEvidence
from supervisor.store.change_feed import ChangeFeed

__all__ = ["ALIVE", "DEAD", "UNKNOWN", "Record", "Verdicts", "as_verdict"]

ALIVE = "alive"
DEAD = "dead"
UNKNOWN = "unknown"

# One standing opinion as a plain tuple: (pid, state, alive, start_time, observed_at,
# source). A tuple of atomic values is untracked by the cyclic GC after its first young
# collection, so ten thousand long-lived verdicts add nothing to the full collections
# that otherwise stall the loop for ~10 ms; it is also several times cheaper to build
# than the frozen LivenessVerdict message, which is made only when someone asks.
Record = tuple[int, str, bool | None, str | None, float, str]


def as_verdict(identity: str, record: Record) -> LivenessVerdict:
    pid, state, alive, start_time, observed_at, source = record
    return LivenessVerdict(
        worker_identity=identity,
        pid=pid,
        state=state,
        evidence=PidEvidence(alive=alive, start_time=start_time),
        observed_at=observed_at,
        source=source,
    )


class Verdicts:
    """Identity -> standing verdict; every change goes through ``set`` or ``drop``, so the
    counts by state and the feed of dead identities are kept, never recounted."""

    __slots__ = ("_dead", "_states", "records")

    def __init__(self) -> None:
        #: Read freely; written only through ``set`` and ``drop``, or (the sweep's hot
        #: loop) overwritten with a record of the same state, which moves no count.
        self.records: dict[str, Record] = {}
        self._states: dict[str, int] = {}
        self._dead: ChangeFeed[str, bool] = ChangeFeed(lambda: len(self.records))

    def get(self, identity: str) -> Record | None:
        return self.records.get(identity)

    def set(self, identity: str, record: Record) -> None:
        previous = self.records.get(identity)
        self.records[identity] = record
        state = record[1]
        if previous is not None:
            if previous[1] == state:
                return
            self._states[previous[1]] -= 1
            if previous[1] == DEAD:
                self._dead.note(identity, False)
        self._states[state] = self._states.get(state, 0) + 1
        if state == DEAD:
            self._dead.note(identity, True)

    def drop(self, identity: str) -> Record:
        record = self.records.pop(identity)
        self._states[record[1]] -= 1
        if record[1] == DEAD:
            self._dead.note(identity, False)
        return record

    def counts(self, sweeps: int, watched: int) -> LivenessCounts:
        states = {state: count for state, count in sorted(self._states.items()) if count}
        return LivenessCounts(sweeps_completed=sweeps, watched_pids=watched, states=states)

    def take_dead(self, cursor: int) -> DeadChanges:
        """The dead feed since ``cursor``'s take, or every dead identity (``complete``)."""
        taken = self._dead.take(cursor)
        if taken.changes is not None:
            return DeadChanges(cursor=taken.cursor, changes=taken.changes, complete=False)
        dead = {identity: True for identity, record in self.records.items() if record[1] == DEAD}
        return DeadChanges(cursor=taken.cursor, changes=dead, complete=True)
