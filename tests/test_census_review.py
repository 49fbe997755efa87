"""The census review of the thresholds in force (issue 21: undo a point that turned out bad).

Truths: direct sums over the rows rated with certainty (``π = 1``) flagged by exactly one of two
tuples; an exhaustive search of every cell at or above the point in force for the best lower
bound; hand-built populations where the audit's few heavy rows and the census disagree.
"""

import itertools

import numpy as np
import pytest
from coverage_data import brute_flags
from test_lower_bound_move import EDGES, audit_draw, population

from costlib.thresholds.binning._rows import quantize_weights
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop import InForcePolicy
from costlib.thresholds.loop._census_review import census_gains, census_review
from costlib.thresholds.loop._move_evidence import lower_bound_move
from costlib.thresholds.loop._recalibration import optimize_group
from costlib.thresholds.point._operating_point import point_at
from costlib.thresholds.point._optimize import optimize
from costlib.thresholds.point._target import resolve_target


def _grid(seed=2, weighted=True):
    scores, truth = population(800, 1)
    labels, pi = audit_draw(scores, truth, seed)
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(truth)) if weighted else None
    grid = ThresholdGrid.from_scores(scores, labels, EDGES, w, audit_probabilities=pi)
    return grid, scores, labels, pi, (np.ones(len(truth)) if w is None else w)


@pytest.mark.parametrize("rule", ["any", "all"])
@pytest.mark.parametrize("weighted", [False, True])
def test_census_gains_equal_direct_sums_over_certain_rows(rule, weighted):
    grid, scores, labels, pi, w = _grid(weighted=weighted)
    w = quantize_weights(w, 16)  # the grid's weight resolution, 2**-16
    rated = np.array([v is not None for v in labels])
    certain = rated & (pi == 1)
    y = np.array([bool(v) for v in np.where(rated, labels, False)])
    slope = 0.25
    coefficient = np.where(y, 1.0, -slope)
    for f in [(0, 0), (2, 1), (3, 2), (5, 4)]:
        gain, se, rows = census_gains(grid, f, rule=rule, slope=slope)
        f_flags = brute_flags(scores, grid.threshold_values(f), rule)
        for c in itertools.product(*(range(n) for n in grid.shape)):
            c_flags = brute_flags(scores, grid.threshold_values(c), rule)
            diff = (c_flags.astype(float) - f_flags) * certain
            one = certain & (c_flags != f_flags)
            assert gain[c] == pytest.approx(np.sum(diff * coefficient * w), abs=1e-6)
            squares = quantize_weights(w[one] ** 2, 16)
            observed = np.sum(squares * coefficient[one] ** 2)
            break_even = slope * np.sum(squares)
            assert se[c] == pytest.approx(np.sqrt(max(observed, break_even)), abs=1e-6)
            assert rows[c] == pytest.approx(np.sum(w[one]), abs=1e-6)


def test_census_is_the_certain_rows_and_merges_exactly():
    grid, scores, labels, pi, w = _grid()
    halves = [slice(0, 300), slice(300, None)]
    parts = [ThresholdGrid.from_scores(scores[h], labels[h], EDGES, w[h],
                                       audit_probabilities=pi[h]) for h in halves]
    assert (parts[0] + parts[1]).census is not None
    np.testing.assert_array_equal((parts[0] + parts[1]).census, grid.census)
    assert (ThresholdGrid.empty(EDGES) + grid).census is not None
    plain = ThresholdGrid.from_scores(scores, np.where(pi == 1, labels, None), EDGES, w)
    assert plain.census is None
    assert (plain + grid).census is None  # rows of unknown inclusion: no census


def _bad_region_population(census_negatives, heavy_positives=3, seed=0):
    """One classifier. The thresholds in force flag s > 0.5; the region (0.5, 0.7] holds
    ``census_negatives`` negatives rated with certainty (the days since the move) and, from
    the days before it, ``heavy_positives`` audited positives of weight 1/π = 100 (what made the
    move look good) among 100 · heavy_positives unflagged rows there. Above 0.7: 40 positives
    and 40 negatives, flagged and rated; (0.2, 0.5]: 400 unflagged rows, 4 audited negatives."""
    rng = np.random.default_rng(seed)
    s_top = rng.uniform(0.71, 0.99, 80)
    y_top = np.arange(80) < 40
    s_census = rng.uniform(0.51, 0.69, census_negatives)
    n_audit = 100 * heavy_positives
    s_audit = rng.uniform(0.51, 0.69, n_audit)
    y_audit = np.zeros(n_audit, dtype=object)
    y_audit[:] = None
    y_audit[:heavy_positives] = True
    s_low = rng.uniform(0.21, 0.49, 400)  # 4 audited negatives (400 estimated)
    scores = np.concatenate([s_top, s_census, s_audit, s_low])[:, None]
    labels = np.concatenate([y_top.astype(object), np.zeros(census_negatives, dtype=object),
                             y_audit, np.full(400, None, dtype=object)])
    labels[-4:] = False
    labels[80:80 + census_negatives] = False
    pi = np.concatenate([np.ones(80 + census_negatives), np.full(n_audit, 0.01),
                         np.full(400, 0.01)])
    edges = [np.array([0.2, 0.5, 0.7, 0.9])]
    return ThresholdGrid.from_scores(scores, labels, edges, audit_probabilities=pi)


def test_undo_takes_back_a_region_whose_census_lost():
    grid = _bad_region_population(census_negatives=60)
    target = resolve_target(target_marginal_precision=0.2)
    in_force = (0.5,)
    chosen = optimize(grid, target=target, method="graph")
    # the HT estimate of the region (3 x 100 positives) makes the point in force look best
    assert chosen.thresholds == in_force
    review = census_review(grid, point_at(grid, in_force, target=target).index, chosen.index,
                           z=1.645, rule="any", slope=target.slope)
    assert review.action == "undo" and grid.threshold_values(review.index) == (0.7,)
    assert review.gain == pytest.approx(60 * 0.25)
    assert review.se == pytest.approx(np.sqrt(0.25 * 60))  # break-even variance r·n
    assert review.rows == 60
    moved = lower_bound_move(grid, chosen, in_force, z=1.645, target=target, rule="any",
                             method="graph")
    assert moved.move and moved.point.thresholds == (0.7,)
    assert moved.reason().startswith("moved back: ")
    assert moved.summary()["census"]["action"] == "undo"
    off = lower_bound_move(grid, chosen, in_force, z=1.645, target=target, rule="any",
                           method="graph", census=False)
    assert not off.move and off.point.thresholds == in_force


@pytest.mark.parametrize("negatives", [3, 10])
def test_no_undo_on_a_handful_of_census_rows(negatives):
    """n negatives and no positive are evidence of a loss only once r n > z sqrt(r n), i.e.
    n > z² / r = 10.8 at r = 1/4, z = 1.645 (the break-even variance, not the observed r² n)."""
    grid = _bad_region_population(census_negatives=negatives)
    target = resolve_target(target_marginal_precision=0.2)
    f = point_at(grid, (0.5,), target=target).index
    review = census_review(grid, f, f, z=1.645, rule="any", slope=target.slope)
    assert review.index is None and review.action == "" and review.reason() == ""
    review = census_review(grid, f, f, z=0.0, rule="any", slope=target.slope)
    assert review.action == "undo"  # any census loss is enough at z = 0


def test_veto_refuses_a_move_into_a_region_the_census_refutes():
    """In force: s > 0.7. The region (0.5, 0.7] was flagged on earlier days (a census of 60
    negatives) and its few heavy audit positives say moving back into it pays: refused."""
    grid = _bad_region_population(census_negatives=60)
    target = resolve_target(target_marginal_precision=0.2)
    f = point_at(grid, (0.7,), target=target).index
    into = point_at(grid, (0.5,), target=target).index
    review = census_review(grid, f, into, z=1.645, rule="any", slope=target.slope)
    assert review.action == "veto" and review.index == tuple(f)
    assert review.gain == pytest.approx(-15.0) and "refutes" in review.reason()
    # the same move with a census that does not refute it is left alone
    quiet = _bad_region_population(census_negatives=3)
    f = point_at(quiet, (0.7,), target=target).index
    into = point_at(quiet, (0.5,), target=target).index
    assert census_review(quiet, f, into, z=1.645, rule="any", slope=target.slope).index is None


@pytest.mark.parametrize("rule", ["any", "all"])
def test_undo_is_the_best_bound_among_cells_at_or_above_the_point_in_force(rule):
    grid, *_ = _grid(seed=5)
    target = resolve_target(target_marginal_precision=0.5)
    for f in [(0, 0), (1, 1), (2, 0), (0, 2)]:
        review = census_review(grid, f, f, z=0.5, rule=rule, slope=target.slope)
        gain, se, _ = census_gains(grid, f, rule=rule, slope=target.slope)
        best = max((gain[c] - 0.5 * se[c], c) for c in itertools.product(
            *(range(n) for n in grid.shape)) if all(a >= b for a, b in zip(c, f, strict=True))
            and c != f and grid.covered(rule)[c])
        if best[0] > 0:
            assert review.action == "undo"
            assert gain[review.index] - 0.5 * se[review.index] == pytest.approx(best[0])
            assert all(a >= b for a, b in zip(review.index, f, strict=True))
        else:
            assert review.index is None


def test_undo_respects_the_constraints_of_the_run():
    grid = _bad_region_population(census_negatives=60)
    target = resolve_target(target_marginal_precision=0.2)
    f = point_at(grid, (0.5,), target=target).index
    # min_recall 0.99 of P̂ holds at the point in force only: no undo
    review = census_review(grid, f, f, z=1.645, rule="any", slope=target.slope,
                           min_recall=0.99)
    assert review.index is None


def test_no_census_channels_no_review_and_bad_z_refused():
    scores, truth = population(300, 1)
    grid = ThresholdGrid.from_scores(scores, truth, EDGES)
    assert census_review(grid, (0, 0), (0, 0), z=1.0, rule="any", slope=1.0).index is None
    with pytest.raises(ValueError, match="z must be a finite number >= 0"):
        census_review(grid, (0, 0), (0, 0), z=-1.0, rule="any", slope=1.0)


def test_optimize_group_records_the_undo_and_can_be_switched_off():
    grid = _bad_region_population(census_negatives=60)
    target = resolve_target(target_marginal_precision=0.2)
    on = optimize_group("g", grid, methods=["graph"], target=target, rule="any", min_positives=0,
                        min_negatives=0, in_force=(0.5,))
    point = on.points["graph"]
    assert point.thresholds == (0.7,) and on.status == "ok"
    assert point.reason.startswith("moved back: ")
    assert point.details["move_evidence"]["census"]["action"] == "undo"
    off = optimize_group("g", grid, methods=["graph"], target=target, rule="any", min_positives=0,
                         min_negatives=0, in_force=(0.5,),
                         policy=InForcePolicy(census_review=False))
    assert off.points["graph"].thresholds == (0.5,)
