"""The control plane: work leases, allocation, namespace health, incident links, permissions."""

from __future__ import annotations

__all__: list[str] = []
