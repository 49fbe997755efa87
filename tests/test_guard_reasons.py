"""Every reason the publish guard gives names the real cause, with the numbers of the data that
caused it: one row per situation, constructed, and the message checked against its data."""

from __future__ import annotations

import dataclasses
import math

import pytest

from costlib_pipelines.io.plausibility import Plausibility, plausibility_violations
from costlib_pipelines.recalibrate.capacity import capacity_violations
from costlib_pipelines.recalibrate.publish import (
    Baseline,
    GuardSettings,
    baseline_violations,
    guard_violations,
)


def rec(group, thresholds, *, status="ok", pos=100.0, neg=100.0, fallback=None,
        method="graph", classifiers=("a", "b"), **extra):
    return {"group": group, "method": method, "window_start": None, "status": status,
            "thresholds": thresholds, "classifiers": list(classifiers),
            "rated_positives": pos, "rated_negatives": neg, "fallback_group": fallback,
            **extra}


ALL = rec("__all__", [0.5, 0.5], pos=300.0, neg=420.0)
THIN_ALL = rec("__all__", [0.5, 0.5], pos=12.0, neg=9.0)

#: (situation, previous records, new records, settings, the exact violations)
CASES = [
    ("own grid too thin",
     None, [ALL, rec("thin", [0.4, 0.6], pos=10.0, neg=20.0)], GuardSettings(min_rated=50),
     ["group 'thin': thresholds rest on the 30 rated rows (10 positives, 20 negatives) of its "
      "own grid (status ok), fewer than min_rated=50"]),
    ("fallback: the parent's rows count, and they suffice",
     None, [ALL, rec("small", [0.5, 0.5], status="fallback", pos=2.0, neg=3.0,
                     fallback="__all__")], GuardSettings(min_rated=50), []),
    ("fallback to a thin parent",
     None, [THIN_ALL, rec("small", [0.5, 0.5], status="fallback", pos=2.0, neg=3.0,
                          fallback="__all__")], GuardSettings(min_rated=50),
     ["group '__all__': thresholds rest on the 21 rated rows (12 positives, 9 negatives) of "
      "its own grid (status ok), fewer than min_rated=50",
      "group 'small': thresholds are those of __all__ (status fallback: its own grid holds 5 "
      "rated rows (2 positives, 3 negatives)), which rest on 21 rated rows (12 positives, 9 "
      "negatives), fewer than min_rated=50"]),
    ("no thresholds: insufficient data",
     None, [ALL, rec("none", None, status="insufficient_data", pos=1.0, neg=2.0)],
     GuardSettings(min_rated=50),
     ["group 'none': no thresholds of method graph, so decide gives it null decisions (status "
      "insufficient_data); its own grid holds 3 rated rows (1 positives, 2 negatives); a group "
      "without thresholds is held under min_rated=50"]),
    ("capacity: a thin group the allocation left out (its other methods fell back); the "
     "group's 22 rated rows are named, not 0",
     None, [rec("jewelry", None, status="fallback", pos=4.0, neg=18.0, fallback="__all__",
                method="capacity", capacity_status="insufficient_data",
                reason="left out of the capacity allocation: its grid holds 4 rated positives "
                       "and 18 rated negatives, fewer than min_rated (positives 10, negatives "
                       "10); the allocation gives such a group no thresholds (no fallback)")],
     GuardSettings(min_rated=50, method="capacity"),
     ["group 'jewelry': no thresholds of method capacity, so decide gives it null decisions "
      "(capacity_status insufficient_data: left out of the capacity allocation: its grid holds "
      "4 rated positives and 18 rated negatives, fewer than min_rated (positives 10, negatives "
      "10); the allocation gives such a group no thresholds (no fallback)); its own grid holds "
      "22 rated rows (4 positives, 18 negatives); a group without thresholds is held under "
      "min_rated=50"]),
    ("a point that misses min_recall only: an override applies it",
     None, [rec("de", [0.2, math.inf], point_status="infeasible", min_recall=0.9,
                min_precision=0.5, precision=0.61, estimated_recall=0.71234,
                reason="min_recall 0.9 cannot be met")], GuardSettings(),
     ["group 'de': the graph point is infeasible: min_recall 0.9 cannot be met; if published "
      "anyway, decide applies this nearest point, thresholds (0.2, inf), estimated recall "
      "0.7123: the highest recall the rated region allows (not the min_recall asked for)"]),
    ("a point that misses min_precision: an override flags nothing",
     None, [rec("de", [0.2, math.inf], point_status="infeasible", min_recall=0.9,
                min_precision=0.5, precision=0.41, reason="min_precision 0.5 cannot be met")],
     GuardSettings(),
     ["group 'de': the graph point is infeasible: min_precision 0.5 cannot be met; if "
      "published anyway, decide gives the group null decisions (nothing flagged)"]),
    ("a threshold moved",
     [rec("g", [0.5, 0.7])], [rec("g", [0.65, 0.7])], GuardSettings(max_threshold_change=0.1),
     ["group 'g': thresholds moved by 0.15 (> max_threshold_change=0.1; a: 0.5 -> 0.65, b: "
      "0.7 -> 0.7)"]),
    ("a classifier switched on",
     [rec("g", [0.5, math.inf])], [rec("g", [0.5, 0.9])],
     GuardSettings(max_threshold_change=0.1),
     ["group 'g': thresholds moved by inf (> max_threshold_change=0.1; a: 0.5 -> 0.5, b: "
      "inf -> 0.9)"]),
    ("the classifiers changed",
     [rec("g", [0.5, 0.5])], [rec("g", [0.5, 0.5], classifiers=("a", "c"))],
     GuardSettings(max_threshold_change=0.1),
     ["group 'g': the classifiers changed from ['a', 'b'] to ['a', 'c']; thresholds cannot be "
      "compared"]),
    ("a group went missing",
     [rec("g", [0.5, 0.5]), rec("gone", [0.3, 0.3])], [rec("g", [0.5, 0.5])],
     GuardSettings(max_threshold_change=0.1),
     ["group 'gone': had thresholds and is missing from the run"]),
    ("thin but unchanged: no reason to hold",
     [rec("kept", [0.5, 0.5])], [rec("kept", [0.5, 0.5], status="kept", pos=3.0, neg=4.0)],
     GuardSettings(min_rated=50), []),
]


@pytest.mark.parametrize(("situation", "previous", "new", "settings", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_each_guard_reason_names_the_data_that_caused_it(situation, previous, new, settings,
                                                         expected):
    assert guard_violations(previous, new, settings) == expected


def test_no_reason_claims_zero_rated_rows_for_a_group_that_has_some():
    """The capacity repro: every violation about a group quotes that group's own rated rows
    from its record (22), never 0 when the group has rated rows."""
    for _, previous, new, settings, _ in CASES:
        for violation in guard_violations(previous, new, settings):
            assert "rest on 0 rated rows" not in violation


@pytest.mark.parametrize(("baseline", "latest", "expected"), [
    (Baseline(None, None, "LATEST names run r1, which is incomplete"), None,
     ["the guard cannot compare with the published run: LATEST names run r1, which is "
      "incomplete"]),
    (Baseline([], "r1"), "r2",
     ["LATEST moved from r1 to r2 while this run ran (another run published meanwhile); this "
      "run was checked against the old one"]),
    (Baseline([], "r1"), "r1", []),
])
def test_baseline_reasons(baseline, latest, expected):
    assert baseline_violations(baseline, latest) == expected


def test_capacity_reasons_quote_the_allocated_volumes():
    records = [{"method": "capacity", "window_start": None, "capacity": 300.0,
                "allocated_volume": v} for v in (200.0, 150.5, None)]
    assert capacity_violations(records, {"feasible": True}) == [
        "capacity: the allocation flags 350.5 rows next period, more than capacity.total = 300"]
    assert capacity_violations(records[2:], {"feasible": False}) == [
        "capacity: no allocation fits: the groups' least volumes (capacity.min_volume, or their "
        "smallest covered candidates) exceed capacity.total = 300"]


def test_plausibility_reason_quotes_the_counts():
    settings = Plausibility((0.0, 1.0), "count", (0, 1), "count", 0.01, False)
    accounting = {"read": 1000, "plausibility.score_outside_range": 25,
                  "plausibility.score_above_range.a": 25}
    (violation,) = plausibility_violations(accounting, settings)
    assert violation.startswith("plausibility: 25 of 1,000 rows with a score outside the "
                                "plausible range [0, 1]")
    assert "(2.5% > plausibility.max_implausible_share 0.01)" in violation
    assert plausibility_violations(accounting, dataclasses.replace(
        settings, max_implausible_share=0.05)) == []


@pytest.mark.parametrize(("target", "text"), [
    ({"marginal_precision": 0.3}, "marginal_precision 0.3 (slope r = 0.4286, marginal "
                                  "precision 0.3)"),
    ({"fp_per_tp": 2.33}, "fp_per_tp 2.33 (slope r = 0.4292, marginal precision 0.3003)"),
    ({"slope": 0.25}, "slope 0.25 (slope r = 0.25, marginal precision 0.2)"),
    ({"benefit_matrix": [[0, -1], [0, 4]]}, "benefit_matrix [[0, -1], [0, 4]] (slope r = 0.25, "
                                            "marginal precision 0.2)"),
])
def test_the_report_names_every_target_form(target, text):
    """The report's header named only marginal precision ("marginal precision ?" otherwise)."""
    from costlib_pipelines.report.sections import target_description

    assert target_description(target) == text
