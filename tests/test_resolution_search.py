"""The lattice resolution bound searches blocks of boxes; it must give what reading every box gives.

Truth: the definition in :mod:`costlib.thresholds.point._resolution`, evaluated box by box in
a Python loop on small lattices (every lower corner ``a``, upper corner ``min(a + 1, off)``).
The search is forced through several levels of blocks by shrinking its first level, and the statuses
:func:`costlib.thresholds.optimize` reports are compared with the ones the loop implies.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point import _resolution
from costlib.thresholds.point._objectives import Constraints, Objective
from costlib.thresholds.point._optimize import optimize
from costlib.thresholds.point._resolution import lattice_resolution


def _loop(grid, value, rule, objective, constraints, share, max_jump, step_limit):
    """``(finer, coarse_bound, a)`` from every box, one at a time (a coarse box counts only
    when it could beat the point: ``f > value``)."""
    tp, fp = grid.counts(rule)
    vol = grid.volume(rule)
    unr = grid.unrated_counts(rule)
    finer, best, best_a = -np.inf, value, None
    for a in itertools.product(*(range(n) for n in tp.shape)):
        b = tuple(min(i + 1, n - 1) for i, n in zip(a, tp.shape, strict=True))
        f = float(objective.values(np.array([tp[a]]), np.array([fp[b]]),
                                   grid.total_positives)[0])
        ok = vol[a] > vol[b] and bool(constraints.satisfied(
            np.array([tp[a]]), np.array([fp[b]]), np.array([vol[b]]))[0])
        if objective.name == "precision_at_volume":
            ok = ok and vol[b] <= objective.volume
        if grid.has_unrated and share < 1:
            ok = ok and unr[b] <= share * vol[a]
        if not ok:
            continue
        finer = max(finer, f)
        coarse = vol[a] > max_jump * vol[b] or (step_limit is not None
                                                 and tp[a] - tp[b] > step_limit)
        if coarse and f > best:  # strict: the first box in C order wins ties
            best, best_a = f, a
    return max(finer, value), (-np.inf if best_a is None else best), best_a


def _grid(seed, k, n_rows, n_edges, unrated_share):
    rng = np.random.default_rng(seed)
    y = rng.random(n_rows) < 0.3
    scores = rng.normal(size=(n_rows, k)) + 1.2 * y[:, None]
    labels = np.where(rng.random(n_rows) < unrated_share, np.nan, y.astype(float))
    weights = rng.integers(1, 4, n_rows).astype(float)
    edges = [np.sort(rng.normal(0.5, 1.2, n_edges)) for _ in range(k)]
    return ThresholdGrid.from_scores(scores, labels, edges, weights)


objectives = st.sampled_from([
    Objective.make("linear", slope=0.0), Objective.make("linear", slope=0.4),
    Objective.make("linear", slope=3.0), Objective.make("linear", slope=-0.5),
    Objective.make("f1"), Objective.make("fbeta", beta=2.0),
    Objective.make("precision_at_volume", volume=40.0),
])
constraint_sets = st.sampled_from([
    Constraints(), Constraints(min_precision=0.5), Constraints(max_volume=60.0),
    Constraints(max_false_positives=10.0), Constraints(min_recall=0.4, total_positives=50.0),
])


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.sampled_from([1, 2, 3]),
       n_rows=st.sampled_from([0, 5, 60, 400]), n_edges=st.integers(1, 14),
       rule=st.sampled_from(["any", "all"]), objective=objectives,
       constraints=constraint_sets, unrated_share=st.sampled_from([0.0, 0.3]),
       share=st.sampled_from([0.0, 0.2, 1.0]), max_jump=st.sampled_from([1.5, 4.0]),
       step_share=st.sampled_from([None, 0.1]), value_at=st.floats(-0.2, 1.2),
       top_blocks=st.sampled_from([1, 4, 64]), split=st.sampled_from([2, 3, 4]))
def test_block_search_finds_what_every_box_gives(seed, k, n_rows, n_edges, rule, objective,
                                                 constraints, unrated_share, share, max_jump,
                                                 step_share, value_at, top_blocks, split):
    if k == 3:
        n_edges = min(n_edges, 6)
    grid = _grid(seed, k, n_rows, n_edges, unrated_share)
    tp, fp = grid.counts(rule)
    values = objective.values(tp.ravel(), fp.ravel(), grid.total_positives)
    # A value among the objective's own values (ties with boxes), or between them.
    value = float(np.quantile(values, min(max(value_at, 0.0), 1.0), method="lower"))
    if value_at < 0 or value_at > 1:
        value += value_at
    point_tp = float(np.median(tp))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_resolution, "_TOP_BLOCKS", top_blocks)
        mp.setattr(_resolution, "_SPLIT", split)
        res = lattice_resolution(grid, value, rule=rule, objective=objective,
                                 constraints=constraints, max_unrated_share=share,
                                 max_jump=max_jump, point_tp=point_tp, max_step_share=step_share)
    step_limit = None
    if step_share is not None:
        pos = grid.pos
        unit = float(pos[pos > 0].min()) if pos.any() else 1.0
        step_limit = max(step_share * point_tp, 2.0 * unit)
    finer, best, a = _loop(grid, value, rule, objective, constraints, share, max_jump,
                           step_limit)
    assert res.finer_bound == finer
    assert res.coarse_bound == best
    if a is None:
        assert res.box_low is None and not res.limited
        return
    assert res.box_low == grid.threshold_values(list(a))
    assert res.limited == (best - value > 0.02 * abs(value) and best > value)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_rows=st.sampled_from([30, 300, 3000]),
       n_edges=st.integers(2, 40), rule=st.sampled_from(["any", "all"]),
       method=st.sampled_from(["hull", "graph"]),
       options=st.sampled_from([{"target_marginal_precision": 0.5},
                                {"target_marginal_precision": 0.9},
                                {"objective": "f1"},
                                {"target_marginal_precision": 0.3, "min_precision": 0.6}]))
def test_optimize_reports_the_statuses_every_box_implies(seed, n_rows, n_edges, rule, method,
                                                         options):
    grid = _grid(seed, 2, n_rows, n_edges, 0.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_resolution, "_TOP_BLOCKS", 4)
        point = optimize(grid, rule=rule, method=method, **options)
    bare = optimize(grid, rule=rule, method=method, check_resolution=False, **options)
    if "objective" in options:
        objective = Objective.make("f1")
    else:
        m = options["target_marginal_precision"]
        objective = Objective.make("linear", slope=m / (1 - m))
    constraints = Constraints(min_precision=options.get("min_precision"))
    finer, best, a = _loop(grid, bare.objective, rule, objective, constraints, 0.0, 4.0, None)
    limited = a is not None and best - bare.objective > 0.02 * abs(bare.objective) \
        and best > bare.objective
    expected = "resolution_limited" if limited and bare.status == "ok" else bare.status
    assert point.status == expected
    assert point.resolution["finer_bound"] == finer
    assert point.resolution["coarse_bound"] == (best if a is not None else None)
