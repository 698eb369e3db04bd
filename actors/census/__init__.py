"""The census actor: every MCP server process on this host, wrapped or observed."""

from actors.census.inbox import CensusInbox, TakeCensus

__all__ = ["CensusInbox", "TakeCensus"]
