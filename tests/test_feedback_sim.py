"""The library-level closed loop (tests/benchmarks/feedback_sim.py) publishes exactly what the
pipeline loop (tests/benchmarks/bench_feedback_loop.py: run_decide / run_recalibrate) does, day by
day, and the rated rows and audit draws agree.

The configuration is small (20,000 rows a day, 5 days; the pipeline costs ~0.6 s a day) but
exercises what the simulator has to reproduce: the audit sizing from the previous day's
counts and audited labels (``audit.design: auto``), the evidence rule (default
``evidence_z`` and ``unseen_rows``), the thresholds in force added to the edges, kept and
moved groups, and a drift. At issue 21's sizes (60,000 rows a day, prevalence 0.2-0.5%, a
0.2% audit) nothing moves in the first 6 days; ``bench_feedback_sim.py --check-pipeline``
compares that configuration over 21 days.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
import bench_feedback_loop as loop
import feedback_sim as sim


def _argv(design: str) -> list[str]:
    return [
        "--rows-per-day", "20000", "--days", "5", "--window", "3", "--bins", "24",
        "--target", "0.2", "--prevalence", "0.01", "0.02", "0.03",
        "--budget-share", "0.01", "--audit-floor", "0.002", "--strata-edges", "0.05", "0.3",
        "--strata-weights", "0.5", "3", "10", "--drift-day", "3", "--audit-design", design,
        "--reference-factor", "0"]


def _args(design: str):
    return loop.parse_args(_argv(design))


@pytest.mark.slow
@pytest.mark.parametrize("design", ["auto", "fixed"])
def test_simulator_publishes_what_the_pipeline_loop_publishes(tmp_path, design):
    args = _args(design)
    piped = loop.run_loop(args, tmp_path / "loop", name="check", start=(0.9, 0.9), audit=True,
                          drift=True)
    simulated = sim.simulate_loop(args, start=(0.9, 0.9), audit=True, drift=True)
    # thresholds in force each day = what the previous day's recalibration published
    assert [d.thresholds for d in simulated] == [d.thresholds for d in piped]
    for a, b in zip(simulated, piped, strict=True):
        assert (a.rated, a.audited, a.unflagged) == (b.rated, b.audited, b.unflagged)
        assert a.expected_audited == pytest.approx(b.expected_audited, rel=1e-12)
        assert a.utility == b.utility
        assert a.oracle == pytest.approx(b.oracle, nan_ok=True)
    # the loop is not trivial: some group moved away from the start
    assert any(t != (0.9, 0.9) for d in simulated for t in d.thresholds.values())


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
