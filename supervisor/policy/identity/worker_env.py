"""The five sanctioned namespaces a worker runs in; a profile's role kind is one of them too."""

from __future__ import annotations

__all__ = ["NAMESPACES"]

#: The seed's order, which listings and generated configs keep.
NAMESPACES: tuple[str, ...] = ("author", "reviewer", "merger", "controller", "reconciler")
