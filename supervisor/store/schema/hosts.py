"""Host leases schema (version 5): one row per host whose supervisor shares this registry."""

from __future__ import annotations

__all__ = ["HOST_LEASE_COLUMNS", "HOST_LEASE_STATUSES", "V5_DESCRIPTION", "V5_STATEMENTS"]

#: ``live``: the host's supervisor renews it. ``declared_dead``: another host retired the
#: host's rows after its lease had been expired for long enough; the host's supervisor,
#: if it comes back, is told so at its next renewal and makes the row live again.
HOST_LEASE_STATUSES: tuple[str, ...] = ("live", "declared_dead")

HOST_LEASE_COLUMNS: tuple[str, ...] = (
    "host_id",
    "boot_id",
    "supervisor_id",
    "status",
    "epoch",
    "registered_at",
    "renewed_at",
    "expires_at",
    "declared_dead_at",
    "declared_dead_by",
    "retired_rows",
)

V5_DESCRIPTION = "host leases: which supervisors share this registry, and until when"

# Same portability rules as schema.py. epoch BIGINT: it only grows, once per
# (re-)registration of the host, so a plan made against one incarnation of a host's
# lease never applies to the next. Stamps are the store's fixed-width UTC text.
V5_STATEMENTS: tuple[str, ...] = (
    "CREATE TABLE host_leases (host_id TEXT PRIMARY KEY, boot_id TEXT, supervisor_id TEXT, "
    "status TEXT NOT NULL, epoch BIGINT NOT NULL, registered_at TEXT, renewed_at TEXT, "
    "expires_at TEXT NOT NULL, declared_dead_at TEXT, declared_dead_by TEXT, "
    "retired_rows INTEGER, "
    f"CHECK (status IN ({', '.join(repr(s) for s in HOST_LEASE_STATUSES)})))",
)
