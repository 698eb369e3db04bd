"""Row mapping for namespace health and incident links, the same for every engine."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from supervisor.policy.control.incident_links import INCIDENT_SCOPE_FIELDS, decode_pr_numbers
from supervisor.store.control_base import Row
from supervisor.store.rows import known_columns
from supervisor.store.schema.links import INCIDENT_LINK_COLUMNS, NAMESPACE_HEALTH_COLUMNS

__all__ = ["health_params", "health_rows", "link_params", "link_rows"]

_FLAGS = ("healthy", "ide_namespace_proven", "blocks_merge_workflow")


def _known(columns: tuple[str, ...], row: Mapping[str, Any], what: str) -> tuple[str, ...]:
    return known_columns(row, frozenset(columns), columns, what)


def health_params(row: Mapping[str, Any]) -> tuple[tuple[str, ...], list[Any]]:
    """Columns (schema order) and values: flags as 0/1, the assessment as JSON text."""
    columns = _known(NAMESPACE_HEALTH_COLUMNS, row, "namespace_health")
    values: list[Any] = []
    for column in columns:
        value = row[column]
        if column in _FLAGS:
            value = int(bool(value))
        elif column == "assessment":
            value = json.dumps(value, sort_keys=True, allow_nan=False, default=str)
        values.append(value)
    return columns, values


def link_params(row: Mapping[str, Any]) -> tuple[tuple[str, ...], list[Any]]:
    """Columns and values of an insert or update; link_id is the store's, never given."""
    columns = _known(INCIDENT_LINK_COLUMNS[1:], row, "incident_links")
    values = [
        json.dumps(list(row[c])) if c == "linked_pr_numbers" and row[c] is not None else row[c]
        for c in columns
    ]
    return columns, values


def health_rows(found: Sequence[Sequence[Any]]) -> list[Row]:
    """Stored verdicts with flags as bools and the assessment decoded."""
    out: list[Row] = []
    for raw in found:
        row = dict(zip(NAMESPACE_HEALTH_COLUMNS, raw, strict=True))
        for flag in _FLAGS:
            row[flag] = bool(row[flag])
        try:
            row["assessment"] = json.loads(row["assessment"])
        except (TypeError, ValueError):
            row["assessment"] = None
        out.append(row)
    return out


def link_rows(found: Sequence[Sequence[Any]]) -> list[Row]:
    """Incident links with the PR list decoded and scope shown as ''."""
    out: list[Row] = []
    for raw in found:
        row = dict(zip(INCIDENT_LINK_COLUMNS, raw, strict=True))
        row["linked_pr_numbers"] = decode_pr_numbers(row["linked_pr_numbers"])
        for field in INCIDENT_SCOPE_FIELDS:
            row[field] = row[field] or ""
        out.append(row)
    return out
