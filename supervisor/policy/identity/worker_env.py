"""What a namespace worker is launched with: its namespace, one of the five, and the
environment names that say who launched it (read by the registry and the exec wrapper)."""

from __future__ import annotations

__all__ = [
    "ENV_CLIENT",
    "ENV_FLEET_RUN",
    "ENV_INSTANCE",
    "ENV_MANAGED",
    "ENV_PROFILE",
    "ENV_PROVENANCE",
    "ENV_SESSION",
    "NAMESPACES",
]

#: The seed's order, which listings and generated configs keep; a profile's role kind is
#: one of them too.
NAMESPACES: tuple[str, ...] = ("author", "reviewer", "merger", "controller", "reconciler")

ENV_CLIENT = "GITEA_MCP_CLIENT"
ENV_INSTANCE = "GITEA_MCP_CLIENT_INSTANCE"
ENV_PROVENANCE = "GITEA_MCP_INSTANCE_PROVENANCE"
ENV_SESSION = "GITEA_MCP_CLIENT_SESSION"
ENV_FLEET_RUN = "GITEA_MCP_FLEET_RUN_ID"
ENV_PROFILE = "GITEA_MCP_PROFILE"
ENV_MANAGED = "GITEA_CLIENT_MANAGED"
