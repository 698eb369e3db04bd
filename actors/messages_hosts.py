"""Host lease messages to the writer: renew this host's lease, retire a dead host's rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actors.mailbox import Reply
from supervisor.policy.control.permissions import Profile

if TYPE_CHECKING:
    # Type-only: actors.messages defines WriteAck and re-exports this module's classes.
    from actors.messages import WriteAck

__all__ = [
    "ApplyHostRetirementRequest",
    "HostLeaseInbox",
    "HostLeaseStatus",
    "HostLeaseStatusQuery",
    "HostWrite",
    "PlanHostRetirementRequest",
    "RenewHostLease",
    "RetireHostRows",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RenewHostLease:
    """Register or renew this host's lease until now + ``lease_seconds``.

    The ack's ``data`` says ``declared_dead`` (and by whom, how many rows) when another
    host had retired this host's rows in the meantime; ``code`` is ``host_id_in_use``
    when another live supervisor holds the host id.
    """

    host_id: str
    boot_id: str | None
    supervisor_id: str
    lease_seconds: float
    reply: Reply[WriteAck] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RetireHostRows:
    """Compare-and-swap retirement of a silent host's rows (from ``plan_host_retirement``).

    Refused unless the host's lease still has ``host_token`` and the fresh plan still
    has ``candidate_fingerprint``; every requested identity must be a candidate.
    """

    host_id: str
    host_token: str
    candidate_fingerprint: str
    worker_identities: tuple[str, ...]
    retired_by: str
    local_host_id: str | None
    retire_after_seconds: float
    #: The caller's grant, re-read inside the transaction immediately before the first
    #: write (None = still granted, else why not), so revoking it takes effect at once.
    recheck_grant: Callable[[], str | None]
    reply: Reply[WriteAck] | None = None


HostWrite = RenewHostLease | RetireHostRows


# --- host lease keeper ------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLeaseStatus:
    """What this supervisor knows of its own host lease."""

    host_id: str | None
    supervisor_id: str
    enabled: bool
    epoch: int = 0
    renewals: int = 0
    last_code: str = ""
    last_detail: str = ""
    #: How often another host declared this one dead (each time, workers re-register).
    declared_dead_count: int = 0
    declared_dead_by: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLeaseStatusQuery:
    reply: Reply[HostLeaseStatus]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanHostRetirementRequest:
    """Dry-run plan for a silent host's rows (read-only); needs the ``plan`` grant."""

    profile: Profile | None
    host_id: str
    reply: Reply[Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyHostRetirementRequest:
    """Apply a plan from ``PlanHostRetirementRequest`` (the writer runs the CAS); needs the
    ``apply`` grant (operation gitea.worker_registry.retire)."""

    profile: Profile | None
    host_id: str
    host_token: str
    candidate_fingerprint: str
    worker_identities: tuple[str, ...]
    reply: Reply[WriteAck]


HostLeaseInbox = HostLeaseStatusQuery | PlanHostRetirementRequest | ApplyHostRetirementRequest
