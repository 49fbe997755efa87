"""What holds each group where the shared capacity leaves it, and why capacity is unused: each
cause built into a small grid, and the explanation checked against it."""

from __future__ import annotations

import numpy as np

from costlib.thresholds import ThresholdGrid
from costlib.thresholds.capacity import allocate_capacity
from costlib.thresholds.point import Target
from costlib_pipelines.recalibrate.capacity_reasons import allocation_reasons, group_limits

EDGES = [np.round(np.arange(0.1, 1.0, 0.1), 2)]
TARGET = Target.from_marginal_precision(0.3)

#: scores and labels (None: unrated) per group, each built to be held by one cause
GROUPS = {
    # every row a rated positive: its best point flags all it has
    "volume": ([0.15, 0.35, 0.55, 0.75, 0.95], [True] * 5),
    # two positives on top, three negatives below: flagging the negatives lowers TP - r FP
    "target": ([0.85, 0.95, 0.15, 0.25, 0.35], [True, True, False, False, False]),
    # four positives on top, unrated rows below: the rated region ends at 0.6
    "coverage": ([0.65, 0.75, 0.85, 0.95, 0.55, 0.15], [True] * 4 + [None, None]),
}


def grids():
    return {g: ThresholdGrid.from_scores(np.array(s), np.array(y, dtype=object), EDGES)
            for g, (s, y) in GROUPS.items()}


def explain(capacity, objective="linear"):
    built = grids()
    target = TARGET if objective == "linear" else None
    result = allocate_capacity(built, capacity, objective=objective, target=target,
                               exact=False)
    summary = {"capacity": capacity, "total_volume": result.total_volume,
               "total_utility": result.total_utility, "multiplier": result.multiplier,
               "feasible": result.feasible, "upper_bound": result.upper_bound,
               "exact": result.exact,
               "groups": {g: {"status": a.status, "volume": a.volume, "utility": a.utility}
                          for g, a in result.groups.items()}}
    limits = {g: group_limits(grid, rule="any", max_unrated_share=0.0, scale=1.0)
              for g, grid in built.items()}
    out = allocation_reasons(summary, result.frontiers, limits, objective=objective,
                             target_precision=TARGET.marginal_precision, max_unrated_share=0.0)
    return summary, out


def test_a_capacity_that_does_not_bind_names_each_groups_own_limit():
    summary, out = explain(100.0)
    groups = summary["groups"]
    # the volumes by hand: all 5 rows; the 2 positives; the 4 positives above the unrated rows
    assert [groups[g]["volume"] for g in GROUPS] == [5.0, 2.0, 4.0]
    assert {g: e["held_by"] for g, e in groups.items()} == {g: g for g in GROUPS}
    assert out["held_by"] == {"target": ["target"], "coverage": ["coverage"],
                              "volume": ["volume"]}
    assert out["unused"] == 89.0
    assert out["unused_why"].startswith("11 of 100 rows allocated, 89 unused: the capacity does "
                                        "not bind (lambda = 0)")
    assert groups["volume"]["why"] == "its best point flags 5 rows, every row its lattice can flag"
    assert groups["target"]["why"] == (
        "its best point flags 2 rows; flagging more of its covered cells (up to 5 "
        "rows) does not raise its utility: the rows it adds have a marginal precision at or "
        "below the target 0.3")
    assert groups["coverage"]["why"] == (
        "its rated region ends here: its best point flags 4 rows; every cell flagging more (up "
        "to 6 rows) flags more unrated rows than coverage.max_unrated_share = 0 allows")
    assert out["bound_why"] is None  # the bound is the utility


def test_a_binding_capacity_names_the_step_that_does_not_fit_and_the_bound_gap():
    """Capacity 3: 'target' takes its 2 positives (slope 1, first by group order); the next
    steps of 'volume' (5 rows) and 'coverage' (4 rows) do not fit in the 1 row left. The LP
    bound takes 1/5 of the step of 'volume' (utility 2 + 1 = 3)."""
    summary, out = explain(3.0)
    groups = summary["groups"]
    assert {g: e["held_by"] for g, e in groups.items()} == {
        "volume": "capacity", "target": "target", "coverage": "capacity"}
    assert (summary["total_volume"], summary["total_utility"], summary["upper_bound"]) == (
        2.0, 2.0, 3.0)
    assert out["unused"] == 1.0
    assert groups["volume"]["why"] == ("its next candidate flags 5 more rows for +5 utility (1 "
                                       "per row), more than the 1 rows left")
    assert groups["coverage"]["why"].startswith("its next candidate flags 4 more rows")
    assert out["unused_why"] == (
        "2 of 3 rows allocated, 1 unused: 2 group(s) held by the shared capacity (lambda = 1 "
        "utility per row); the smallest next step of any of them needs 4 rows, more than is "
        "left; the other groups are at their best point, held by the target: 1 group(s) (target)")
    assert out["bound_why"] == (
        "the LP bound 3 exceeds the utility 2 by 1: the bound may take part of a group's next "
        "step, an allocation gives every group one whole cell; here part of the next step of "
        "group 'volume' (5 rows for +5 utility, 1 per row = lambda), which does not fit")


def test_true_positives_objective_says_more_rows_add_no_true_positive():
    summary, _ = explain(100.0, objective="true_positives")
    assert summary["groups"]["target"]["why"].endswith(
        "flagging more of its covered cells (up to 5 rows) adds no true positive")
