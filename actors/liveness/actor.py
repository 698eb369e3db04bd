"""Liveness verdicts per active registration: chunked sweeps, pidfd exit watches, probe-now."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from typing import assert_never

from anyio.abc import TaskGroup

from actors.liveness.answers import NO_SHORTCUTS, ProbeShortcuts, answer, reuse
from actors.liveness.exits import ExitedIncarnations
from actors.liveness.inbox import (
    LivenessCountsQuery,
    LivenessInbox,
    LivenessStatusQuery,
    ProbeNow,
    TakeDead,
    Watch,
)
from actors.liveness.verdicts import ALIVE, DEAD, UNKNOWN, Record, Verdicts, as_verdict
from actors.mailbox import Actor, Inbox, reply_with
from actors.mailbox import let_others_run as _let_others_run
from actors.replies import LivenessStatus, LivenessVerdict
from supervisor.clock import Clock
from supervisor.observe.logs import get_logger
from supervisor.observe.metrics import Metrics
from supervisor.policy.canonical import canon
from supervisor.policy.evidence import PidEvidence, row_pid
from supervisor.policy.incarnation import same_incarnation, start_of, with_inode
from supervisor.store.base import Store
from supervisor.system.exit_watch import ExitWatchSet, exit_watch_supported
from supervisor.system.pidfd import pidfd_inode, pidfd_open, pidfd_supported
from supervisor.system.probes import LocalProbes, ProbeBackend, ProcessEvidence
from supervisor.system.proc_listing import listing_is_complete, visible_pids

__all__ = ["LivenessActor", "LivenessSettings", "judge"]

_log = get_logger()

#: Opens a pidfd for (pid, expected start time), or None when it cannot.
PidfdOpener = Callable[[int, str | None], int | None]

_SWEEP = "sweep"
_PIDFD = "pidfd"
_FOREIGN = "foreign_host"


@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessSettings:
    sweep_interval_seconds: float = 5.0
    #: Pids probed between two checkpoints; bounds how long one chunk holds the loop.
    sweep_chunk: int = 256
    use_pidfd: bool = True


def judge(evidence: ProcessEvidence | PidEvidence, registered_start: str | None) -> str:
    """Alive only if this exact incarnation still runs; a reused pid means ours is dead.

    Tokens that cannot be told apart (equal starts, an inode missing) count as ours.
    """
    if evidence.alive is None:
        return UNKNOWN
    if not evidence.alive:
        return DEAD
    seen = evidence.start_time
    if registered_start and seen and not same_incarnation(seen, registered_start):
        return DEAD
    return ALIVE


_UNKNOWN_EVIDENCE = PidEvidence(alive=None)


@dataclass(kw_only=True, eq=False, repr=False)
class LivenessActor(Actor[LivenessInbox]):
    """Keeps a verdict per active registration; never writes the database."""

    inbox: Inbox[LivenessInbox]
    store: Store
    clock: Clock
    probes: ProbeBackend
    settings: LivenessSettings = field(default_factory=LivenessSettings)
    pidfd_open: InitVar[PidfdOpener | None] = None
    metrics: Metrics = field(default_factory=Metrics)
    shortcuts: InitVar[ProbeShortcuts | None] = None

    def __post_init__(
        self, pidfd_open: PidfdOpener | None, shortcuts: ProbeShortcuts | None
    ) -> None:
        """``shortcuts`` None: the sound ones for this backend and opener (see _local_shortcuts)."""
        self._verdicts = Verdicts()
        # Identity -> pid of every process whose exit is watched.
        self._watched: dict[str, int] = {}
        self._exited = ExitedIncarnations()
        self._sweeps = 0
        use_pidfd = self.settings.use_pidfd and pidfd_supported()
        self._pidfd_open = pidfd_open or (_open_pidfd if use_pidfd else None)
        # The inode of a watch's fd names its process only for real pidfds.
        self._fd_inode: Callable[[int], int | None] = (
            _no_inode if pidfd_open is not None else pidfd_inode
        )
        self._exits: ExitWatchSet | None = None
        if shortcuts is None:
            shortcuts = _local_shortcuts(self.probes, custom_opener=pidfd_open is not None)
        self._shortcuts = shortcuts
        # Pid -> the watch ProbeNow may answer from (its identity, and the evidence of the
        # verified incarnation it holds): one per pid, the latest; a pid whose vouching
        # watch is dropped is probed again even if another identity still watches it.
        self._vouch_key: dict[int, str] = {}
        self._vouched: dict[int, PidEvidence] = {}
        # The last ProbeNow answer, whose objects the next one reuses where unchanged.
        self._answered: dict[int, PidEvidence] = {}

    @property
    def sweeps_completed(self) -> int:
        return self._sweeps

    async def on_start(self, tg: TaskGroup) -> None:
        if self._pidfd_open is not None and exit_watch_supported():
            self._exits = ExitWatchSet()
        tg.start_soon(self._sweeper)
        if self._exits is not None:
            tg.start_soon(self._exit_loop, self._exits)

    async def on_stop(self) -> None:
        if self._exits is not None:
            self._exits.close()
            self._exits = None
        self._watched.clear()
        self._vouch_key.clear()
        self._vouched.clear()
        self._exited.clear()
        self.metrics.exit_watches.set(0)

    async def on_receive(self, message: LivenessInbox, tg: TaskGroup) -> None:
        match message:
            case Watch():
                self._watch(message.worker_identity, message.pid, message.start_time)
                # Here and at the end of a sweep, not per watch: a sweep may open thousands.
                self.metrics.exit_watches.set(len(self._watched))
            case ProbeNow():
                with message.reply:
                    message.reply.send(self.probe_now(message.pids))
            case LivenessStatusQuery():
                await reply_with(message.reply, self._status())
            case LivenessCountsQuery():
                with message.reply:
                    message.reply.send(self._verdicts.counts(self._sweeps, len(self._watched)))
            case TakeDead():
                with message.reply:
                    message.reply.send(self._verdicts.take_dead(message.cursor))
            case _:
                assert_never(message)

    async def _status(self) -> LivenessStatus:
        # One consistent snapshot, then the LivenessVerdict messages built a chunk at a time:
        # for ten thousand rows building them all at once would hold the loop ~15 ms.
        sweeps, watched = self._sweeps, len(self._watched)
        records = sorted(self._verdicts.records.items())
        verdicts: list[LivenessVerdict] = []
        chunk = max(1, self.settings.sweep_chunk)
        for start in range(0, len(records), chunk):
            verdicts.extend(as_verdict(k, r) for k, r in records[start : start + chunk])
            if start + chunk < len(records):
                await _let_others_run()
        return LivenessStatus(
            sweeps_completed=sweeps, watched_pids=watched, verdicts=tuple(verdicts)
        )

    def probe_now(self, pids: Sequence[int]) -> dict[int, PidEvidence]:
        """Fresh evidence per pid, overruled only by an observed exit of that incarnation.

        Snapshot and plan read this; ProbeNow's docstring states the contract. A probe that
        finds a live process with the start of an incarnation a pidfd saw exit identifies it
        (its pidfd inode): the exited one (a stat read racing the exit, an OS whose probe
        cannot see zombies) is dead for good; another that got the pid within the same
        clock tick is alive under its own token; tokens that cannot tell the two apart give
        "cannot tell", never "dead". A probe that cannot tell, or finds another start under
        the pid, keeps its answer. A watch that has not fired answers for its pid without a
        probe, and a complete /proc listing for the pids it lacks, where the shortcuts allow.
        """
        exits, shortcuts = self._exits, self._shortcuts
        vouched: Mapping[int, PidEvidence] = {}
        not_vouched: set[int] = set()
        if exits is not None and shortcuts.watches_vouch:
            vouched = self._vouched
            # Read at the request: an exit the exit loop has not taken in yet must still
            # stop its watch from vouching.
            for identity in exits.pending():
                pid = self._watched.get(identity)
                if pid is not None and self._vouch_key.get(pid) == identity:
                    not_vouched.add(pid)
            vouched = self._exited.vouching(vouched, not_vouched, self._watch_token)
        evidence = answer(
            pids,
            vouched=vouched,
            not_vouched=not_vouched,
            exited=self._exited.by_start,
            listing=shortcuts.listing,
            probe=self.probes.probe,
            identify=self.probes.identify,
            probe_many=self.probes.probe_many,
            previous=self._answered,
        )
        # Kept as sent: answer() checks every reused object's value, so even a receiver
        # that wrote into its Mapping could not make a later answer wrong.
        self._answered = evidence
        return evidence

    def _watch_token(self, pid: int) -> str | None:
        """The whole token of the watch that vouches for pid."""
        identity = self._vouch_key.get(pid)
        record = self._verdicts.get(identity) if identity is not None else None
        return record[3] if record is not None else None

    async def _sweeper(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception as exc:  # a failed sweep must not kill exit watches
                _log.error("sweep_failed", error=repr(exc))
            await self.clock.sleep(self.settings.sweep_interval_seconds)

    async def sweep(self) -> None:
        """Probe every active row in chunks, yielding to the loop between chunks.

        Rows whose exit is being watched through a pidfd are not probed: an
        open pidfd that has not fired is proof that very process still runs.
        """
        # Real elapsed time on purpose: this is a measurement for operators, not
        # protocol time, and under a FakeClock every sweep would take zero seconds.
        began = time.perf_counter()
        rows = await self.store.read_active_processes()
        host = self.probes.host_id()
        chunk = max(1, self.settings.sweep_chunk)
        current: set[str] = set()
        local: list[tuple[str, int, str | None]] = []
        watched = self._watched
        for start in range(0, len(rows), chunk):
            observed_at = self.clock.monotonic()
            for identity, raw_pid, row_host, start_time in rows[start : start + chunk]:
                # Stored pids are almost always plain ints; only the odd one pays for the
                # general parse.
                if type(raw_pid) is int and raw_pid > 0:
                    pid: int | None = raw_pid
                else:
                    pid = row_pid({"pid": raw_pid})
                if not identity or pid is None:
                    continue
                current.add(identity)
                if identity in watched:
                    continue
                if host and canon(row_host) == host:
                    local.append((identity, pid, canon(start_time) or None))
                else:
                    # Another machine's pid numbers mean nothing here.
                    self._verdicts.set(identity, (pid, UNKNOWN, None, None, observed_at, _FOREIGN))
            await _let_others_run()
        del rows
        for gone in [i for i in self._verdicts.records if i not in current]:
            self._forget_exit(gone, self._verdicts.drop(gone))
        for gone in [i for i in watched if i not in current]:
            self._unwatch(gone)
        del current
        await _let_others_run()
        verdicts, set_verdict = self._verdicts.records, self._verdicts.set
        for start in range(0, len(local), chunk):
            part = local[start : start + chunk]
            seen = self.probes.probe_many([pid for _, pid, _ in part])
            now = self.clock.monotonic()
            for (identity, pid, registered_start), evidence in zip(part, seen, strict=True):
                previous = verdicts.get(identity)
                if previous is not None and previous[1] == DEAD and previous[5] == _PIDFD:
                    continue  # an observed exit is final for this incarnation
                state = judge(evidence, registered_start)
                record = (pid, state, evidence.alive, evidence.start_time, now, _SWEEP)
                if previous is not None and previous[1] == state:
                    verdicts[identity] = record  # same state: no count or feed moves
                else:
                    set_verdict(identity, record)
                if state == ALIVE:
                    self._watch(identity, pid, registered_start)
            await _let_others_run()
        self._sweeps += 1
        self.metrics.sweeps.inc()
        self.metrics.sweep_seconds.observe(time.perf_counter() - began)
        self.metrics.exit_watches.set(len(self._watched))

    def verdict(self, worker_identity: str) -> LivenessVerdict | None:
        record = self._verdicts.get(worker_identity)
        return None if record is None else as_verdict(worker_identity, record)

    def _watch(self, identity: str, pid: int, start_time: str | None) -> None:
        if self._exits is None or self._pidfd_open is None or identity in self._watched:
            return
        fd = self._pidfd_open(pid, start_time)
        if fd is None:
            return
        if start_time is not None:
            # The fd's inode completes the token (a row registered before inodes were
            # recorded gets it here), so the exit it reports names exactly this process.
            # A token that already names its inode keeps it when the fd cannot tell one.
            inode = self._fd_inode(fd)
            if inode is not None:
                start_time = with_inode(start_time, inode)
        self._exits.add(identity, fd)
        self._watched[identity] = pid
        if start_time is not None:
            # Only a verified start: the opener kept the fd because the pid still had it.
            # Vouched as a probe would answer, by the start alone.
            self._vouch_key[pid] = identity
            self._vouched[pid] = reuse(self._answered, pid, True, start_of(start_time))
        # The pidfd was opened on this exact incarnation, so until it fires the
        # worker is alive; sweeps skip watched rows on the strength of this.
        self._verdicts.set(identity, (pid, ALIVE, True, start_time, self.clock.monotonic(), _PIDFD))

    def _forget_exit(self, identity: str, record: Record) -> None:
        pid, state, _, start_time, _, source = record
        if state != DEAD or source != _PIDFD or start_time is None:
            return
        self._exited.forget(pid, start_time, identity)

    def _unwatch(self, identity: str) -> None:
        self._stop_vouching(identity, self._watched.pop(identity, None))
        self.metrics.exit_watches.set(len(self._watched))
        if self._exits is not None:
            self._exits.discard(identity)

    async def _exit_loop(self, exits: ExitWatchSet) -> None:
        while True:
            for identity in await exits.exited():
                pid = self._watched.pop(identity, None)
                if pid is None:
                    continue
                self._stop_vouching(identity, pid)
                # The watch was opened on the registered incarnation (its record says
                # which); the exit is a fact about that start time, kept for probe_now.
                watched = self._verdicts.get(identity)
                start = watched[3] if watched is not None and watched[0] == pid else None
                if start is not None:
                    self._exited.add(pid, start, identity)
                self.metrics.exit_watches.set(len(self._watched))
                self._verdicts.set(
                    identity, (pid, DEAD, False, start, self.clock.monotonic(), _PIDFD)
                )
                _log.info("worker_exited", worker_identity=identity, pid=pid)

    def _stop_vouching(self, identity: str, pid: int | None) -> None:
        if pid is not None and self._vouch_key.get(pid) == identity:
            del self._vouch_key[pid]
            del self._vouched[pid]


def _local_shortcuts(probes: ProbeBackend, *, custom_opener: bool) -> ProbeShortcuts:
    # Sound only where the probe is this machine's stat read and the watch is a real pidfd
    # verified against it; a hidepid or foreign-namespace /proc gets neither, so every
    # pid is probed as before.
    if not isinstance(probes, LocalProbes) or not listing_is_complete():
        return NO_SHORTCUTS
    return ProbeShortcuts(watches_vouch=not custom_opener, listing=visible_pids)


def _no_inode(fd: int) -> int | None:
    return None


def _open_pidfd(pid: int, start_time: str | None) -> int | None:
    return pidfd_open(pid, expected_start_time=start_time)
