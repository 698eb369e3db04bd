"""The workers' library's named call of the operator's fleet ops, by their
keyword arguments (generated; do not edit)."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/fleet.py;
# tests/unit/test_declared_current.py fails when this is not what it writes. The library
# sends the wire format and loads no server module.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["DeclaredCalls"]

_R = TypeVar("_R")


def _sent(values: Mapping[str, Any]) -> dict[str, Any]:
    """The frame's arguments: absent ones (None) left out, sequences as JSON lists."""
    return {
        name: [dict(v) if isinstance(v, Mapping) else v for v in value]
        if isinstance(value, list | tuple)
        else value
        for name, value in values.items()
        if value is not None
    }


class DeclaredCalls(Generic[_R]):
    """Mixed into the client's Calls: ``request`` sends one frame and returns its answer."""

    def request(
        self, op: str, args: Mapping[str, Any] | None = None, *, token: str | None = None
    ) -> _R:
        raise NotImplementedError

    def status(
        self,
    ) -> _R:
        """``status``, as declared in ``supervisor.operations``."""
        return self.request("status")

    def snapshot(
        self,
        *,
        canonical_repository: str | None = None,
        expected_manifest: Sequence[Any] | None = None,
        expected_live_revision: str | None = None,
        include_history: bool = False,
    ) -> _R:
        """``snapshot``, as declared in ``supervisor.operations``."""
        return self.request(
            "snapshot",
            _sent(
                {
                    "canonical_repository": canonical_repository,
                    "expected_manifest": expected_manifest,
                    "expected_live_revision": expected_live_revision,
                    "include_history": include_history or None,
                }
            ),
        )

    def apply(
        self,
        *,
        registry_fingerprint: str | None = None,
        scope_fingerprint: str | None = None,
        candidate_fingerprint: str,
        worker_identities: Sequence[str] | None = None,
        canonical_repository: str | None = None,
        override_mass_guard: bool = False,
    ) -> _R:
        """``apply``, as declared in ``supervisor.operations``."""
        return self.request(
            "apply",
            _sent(
                {
                    "registry_fingerprint": registry_fingerprint,
                    "scope_fingerprint": scope_fingerprint,
                    "candidate_fingerprint": candidate_fingerprint,
                    "worker_identities": worker_identities,
                    "canonical_repository": canonical_repository,
                    "override_mass_guard": override_mass_guard or None,
                }
            ),
        )
