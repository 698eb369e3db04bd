"""Row observations and verdicts kept between plans; redone where a row, probe or stamp moved."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from operator import attrgetter
from typing import Any, TypeVar, overload

from supervisor.policy.evidence import UNKNOWN, PidEvidence
from supervisor.policy.retirement.conjunction import FleetContext, row_verdict
from supervisor.policy.retirement.facts import RowFacts, Verdict
from supervisor.policy.retirement.freshness import NO_FRESHNESS
from supervisor.policy.retirement.moment import Moment, observe_row
from supervisor.policy.retirement.plan import ProtectedOwners

from .row_columns import changed_positions

__all__ = ["Ages", "PlanState"]

_K = TypeVar("_K", bound=Hashable)

_PID = attrgetter("pid")
_UNTIL = attrgetter("fresh_until")
_IDENTITY = attrgetter("worker_identity")
_SLOT = attrgetter("slot")
#: Stands in for a missing pid in evidence lookups: no map holds it, so the row gets UNKNOWN.
_NO_PID = object()
#: Past this share of moved rows (in quarters), redoing every row is cheaper than
#: tracking each change; a plan after a round of heartbeats moves about half.
_REBUILD_QUARTERS = 3


class Ages(Sequence[float | None]):
    """Heartbeat ages at one instant, computed per row only when an entry is built."""

    __slots__ = ("_beats", "_now_us")

    def __init__(self, beats: list[int | None], now_us: int) -> None:
        self._beats = beats
        self._now_us = now_us

    def __len__(self) -> int:
        return len(self._beats)

    def _age(self, beat_us: int | None) -> float | None:
        # Integer microseconds over 10**6: the very float total_seconds() returns.
        return None if beat_us is None else (self._now_us - beat_us) / 1_000_000

    @overload
    def __getitem__(self, index: int) -> float | None: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[float | None]: ...

    def __getitem__(self, index: int | slice) -> float | Sequence[float | None] | None:
        if isinstance(index, slice):
            return [self._age(b) for b in self._beats[index]]
        return self._age(self._beats[index])


def _bump(counter: Counter[_K], key: _K, by: int, flipped: dict[_K, bool]) -> None:
    """Add ``by`` to ``key``'s count (a key at zero is dropped, so the counter's keys
    are the keys held); a key that appears or vanishes is marked with whether it was
    held before its first move."""
    held = counter.get(key, 0)
    now = held + by
    if now:
        counter[key] = now
    else:
        del counter[key]
    if (held == 0) != (now == 0):
        flipped.setdefault(key, held != 0)


class PlanState:
    """Each row's probe, freshness, liveness, ownership and verdict as of the last plan.

    Pure, like the memo that owns it: the inputs are the facts list, the
    evidence map, ``now`` and the lease owners. A row is redone when its facts
    object, its evidence object (or value) or its freshness at ``now`` differs
    from the last plan's; the fleet-wide sets are kept by counting, and every
    verdict is redone when one of them, the owners or the row set's shape
    changes. The result always equals judging every row from scratch (the
    property tests hold it to the reference planner).
    """

    __slots__ = (
        "_amb",
        "_beats",
        "_bits",
        "_contested",
        "_contrib",
        "_dups",
        "_facts",
        "_fresh",
        "_id_counts",
        "_live",
        "_owners",
        "_ownership",
        "_pids",
        "_probes",
        "_raw",
        "_run_slots",
        "_running",
        "_slot_counts",
        "_untils",
        "_verdicts",
        "full_passes",
        "redone_rows",
    )

    def __init__(self) -> None:
        self._facts: list[RowFacts] = []
        self._raw: list[Any] = []
        self._pids: list[Any] = []
        self._probes: list[PidEvidence] = []
        self._untils: list[int] = []
        self._beats: list[int | None] = []
        self._bits: list[bool] = []
        self._fresh: list[bool | None] = []
        self._live: list[bool] = []
        self._ownership: list[str] = []
        self._contrib: list[bool] = []
        self._running: list[bool] = []
        self._verdicts: list[Verdict] = []
        self._owners: ProtectedOwners | None = None
        self._id_counts: Counter[str | None] = Counter()
        self._slot_counts: Counter[tuple[str, str] | None] = Counter()
        self._amb: Counter[tuple[str, str]] = Counter()
        self._run_slots: Counter[tuple[str, str]] = Counter()
        self._dups: set[str] = set()
        self._contested: set[tuple[str, str]] = set()
        #: Plans that judged every row, and rows redone by the others (for tests and benches).
        self.full_passes = 0
        self.redone_rows = 0

    def observe(
        self,
        facts: list[RowFacts],
        evidence: Mapping[int, PidEvidence],
        now_us: int,
        owners: ProtectedOwners,
    ) -> tuple[Moment, list[Verdict]]:
        """This plan's observations and verdicts, one per row in ``facts`` order.

        The returned columns are copies: the next plan may change the state.
        """
        n = len(facts)
        old = self._facts
        if n != len(old) or not n:
            self._rebuild(facts, evidence, now_us, owners)
            return self._snapshot(now_us)
        # One C-speed pass over the pointers: cheaper than trusting a hint kept in step.
        moved = changed_positions(facts, old)
        if len(moved) * 4 > n * _REBUILD_QUARTERS:
            self._rebuild(facts, evidence, now_us, owners)
        else:
            pids = self._pids
            for i in moved:
                pid = facts[i].pid
                pids[i] = _NO_PID if pid is None else pid
            self._advance(facts, list(map(evidence.get, pids)), moved, now_us, owners)
        return self._snapshot(now_us)

    def _snapshot(self, now_us: int) -> tuple[Moment, list[Verdict]]:
        moment = Moment(
            probes=list(self._probes),
            ages=Ages(list(self._beats), now_us),
            fresh=list(self._fresh),
            live=list(self._live),
            ownership=list(self._ownership),
        )
        return moment, list(self._verdicts)

    # --- from scratch ------------------------------------------------------------------

    def _rebuild(
        self,
        facts: list[RowFacts],
        evidence: Mapping[int, PidEvidence],
        now_us: int,
        owners: ProtectedOwners,
    ) -> None:
        self.full_passes += 1
        self._facts = list(facts)
        self._pids = [_NO_PID if p is None else p for p in map(_PID, facts)]
        raw = list(map(evidence.get, self._pids))
        self._raw = raw
        self._probes = [UNKNOWN if r is None else r for r in raw]
        self._untils = list(map(_UNTIL, facts))
        self._beats = [f.beat_us for f in facts]
        self._bits = [now_us < u for u in self._untils]
        self._fresh = [
            None if u == NO_FRESHNESS else b for u, b in zip(self._untils, self._bits, strict=True)
        ]
        observed = list(map(observe_row, facts, self._probes, self._fresh))
        self._live = [o[0] for o in observed]
        self._ownership = [o[1] for o in observed]
        self._contrib = [o[2] for o in observed]
        self._running = [
            live or p.alive is None for live, p in zip(self._live, self._probes, strict=True)
        ]
        self._id_counts = Counter(map(_IDENTITY, facts))
        self._slot_counts = Counter(map(_SLOT, facts))
        self._amb = Counter(
            key for f, c in zip(facts, self._contrib, strict=True) if c for key in f.conflict_keys
        )
        self._run_slots = Counter(
            f.slot for f, r in zip(facts, self._running, strict=True) if r and f.slot is not None
        )
        self._dups = {k for k, c in self._id_counts.items() if k and c > 1}
        self._contested = {s for s in self._run_slots if self._slot_counts[s] > 1}
        self._owners = owners
        self._judge_all()

    def _judge_all(self) -> None:
        fleet = self._fleet()
        self._verdicts = list(
            map(
                row_verdict,
                self._facts,
                self._probes,
                self._live,
                self._fresh,
                self._ownership,
                [fleet] * len(self._facts),
            )
        )

    def _fleet(self) -> FleetContext:
        assert self._owners is not None
        return FleetContext(
            owners=self._owners,
            duplicate_identities=self._dups,
            # The counter's keys are the keys held (zero counts are dropped).
            ambiguous_keys=self._amb.keys(),
            contested_slots=self._contested,
        )

    # --- one change at a time --------------------------------------------------------

    def _advance(
        self,
        facts: list[RowFacts],
        raw: list[Any],
        moved: list[int],
        now_us: int,
        owners: ProtectedOwners,
    ) -> None:
        flipped_ids: set[str | None] = set()
        touched_slots: set[tuple[str, str] | None] = set()
        prior: dict[int, RowFacts] = {}
        for i in moved:
            before, after = self._facts[i], facts[i]
            prior[i] = before
            self._facts[i] = after
            self._untils[i] = after.fresh_until
            self._beats[i] = after.beat_us
            if before.worker_identity != after.worker_identity:
                # Duplicates are counts above one, not above zero: every touched
                # identity is looked at again below.
                _bump(self._id_counts, before.worker_identity, -1, {})
                _bump(self._id_counts, after.worker_identity, 1, {})
                flipped_ids.update((before.worker_identity, after.worker_identity))
            if before.slot != after.slot:
                _bump(self._slot_counts, before.slot, -1, {})
                _bump(self._slot_counts, after.slot, 1, {})
                touched_slots.update((before.slot, after.slot))
        old_raw = self._raw
        probes_moved = [i for i in changed_positions(raw, old_raw) if raw[i] != old_raw[i]]
        self._raw = raw
        bits = list(map(now_us.__lt__, self._untils))
        bits_moved = changed_positions(bits, self._bits) if bits != self._bits else []
        self._bits = bits
        dirty = sorted({*moved, *probes_moved, *bits_moved})

        amb_flipped: dict[tuple[str, str], bool] = {}
        run_flipped: dict[tuple[str, str], bool] = {}
        redo: list[int] = []
        for i in dirty:
            f = self._facts[i]
            r = raw[i]
            probe = UNKNOWN if r is None else r
            u = self._untils[i]
            fresh = None if u == NO_FRESHNESS else bits[i]
            live, ownership, contrib = observe_row(f, probe, fresh)
            running = live or probe.alive is None
            # What this row added to the fleet-wide counts before this plan comes
            # off with the facts it had then (they may have moved in this plan).
            before = prior.get(i, f)
            # Most redone rows (a new stamp on a live row) give the same keys as before.
            if self._contrib[i] != contrib or before.conflict_keys != f.conflict_keys:
                if self._contrib[i]:
                    for key in before.conflict_keys:
                        _bump(self._amb, key, -1, amb_flipped)
                if contrib:
                    for key in f.conflict_keys:
                        _bump(self._amb, key, 1, amb_flipped)
            if self._running[i] != running or before.slot != f.slot:
                if self._running[i] and before.slot is not None:
                    _bump(self._run_slots, before.slot, -1, run_flipped)
                    touched_slots.add(before.slot)
                if running and f.slot is not None:
                    _bump(self._run_slots, f.slot, 1, run_flipped)
                    touched_slots.add(f.slot)
            self._probes[i] = probe
            self._fresh[i] = fresh
            self._live[i] = live
            self._ownership[i] = ownership
            self._contrib[i] = contrib
            self._running[i] = running
            redo.append(i)

        context_moved = owners != self._owners
        self._owners = owners
        for identity in flipped_ids:
            if identity and self._id_counts.get(identity, 0) > 1:
                context_moved |= identity not in self._dups
                self._dups.add(identity)
            elif identity in self._dups:
                context_moved = True
                self._dups.discard(identity)
        # A count that crossed zero adds or removes the key; one that merely moved does not.
        context_moved |= any((key in self._amb) != held for key, held in amb_flipped.items())
        for slot in touched_slots:
            if slot is None:
                continue
            contested = self._slot_counts.get(slot, 0) > 1 and self._run_slots.get(slot, 0) > 0
            if contested != (slot in self._contested):
                context_moved = True
                if contested:
                    self._contested.add(slot)
                else:
                    self._contested.discard(slot)
        if context_moved:
            self.full_passes += 1
            self._judge_all()
            return
        fleet = self._fleet()
        verdicts = self._verdicts
        for i in redo:
            verdicts[i] = row_verdict(
                self._facts[i],
                self._probes[i],
                self._live[i],
                self._fresh[i],
                self._ownership[i],
                fleet,
            )
        self.redone_rows += len(redo)
