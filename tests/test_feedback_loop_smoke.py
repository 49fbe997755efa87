"""Smoke test of tests/benchmarks/bench_feedback_loop.py: the closed loop runs on the real
pipelines for a few tiny days, and the rated-row accounting is consistent."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
import bench_feedback_loop as loop


def _args():
    return loop.parse_args(["--rows-per-day", "4000", "--days", "3", "--window", "2",
                            "--bins", "16", "--budget-share", "0.02", "--audit-floor", "0.005",
                            "--drift-day", "1"])


@pytest.mark.parametrize(("audit", "drift"), [(True, True), (False, False)],
                         ids=["audit-drift", "no-audit"])
def test_feedback_loop_runs_and_accounts_for_rated_rows(tmp_path, audit, drift):
    args = _args()
    days = loop.run_loop(args, tmp_path / "loop", name="smoke", start=(0.9, np.inf),
                         audit=audit, drift=drift)  # checks recalibrate's accounting itself
    assert [d.day for d in days] == [0, 1, 2]
    for d in days:
        assert d.rated <= args.rows_per_day and d.unflagged <= args.rows_per_day
        assert d.audited <= d.unflagged
        assert (d.audited > 0) == audit  # 4000 rows at >= 0.5% each: some are audited
        assert d.optimum > 0 and np.isfinite(d.utility)
        window = days[max(0, d.day - args.window + 1): d.day + 1]
        assert d.accounting["read"] == args.rows_per_day * len(window)
        assert d.accounting["used"] + d.accounting["unrated"] == d.accounting["read"]
        assert d.accounting["used"] == sum(w.rated for w in window)
    # the loop feeds back: the starting thresholds are applied on day 0 only
    assert days[0].thresholds["market_a"] == (0.9, np.inf)
