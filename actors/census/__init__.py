"""The census actor: every MCP server process on this host, wrapped or observed."""

from actors.census.inbox import CensusInbox, ReportCensus, TakeCensus

__all__ = ["CensusInbox", "ReportCensus", "TakeCensus"]
