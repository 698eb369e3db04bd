"""The one shape of a refused answer on every surface: nothing changed, why, and a stable code."""

from __future__ import annotations

from typing import Any

from .retirement.reasons import OUTCOME_REFUSED

__all__ = ["refused"]


def refused(
    code: str, *reasons: str, outcome: str = OUTCOME_REFUSED, **extra: Any
) -> dict[str, Any]:
    """A refusal: ``success`` false, ``mutation_performed`` false, ``code`` and ``reasons``.

    ``extra`` adds what the refusing operation says besides (what it did not do, the
    permission decision, the tool): every surface answers a refusal in this shape.
    """
    return {
        "success": False,
        "outcome": outcome,
        "code": code,
        "mutation_performed": False,
        "reasons": list(reasons),
        **extra,
    }
