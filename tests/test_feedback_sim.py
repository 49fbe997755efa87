"""The library-level closed loop (tests/benchmarks/feedback_sim.py) publishes exactly what the
pipeline loop (tests/benchmarks/bench_feedback_loop.py: run_decide / run_recalibrate) does, day by
day, and the rated rows and audit draws agree.

The configuration is small (20,000 rows a day, 5 days; the pipeline costs ~0.6 s a day) but
exercises what the simulator has to reproduce: the product's default edges (``grid.edges:
auto``, placed by a first pass on the first day and carried from the published run's sketch
after it; each day's lattice is compared with the run's manifest), uniform edges, the audit
sizing from the previous day's counts and audited labels (``audit.design: auto``), the evidence
rule (default ``evidence_z``, ``unseen_rows``, ``one_row_margin`` and ``census_review``; a 2%
audit budget: at 1% the one-row margin keeps every group of the auto design at the start), the
thresholds in force added to the edges, kept and moved groups, and a drift.
``bench_feedback_sim.py --check-pipeline`` compares a full-size loop over 21 days.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
import bench_feedback_loop as loop
import feedback_sim as sim


def _argv(design: str, edges: str = "auto") -> list[str]:
    return [
        "--rows-per-day", "20000", "--days", "5", "--window", "3", "--edges", edges,
        *(["--bins", "24"] if edges == "uniform" else []),
        "--target", "0.2", "--prevalence", "0.01", "0.02", "0.03",
        "--budget-share", "0.02", "--audit-floor", "0.002", "--strata-edges", "0.05", "0.3",
        "--strata-weights", "0.5", "3", "10", "--drift-day", "3", "--audit-design", design,
        "--reference-factor", "0"]


def _recording(lattices: list) -> sim.Recalibrate:
    """The pipeline's optimiser call, recording each day's lattice (the grids' edges)."""
    def recalibrate(config, grids, in_force):
        lattices.append([list(e) for e in next(iter(grids.values())).edges])
        return sim.pipeline_recalibrate(config, grids, in_force)
    return recalibrate


def _manifests(output: Path) -> list[dict]:
    import json
    return [json.loads((run / "manifest.json").read_text())
            for run in sorted((output / "runs").iterdir())]


@pytest.mark.slow
@pytest.mark.parametrize(("design", "edges"), [("auto", "auto"), ("fixed", "auto"),
                                               ("auto", "uniform")])
def test_simulator_publishes_what_the_pipeline_loop_publishes(tmp_path, design, edges):
    args = loop.parse_args(_argv(design, edges))
    piped = loop.run_loop(args, tmp_path / "loop", name="check", start=(0.9, 0.9), audit=True,
                          drift=True)
    lattices: list = []
    simulated = sim.simulate_loop(args, start=(0.9, 0.9), audit=True, drift=True,
                                  recalibrate=_recording(lattices))
    # thresholds in force each day = what the previous day's recalibration published
    assert [d.thresholds for d in simulated] == [d.thresholds for d in piped]
    for a, b in zip(simulated, piped, strict=True):
        assert (a.rated, a.audited, a.unflagged) == (b.rated, b.audited, b.unflagged)
        assert a.expected_audited == pytest.approx(b.expected_audited, rel=1e-12)
        assert a.utility == b.utility
        assert a.oracle == pytest.approx(b.oracle, nan_ok=True)
    # the loop is not trivial: some group moved away from the start
    assert any(t != (0.9, 0.9) for d in simulated for t in d.thresholds.values())
    # every day's lattice is the one the pipeline recalibrated on; auto edges were placed
    # from a first pass on the first day and carried from the published run after it
    manifests = _manifests(tmp_path / "loop" / "recal")
    assert lattices == [m["grid_edges"]["edges"] for m in manifests]
    if edges == "auto":
        assert [m["grid_edges"]["source"]["from"] for m in manifests] == \
            ["this_run"] + ["previous_run"] * (args.days - 1)
        assert all(len(e) > 24 for e in lattices[0])  # the product's 128, not uniform(24)


@pytest.mark.slow
def test_simulator_follows_the_pipeline_with_the_default_audit_and_proposals(tmp_path):
    """The schema's audit defaults (strata relative to the point, the nearest step a census, rows
    of a proposed move audited in the proposal stratum) from a start with the image model off:
    the audit of each day's proposals (``proposed_thresholds`` of the recalibration applied)
    changes the draws, and the simulator must follow the pipelines there too."""
    import json

    args = loop.parse_args([*_argv("auto"), "--audit-defaults"])
    start = (0.9, float("inf"))
    piped = loop.run_loop(args, tmp_path / "loop", name="check", start=start, audit=True,
                          drift=True)
    simulated = sim.simulate_loop(args, start=start, audit=True, drift=True)
    assert [d.thresholds for d in simulated] == [d.thresholds for d in piped]
    for a, b in zip(simulated, piped, strict=True):
        assert (a.rated, a.audited, a.unflagged) == (b.rated, b.audited, b.unflagged)
        assert a.expected_audited == pytest.approx(b.expected_audited, rel=1e-12)
    proposed = [json.loads(p.read_text())["audit"]["proposal"]["unflagged"]
                for p in sorted((tmp_path / "loop" / "decide" / "runs").glob("*/manifest.json"))]
    assert len(proposed) == args.days and sum(proposed) > 0  # proposals were audited
    _reports_show_the_proposals(tmp_path / "loop" / "recal")


def _reports_show_the_proposals(output: Path) -> None:
    """The run page and the history page of the loop's recalibrations show each group's
    proposed thresholds (the method's point the evidence rule held back) under the thresholds
    published, exactly where the records carry them."""
    import html

    import pyarrow.parquet as pq

    from costlib_pipelines.commands.cli import main

    def notes(text: str) -> list[str]:
        return [html.unescape(n) for n in re.findall(
            r'<div class="note proposed"[^>]*>([^<]*)</div>', text)]

    def fmt(t: float) -> str:
        return "off" if t == float("inf") else f"{t:.4f}"

    runs = sorted(p.name for p in (output / "runs").iterdir())
    expected_history, shown = [], 0
    for run in runs:
        records = pq.read_table(output / "runs" / run / "operating_points.parquet").to_pylist()
        expected = {method: [f"proposed {fmt(t)}" for r in records if r["method"] == method
                             and r["proposed_thresholds"] is not None
                             for t in r["proposed_thresholds"]]
                    for method in {r["method"] for r in records}}
        assert main(["report", "--run", str(output / "runs" / run), "--all-groups"]) == 0
        page = (output / "runs" / run / "report.html").read_text()
        # the run page: one row per method and group
        assert sorted(notes(page)) == sorted(n for ns in expected.values() for n in ns)
        shown += len(expected["hull"])
        expected_history += expected["hull"]  # the history: the loop's decision method
    assert shown > 0  # some run published other thresholds than the method's point
    assert main(["report", "--output", str(output), "--history", "--all-groups"]) == 0
    history = (output / "history.html").read_text()
    assert sorted(notes(history)) == sorted(expected_history)
