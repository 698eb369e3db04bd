"""The registry writer: the only database writer, its inbox, beat pipeline and transactions."""

from __future__ import annotations

__all__: list[str] = []
