"""``python -m bench --quick`` runs every benchmark and writes every figure as a number."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import _run_child
from bench.report import Figure

pytestmark = pytest.mark.integration

_ROOT = Path(__file__).resolve().parents[2]

#: Every figure the suite must report; values are never judged here (no timed assertions).
EXPECTED = (
    "heartbeats.e2e_c8_per_s",
    "heartbeats.e2e_c32_per_s",
    "heartbeats.e2e_c32_pipelined_per_s",
    "heartbeats.handle_c32_per_s",
    "heartbeats.echo_floor_c32_per_s",
    "heartbeats.baseline_naive_e2e_per_s",
    "heartbeats.vs_naive_e2e_ratio",
    "heartbeats.baseline_sqlite3_per_s",
    "heartbeats.baseline_store_per_s",
    "heartbeats.vs_sqlite3_ratio",
    "heartbeats.vs_store_ratio",
    "writer.acked_per_s",
    "writer.echo_floor_per_s",
    "writer.raw_executemany_per_s",
    "writer.unacked_per_s",
    "writer.vs_unacked_ratio",
    "writer.echo_vs_raw_ratio",
    "writer.vs_raw_ratio",
    "durability.fsync_ms",
    "durability.one_sender.flushed_per_s",
    "durability.one_sender.unflushed_per_s",
    "durability.one_sender.cost_ratio",
    "durability.many_senders.flushed_per_s",
    "durability.many_senders.unflushed_per_s",
    "durability.many_senders.cost_ratio",
    "plan.pure_1k_ms",
    "plan.pure_10k_ms",
    "plan.pure_100k_ms",
    "plan.pure_10k_beats_ms",
    "plan.pure_100k_beats_ms",
    "plan.linearity",
    "plan.actor_10k_ms",
    "plan.actor_10k_history_ms",
    "plan.actor_10k_history_beating_ms",
    "gauges.scrape_10k_ms",
    "gauges.status_10k_ms",
    "gauges.full_count_10k_ms",
    "gauges.vs_full_ratio",
    "gauges.scrape_10k_beating_ms",
    "sweep.cpu_ms",
    "sweep.max_stall_ms",
    "discovery.cost_ratio",
    "discovery.census_sweep_ms",
    "discovery.liveness_sweep_ms",
    "discovery.first_sweep_ms",
    "discovery.max_stall_ms",
    "activity.added_ms",
    "activity.sweep_ms",
    "activity.sweep_without_ms",
    "pipes.proof_added_ms",
    "pipes.sweep_ms",
    "pipes.sweep_without_ms",
    "exit.pidfd_p50_ms",
    "exit.pidfd_p99_ms",
    "exit.sweep_p50_ms",
    "exit.sweep_p99_ms",
    "exit.snapshot_p50_ms",
    "exit.snapshot_p99_ms",
    "apply.writer_1k_ms",
    "apply.handle_1k_ms",
    "rss.peak_10k_live_mb",
    "rss.peak_10k_live_planned_mb",
    "rss.peak_10k_dead_mb",
    "rss.peak_empty_mb",
    "exec_start.bare_ms",
    "exec_start.script_down_ms",
    "exec_start.script_down_added_ms",
    "exec_start.script_down_ratio",
    "exec_start.script_up_ms",
    "exec_start.script_up_added_ms",
    "exec_start.script_up_ratio",
    "exec_start.console_down_ms",
    "exec_start.console_down_added_ms",
    "exec_start.console_down_ratio",
    "exec_start.console_up_ms",
    "exec_start.console_up_added_ms",
    "exec_start.console_up_ratio",
    "exec_start.rss_bare_kb",
    "exec_start.rss_wrapped_kb",
    "exec_start.rss_extra_per_server_kb",
    "exec_start.daemon_per_server_kb",
    "exec_start.resident_per_server_kb",
)


@pytest.mark.timeout(320)
def test_quick_run_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out)],
        cwd=_ROOT,
        capture_output=True,
        text=True,
        # A bound on a hang, not a speed check: a quick run takes about a minute on an
        # idle machine and twice that on a loaded one.
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["meta"]["quick"] is True
    assert document["errors"] == {}
    figures = {f["name"]: f for f in document["figures"]}
    assert sorted(figures) == sorted(EXPECTED)
    for name, figure in figures.items():
        value = figure["value"]
        assert isinstance(value, int | float), name
        assert not isinstance(value, bool), name
        assert math.isfinite(value), name
        # Quick runs use small sizes, so no figure claims to meet or miss its goal.
        assert figure["met"] is None, name
    # The table is printed too, one line per figure.
    for figure in figures.values():
        assert figure["label"] in completed.stdout


def test_a_figure_survives_the_trip_through_json() -> None:
    figure = Figure(
        name="x.y",
        label="a figure",
        value=1.5,
        unit="ms",
        goal=2.0,
        op="<=",
        judged=False,
        detail={"samples": [1, 2]},
    )
    again = Figure.from_dict(json.loads(json.dumps(figure.as_dict())))
    assert again == figure
    assert again.met is None


def test_a_benchmark_that_fails_in_its_process_is_reported_not_raised(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no_such_benchmark exited with status 1"):
        _run_child("no_such_benchmark", quick=True, workdir=tmp_path)
