"""Moves on evidence by default (issue 21): Horvitz–Thompson design variance in the grid, the
standard error of the gain between two threshold tuples, and the lower-confidence-bound move.

Truths: direct sums over the rows flagged by exactly one of two tuples; the empirical variance
of the gain over many independent audit draws of one fixed population.
"""

import itertools

import numpy as np
import pytest
from coverage_data import brute_flags

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop import InForcePolicy
from costlib.thresholds.loop._move_evidence import (
    gain_standard_errors,
    lower_bound_move,
    one_row_weight,
    segment_cells,
    unseen_variance,
)
from costlib.thresholds.loop._recalibration import PROPOSED, optimize_group
from costlib.thresholds.point._operating_point import point_at
from costlib.thresholds.point._optimize import optimize
from costlib.thresholds.point._target import resolve_target

EDGES = [np.linspace(0.1, 0.9, 5), np.linspace(0.1, 0.9, 4)]


def population(n, seed):
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < 0.15
    scores = np.clip(rng.random((n, 2)) * 0.8 + 0.3 * truth[:, None], 0, 1)
    return scores, truth


def audit_draw(scores, truth, seed, floor=0.05, flag_at=(0.7, 0.7)):
    """Rows flagged at ``flag_at`` are rated with certainty; the rest with probability ``π``
    (two strata), as :mod:`costlib.audit._sampling` draws them."""
    rng = np.random.default_rng(seed)
    flagged = (scores >= np.asarray(flag_at)).any(axis=1)
    pi = np.where(flagged, 1.0, np.where(scores.max(axis=1) > 0.4, 4 * floor, floor))
    rated = flagged | (rng.random(len(truth)) < pi)
    labels = np.where(rated, truth, None).astype(object)
    return labels, pi


@pytest.mark.parametrize("rule", ["any", "all"])
def test_gain_standard_errors_equal_the_direct_sum_over_rows_flagged_by_one_tuple(rule):
    scores, truth = population(600, 1)
    labels, pi = audit_draw(scores, truth, 2)
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(truth))
    grid = ThresholdGrid.from_scores(scores, labels, EDGES, w, audit_probabilities=pi)
    rated = np.array([v is not None for v in labels])
    g = w / pi
    slope = 0.7
    for f in [(0, 0), (2, 1), (5, 4), (3, 0)]:
        se = gain_standard_errors(grid, f, rule=rule, slope=slope)
        f_flags = brute_flags(scores, grid.threshold_values(f), rule)
        for c in itertools.product(*(range(n) for n in grid.shape)):
            c_flags = brute_flags(scores, grid.threshold_values(c), rule)
            one = (c_flags ^ f_flags) & rated
            coefficient = np.where(truth, 1.0, slope)
            direct = np.sum((1 - pi[one]) * (g[one] * coefficient[one]) ** 2)
            # each row's term is quantised to 2**-16 (exact sums), hence the tolerance
            assert se[c] ** 2 == pytest.approx(direct, rel=1e-9, abs=len(pi) * 2.0**-16), (f, c)


def test_the_variance_estimate_matches_the_spread_of_the_gain_over_audit_draws():
    scores, truth = population(3000, 5)
    slope = 0.5
    f, c = (3, 3), (1, 1)
    gains, variances = [], []
    for draw in range(400):
        labels, pi = audit_draw(scores, truth, 1000 + draw)
        grid = ThresholdGrid.from_scores(scores, labels, EDGES, audit_probabilities=pi)
        tp, fp = grid.counts("any")
        gains.append((tp[c] - slope * fp[c]) - (tp[f] - slope * fp[f]))
        variances.append(gain_standard_errors(grid, f, rule="any", slope=slope)[c] ** 2)
    # unbiased: the mean estimate is the true variance of the gain (within Monte Carlo error)
    assert np.mean(variances) == pytest.approx(np.var(gains, ddof=1), rel=0.15)


def test_a_grid_without_audit_rows_has_no_design_variance():
    scores, truth = population(500, 2)
    grid = ThresholdGrid.from_scores(scores, truth, EDGES)
    assert grid.variance is None
    assert not gain_standard_errors(grid, (1, 1), rule="any", slope=1.0).any()
    audited = ThresholdGrid.from_scores(scores, truth, EDGES,
                                        audit_probabilities=np.ones(len(truth)))
    assert not audited.variance.any()  # every row rated with certainty: a census
    both = audited + audited
    assert both.variance is not None and both == audited + audited


def _grids(seed, floor):
    scores, truth = population(4000, seed)
    labels, pi = audit_draw(scores, truth, seed + 7, floor=floor)
    return ThresholdGrid.from_scores(scores, labels, EDGES, audit_probabilities=pi)


def _grid_and_replicates(seed, floor, n_replicates):
    """``_grids(seed, floor)`` and Poisson-bootstrap replicates of the same audited rows."""
    from costlib.thresholds.loop._bootstrap import BootstrapGrids

    scores, truth = population(4000, seed)
    labels, pi = audit_draw(scores, truth, seed + 7, floor=floor)
    replicates = BootstrapGrids.from_scores(scores, labels, EDGES, np.arange(len(scores)),
                                            n_replicates=n_replicates, audit_probabilities=pi)
    return _grids(seed, floor), replicates


def test_lower_bound_move_interpolates_between_keeping_and_the_optimum():
    grid = _grids(11, floor=0.02)
    target = resolve_target(target_marginal_precision=0.15)
    kwargs = {"target": target, "rule": "any", "method": "hull"}
    chosen = optimize(grid, **kwargs)
    in_force = (0.9, 0.9)
    assert chosen.thresholds != in_force
    free = lower_bound_move(grid, chosen, in_force, z=0.0, **kwargs)
    assert free.point is chosen and free.move  # z = 0: the optimum (largest gain)
    # z huge: only moves without design variance remain, i.e. within the region rated with
    # certainty (flagged at (0.7, 0.7)): the best such cell of the curve, by direct search.
    careful = lower_bound_move(grid, chosen, in_force, z=1e6, **kwargs)
    se = gain_standard_errors(grid, careful.point.index, rule="any", slope=target.slope)
    tp, fp = grid.counts("any")
    base = grid.counts("any")[0][4, 3] - target.slope * grid.counts("any")[1][4, 3]
    certain = [tuple(c) for c in chosen.path
               if gain_standard_errors(grid, (4, 3), rule="any", slope=target.slope)[tuple(c)]
               == 0]
    best = max(tp[c] - target.slope * fp[c] - base for c in certain)
    assert careful.se == 0 and careful.gain == pytest.approx(best) and best > 0
    assert se[tuple(int(i) for i in chosen.index)] > 0  # the optimum needs audit evidence
    assert "moved part way" in careful.reason()
    stuck = lower_bound_move(grid, chosen, (0.7, 0.6333333333333333), z=1e6, **kwargs)
    assert not stuck.move and "kept the thresholds in force" in stuck.reason()
    for z in (0.5, 1.645, 3.0):  # the plain bound (the one-row margin: its own test)
        bounded = lower_bound_move(grid, chosen, in_force, z=z, one_row_margin=False, **kwargs)
        if bounded.move:  # the bound of the point taken is positive and the best of the curve
            assert bounded.gain - z * bounded.se > 0
            assert bounded.gain - z * bounded.se >= chosen.objective - stuck.point.objective - (
                z * bounded.optimum_se) - 1e-9


def test_optimize_group_moves_on_evidence_only_with_audit_weights():
    target = resolve_target(target_marginal_precision=0.15)
    thin = _grids(12, floor=0.002)  # a thin audit: each unflagged audit row weighs ~500
    args = {"methods": ["hull", "graph"], "target": target, "rule": "any",
            "min_positives": 1, "min_negatives": 1, "in_force": (0.9, 0.9)}
    default = optimize_group("g", thin, **args, policy=InForcePolicy(evidence_z=1.645))
    off = optimize_group("g", thin, **args, policy=InForcePolicy(evidence_z=None))
    for method in ("hull", "graph"):
        point, free = default.points[method], off.points[method]
        wired = lower_bound_move(thin, free, (0.9, 0.9), z=1.645, target=target, rule="any",
                                 method=method)
        assert point.thresholds == wired.point.thresholds
        assert point.objective <= free.objective  # never beyond the unguarded optimum
        # what the evidence rule did not take is recorded: the method's own point
        if point.thresholds != free.thresholds:
            assert point.details[PROPOSED] == list(free.thresholds)
        else:
            assert PROPOSED not in point.details
    grid = _grids(11, floor=0.02)  # here the optimum needs audit evidence (test above)
    # moves only where certain
    strict = optimize_group("g", grid, **args, policy=InForcePolicy(evidence_z=1e6))
    free = optimize_group("g", grid, **args, policy=InForcePolicy(evidence_z=None))
    for method in ("hull", "graph"):
        assert strict.points[method].thresholds != free.points[method].thresholds
        assert strict.points[method].details[PROPOSED] == list(free.points[method].thresholds)
        shown = ", ".join(f"{t:.4g}" for t in free.points[method].thresholds)
        assert strict.points[method].reason.endswith(f"the method's point: ({shown})")
    scores, truth = population(4000, 12)
    plain = ThresholdGrid.from_scores(scores, truth, EDGES)  # no audit: unchanged behaviour
    a = optimize_group("g", plain, **args, policy=InForcePolicy(evidence_z=1.645))
    b = optimize_group("g", plain, **args, policy=InForcePolicy(evidence_z=None))
    assert {m: p.thresholds for m, p in a.points.items()} == {
        m: p.thresholds for m, p in b.points.items()}
    assert not any(PROPOSED in p.details for p in a.points.values())


def test_lower_bound_move_refuses_a_bad_z():
    grid = _grids(13, floor=0.05)
    target = resolve_target(target_marginal_precision=0.3)
    chosen = optimize(grid, target=target, method="hull")
    with pytest.raises(ValueError, match="z must be"):
        lower_bound_move(grid, chosen, (0.9, 0.9), z=-1.0, target=target, rule="any",
                         method="hull")


@pytest.mark.parametrize("rule", ["any", "all"])
def test_unseen_variance_equals_the_direct_sums_over_each_one_sided_region(rule):
    """U(c, f) = max(1, r²) Σ_R W(R) κ / max(A(R), κ) over R = c∖f and f∖c, with W and A
    summed directly over the rows of each region with 0 < π < 1 (audited or not)."""
    scores, truth = population(600, 21)
    labels, pi = audit_draw(scores, truth, 22, floor=0.01)
    w = np.random.default_rng(23).uniform(0.5, 2.0, len(truth))
    grid = ThresholdGrid.from_scores(scores, labels, EDGES, w, audit_probabilities=pi)
    eligible = (pi > 0) & (pi < 1)
    worst = np.where(eligible, w * w * (1 - pi) / pi, 0.0)
    expected = np.where(eligible, pi, 0.0)
    for slope, kappa in [(0.25, 1.0), (2.0, 3.0)]:
        for f in [(0, 0), (2, 1), (5, 4)]:
            got = unseen_variance(grid, f, rule=rule, slope=slope, unseen_rows=kappa)
            f_flags = brute_flags(scores, grid.threshold_values(f), rule)
            for c in itertools.product(*(range(n) for n in grid.shape)):
                c_flags = brute_flags(scores, grid.threshold_values(c), rule)
                direct = 0.0
                for region in (c_flags & ~f_flags, f_flags & ~c_flags):
                    direct += worst[region].sum() * kappa / max(expected[region].sum(), kappa)
                direct *= max(1.0, slope * slope)
                assert got[c] == pytest.approx(direct, rel=1e-3, abs=1e-6), (f, c)
    full = gain_standard_errors(grid, (2, 1), rule=rule, slope=0.25, unseen_rows=1.0) ** 2
    plain = gain_standard_errors(grid, (2, 1), rule=rule, slope=0.25) ** 2
    assert np.allclose(full - plain, unseen_variance(grid, (2, 1), rule=rule, slope=0.25))


def test_an_unaudited_region_is_unknown_not_free():
    """The failure the term fixes: rows below the thresholds in force, none audited. The plain
    HT estimate says gain 0 ± 0 for flagging them; with the unseen term the region's variance
    is its worst case W (every row one label), so no lower bound can call the move certain."""
    rng = np.random.default_rng(31)
    n = 2000
    scores = np.column_stack([rng.random(n), np.zeros(n)])
    truth = rng.random(n) < 0.05
    flagged = scores[:, 0] >= 0.9
    pi = np.where(flagged, 1.0, 1e-4)  # expected audited rows below 0.9: 0.18 < 1
    labels = np.where(flagged, truth, None).astype(object)  # none audited
    grid = ThresholdGrid.from_scores(scores, labels, EDGES, audit_probabilities=pi)
    f = (grid.edges[0].size - 1, grid.shape[1] - 1)  # (0.9, off)
    c = (0, grid.shape[1] - 1)  # (0.1, off): flags every row >= 0.1
    assert gain_standard_errors(grid, f, rule="any", slope=0.25)[c] == 0  # looks certain
    region = (scores[:, 0] >= 0.1) & ~flagged
    worst = np.sum((1 - pi[region]) / pi[region])
    assert unseen_variance(grid, f, rule="any", slope=0.25)[c] == pytest.approx(worst, rel=1e-3)
    assert one_row_weight(grid, f, c, rule="any") == pytest.approx(np.sqrt(1 - 1e-4) / 1e-4,
                                                                   rel=1e-3)


def test_the_conservative_bound_covers_the_true_gain_over_thin_audit_draws():
    """Repeated thin audits of one population: the one-sided 95% lower bound of the gain
    (plain HT variance vs with the unseen term) against the true gain from all labels. The
    unseen term restores the coverage that the skewed plain estimate loses."""
    scores, truth = population(3000, 41)
    slope = 0.5
    f, c = (4, 3), (1, 1)
    f_flags = brute_flags(scores, np.array([0.7, 0.6333333333333333]), "any")
    base = ThresholdGrid.from_scores(scores, truth, EDGES)
    tp, fp = base.counts("any")
    true_gain = (tp[c] - slope * fp[c]) - (tp[f] - slope * fp[f])
    plain_cover, full_cover = [], []
    for draw in range(300):
        rng = np.random.default_rng(5000 + draw)
        pi = np.where(f_flags, 1.0, 0.004)
        rated = f_flags | (rng.random(len(truth)) < pi)
        labels = np.where(rated, truth, None).astype(object)
        grid = ThresholdGrid.from_scores(scores, labels, EDGES, audit_probabilities=pi)
        tp, fp = grid.counts("any")
        gain = (tp[c] - slope * fp[c]) - (tp[f] - slope * fp[f])
        plain = gain_standard_errors(grid, f, rule="any", slope=slope)[c]
        full = gain_standard_errors(grid, f, rule="any", slope=slope, unseen_rows=1.0)[c]
        plain_cover.append(gain - 1.645 * plain <= true_gain)
        full_cover.append(gain - 1.645 * full <= true_gain)
    assert np.mean(full_cover) >= 0.95
    assert np.mean(full_cover) > np.mean(plain_cover)


def test_segment_cells_walk_every_step_of_the_longest_coordinate():
    cells = segment_cells((2, 9), (6, 1))
    assert cells.shape == (9, 2) and tuple(cells[0]) == (2, 9) and tuple(cells[-1]) == (6, 1)
    assert (np.abs(np.diff(cells[:, 1])) == 1).all()  # the longest coordinate: every step
    assert (np.diff(cells[:, 0]) >= 0).all() and (np.abs(np.diff(cells, axis=0)) <= 1).all()
    assert segment_cells((3, 3), (3, 3)).tolist() == [[3, 3]]
    with pytest.raises(ValueError, match="same"):
        segment_cells((1, 2), (1, 2, 3))


def _brute_force_bound_choice(grid, chosen, in_force, z, target, with_segment):
    """The candidate cells (the curve, plus the segment from the thresholds in force to the
    method's point when asked), each one's bound, and the best bound, by direct loops."""
    kept = point_at(grid, in_force, target=target, rule="any", method="hull")
    se = gain_standard_errors(grid, kept.index, rule="any", slope=target.slope, unseen_rows=1.0)
    tp, fp = grid.counts("any")
    base = tp[kept.index] - target.slope * fp[kept.index]
    candidates = [tuple(int(i) for i in c) for c in chosen.path]
    if with_segment:
        start = [int(i) for i in kept.index]
        end = [int(i) for i in chosen.index]
        m = max(abs(b - a) for a, b in zip(start, end, strict=True)) + 1
        for step in range(m):  # round half to even, as numpy's rint
            cell = tuple(round(a + step / max(m - 1, 1) * (b - a))
                         for a, b in zip(start, end, strict=True))
            if cell not in candidates:
                candidates.append(cell)
    bounds = {c: tp[c] - target.slope * fp[c] - base - z * se[c] for c in candidates}
    return candidates, max(bounds.values())


def _concentrated_rows(seed):
    """Rows: scores concentrated near 0 (negatives beta(0.5, 30), 1% positives beta(1.5, 2.5)),
    classifier 1 flagging at 0.5, the rest audited at 5% above 0.3 and 0.2% below: a hull
    frontier with no cell between "classifier 2 off" and the optimum."""
    rng = np.random.default_rng(seed)
    n = 20_000
    truth = rng.random(n) < 0.01
    scores = np.where(truth[:, None], rng.beta(1.5, 2.5, (n, 2)), rng.beta(0.5, 30, (n, 2)))
    pi = np.where(scores[:, 0] >= 0.5, 1.0, np.where(scores.max(axis=1) >= 0.3, 0.05, 0.002))
    labels = np.where(rng.random(n) < pi, truth, None).astype(object)
    return scores, labels, pi


def _concentrated_grid(seed):
    """The grid of :func:`_concentrated_rows`."""
    scores, labels, pi = _concentrated_rows(seed)
    edges = [np.linspace(0.05, 0.95, 19)] * 2
    return ThresholdGrid.from_scores(scores, labels, edges, audit_probabilities=pi)


def test_a_classifier_off_in_force_can_be_switched_on_part_way():
    """With classifier 2 off in force the candidates are the hull's frontier plus the segment
    towards the method's point: the bound taken is the best over exactly those cells (direct
    loops); here the frontier holds no cell between the two, and the move taken is a segment
    cell (classifier 2 switched on high) — the frontier alone keeps it off. With both
    classifiers on in force the candidates are the frontier's alone."""
    target = resolve_target(target_marginal_precision=0.2)
    kwargs = {"target": target, "rule": "any", "method": "hull"}
    z = 1.645
    for seed in range(3):
        grid = _concentrated_grid(seed)
        chosen = optimize(grid, **kwargs)
        path = {tuple(int(i) for i in c) for c in chosen.path}
        for in_force, with_segment in (((0.5, np.inf), True), ((0.5, 0.5), False)):
            bounded = lower_bound_move(grid, chosen, in_force, z=z, one_row_margin=False,
                                       **kwargs)
            candidates, best = _brute_force_bound_choice(grid, chosen, in_force, z, target,
                                                         with_segment)
            assert bounded.move == (best > 0)
            if bounded.move:
                assert bounded.gain - z * bounded.se == pytest.approx(best)
                assert tuple(int(i) for i in bounded.point.index) in candidates
        off = lower_bound_move(grid, chosen, (0.5, np.inf), z=z, one_row_margin=False, **kwargs)
        assert off.move and tuple(int(i) for i in off.point.index) not in path
        assert np.isfinite(off.point.thresholds[1]) and off.point.thresholds[1] > \
            chosen.thresholds[1]  # switched on, above the method's threshold: part way


def test_a_point_in_force_that_is_the_methods_point_is_published_as_it_is():
    """Nothing to hold back when the method's own point is the point in force: under either
    evidence rule (``evidence_z``; ``min_gain_z`` with bootstrap replicates) the group
    publishes that point with status ok and no proposed thresholds (a group at its optimum is
    not a kept group, nor a move pending evidence)."""
    target = resolve_target(target_marginal_precision=0.15)
    grid, replicates = _grid_and_replicates(11, 0.02, 20)
    for method in ("hull", "graph"):
        best = optimize(grid, target=target, rule="any", method=method)
        args = {"methods": [method], "target": target, "rule": "any", "min_positives": 1,
                "min_negatives": 1, "in_force": best.thresholds}
        for rule in ({"policy": InForcePolicy(evidence_z=1e6)},
                     {"policy": InForcePolicy(min_gain_z=1e6), "bootstrap": replicates}):
            result = optimize_group("g", grid, **args, **rule)
            point = result.points[method]
            assert result.status == "ok", rule
            assert point.thresholds == best.thresholds
            assert PROPOSED not in point.details
            assert "method's point" not in (point.reason or "")
        # a point in force one step off the optimum is still kept with a huge z
        off = grid.threshold_values(tuple(min(int(i) + 1, n - 1)
                                          for i, n in zip(best.index, grid.shape, strict=True)))
        if tuple(off) != tuple(best.thresholds):
            held = optimize_group("g", grid, **{**args, "in_force": off},
                                  policy=InForcePolicy(min_gain_z=1e6), bootstrap=replicates)
            assert held.status == "kept" and held.points[method].details[PROPOSED] == list(
                best.thresholds)


@pytest.mark.parametrize("constraint", ["max_volume", "min_recall", "min_precision"])
def test_a_point_in_force_that_violates_a_hard_constraint_is_never_kept(constraint):
    """Keeping the thresholds in force is only an option when they meet the run's hard
    constraints (as the method's point had to): with z so large that the rule would keep
    anything, a point in force violating max_volume / min_recall / min_precision on the grid
    is replaced by the method's point (feasible, checked by direct counting), under both
    evidence rules; a point in force that meets them is still kept."""
    target = resolve_target(target_marginal_precision=0.15)
    grid, replicates = _grid_and_replicates(11, 0.02, 20)
    tp, fp = grid.counts("any")
    volume = grid.volume("any")
    free = optimize(grid, target=target, rule="any", method="hull")
    at = tuple(int(i) for i in free.index)
    # a cap the unconstrained optimum meets; points in force on either side of it
    value = {"max_volume": float(volume[at]), "min_recall": float(tp[at] / grid.total_positives),
             "min_precision": float(tp[at] / (tp[at] + fp[at]))}[constraint]
    options = {constraint: value}
    if constraint == "min_recall":  # the floor on the estimate, TP >= r P-hat, as below
        options["recall_bound"] = "point"

    def feasible(index):
        i = tuple(int(v) for v in index)
        return {"max_volume": volume[i] <= value, "min_recall": tp[i] >= value *
                grid.total_positives, "min_precision": tp[i] + fp[i] > 0  # undefined: violated
                and tp[i] >= value * (tp[i] + fp[i])}[constraint]

    violating = [grid.threshold_values(c) for c in np.ndindex(grid.shape) if not feasible(c)
                 and tuple(c) != at]
    meeting = [grid.threshold_values(c) for c in np.ndindex(grid.shape) if feasible(c)
               and tuple(c) != at]
    assert violating and meeting
    chosen = optimize(grid, target=target, rule="any", method="hull", **options)
    assert feasible(chosen.index) and chosen.status != "infeasible"
    rng = np.random.default_rng(0)
    for in_force in [violating[i] for i in rng.choice(len(violating), 5, replace=False)]:
        common = {"methods": ["hull"], "target": target, "rule": "any", "min_positives": 1,
                  "min_negatives": 1, "in_force": in_force, **options}
        for rule in ({"policy": InForcePolicy(evidence_z=1e6)},
                     {"policy": InForcePolicy(min_gain_z=1e6), "bootstrap": replicates}):
            result = optimize_group("g", grid, **common, **rule)
            point = result.points["hull"]
            assert result.status == "ok" and point.thresholds == chosen.thresholds, rule
            assert f"violate constraints.{constraint}" in point.reason
            assert PROPOSED not in point.details
    held_back = 0
    for in_force in [meeting[i] for i in rng.choice(len(meeting), 5, replace=False)]:
        result = optimize_group("g", grid, methods=["hull"], target=target, rule="any",
                                min_positives=1, min_negatives=1, in_force=in_force,
                                policy=InForcePolicy(evidence_z=1e6), **options)
        point = result.points["hull"]
        assert feasible(point.index) and "violate" not in point.reason
        held_back += point.thresholds != chosen.thresholds
    assert held_back > 0  # the evidence rule still keeps, or moves part way from, them


def test_a_kept_points_intervals_are_those_of_its_own_thresholds():
    """A kept (or part-way) point's TP, FP, precision, P̂ and recall intervals are percentiles
    of the same thresholds on every replicate (by direct point_at), so they describe the
    published point; its threshold intervals stay the method's re-optimisation."""
    from costlib.thresholds.loop._bootstrap import _order_statistic_interval, confidence_intervals
    from costlib.thresholds.point._operating_point import point_at

    target = resolve_target(target_marginal_precision=0.15)
    grid, replicates = _grid_and_replicates(11, 0.02, 30)
    in_force = (0.9, 0.9)
    result = optimize_group("g", grid, methods=["hull"], target=target, rule="any",
                            min_positives=1, min_negatives=1, in_force=in_force,
                            policy=InForcePolicy(min_gain_z=1e6), bootstrap=replicates)
    assert result.status == "kept" and result.points["hull"].thresholds == in_force
    got = result.intervals["hull"]
    at = [point_at(replicates.replicate(r), in_force, target=target, rule="any",
                   method="hull") for r in range(30)]
    for field in ("tp", "fp", "precision", "estimated_recall", "estimated_total_positives"):
        want = _order_statistic_interval(np.array([getattr(p, field) for p in at],
                                                  dtype=np.float64), 0.9)
        assert getattr(got, field) == want, field
    point = result.points["hull"]
    assert got.estimated_recall[0] <= point.estimated_recall <= got.estimated_recall[1]
    method = confidence_intervals(replicates, level=0.9, target=target, rule="any",
                                  method="hull")
    np.testing.assert_array_equal(got.thresholds, method.thresholds)
    assert method.estimated_recall != got.estimated_recall  # the method's point is elsewhere


def test_a_point_in_force_under_a_rating_backlog_is_not_judged_by_rated_constraints():
    """Every row the thresholds in force flag still unrated (a backlog): TP = FP = 0 there says
    nothing about their precision, so min_precision does not force them out; they are kept
    (before kept_violations learnt this, the point flagging nothing was published)."""
    from costlib.thresholds.loop._move_evidence import kept_violations

    rng = np.random.default_rng(0)
    scores = rng.random((3000, 2))
    truth = rng.random(3000) < scores.max(axis=1) ** 3
    flagged = (scores >= 0.7).any(axis=1)
    labels = np.where(flagged, None, np.where(rng.random(3000) < 0.2, truth, None)).astype(object)
    pi = np.where(flagged, 1.0, 0.2)
    grid = ThresholdGrid.from_scores(scores, labels, [np.linspace(0, 1, 11)] * 2,
                                     audit_probabilities=pi)
    target = resolve_target(target_marginal_precision=0.3)
    index = [int(np.searchsorted(c, 0.7)) for c in grid.thresholds]
    for share in (0.0, 1.0):
        options = {"max_unrated_share": share, "min_precision": 0.3}
        assert kept_violations(grid, index, target=target, rule="any", **options) == ()
        result = optimize_group("g", grid, methods=["hull"], target=target, rule="any",
                                min_positives=1, min_negatives=1, in_force=(0.7, 0.7),
                                **options)
        assert result.status == "kept"
        assert result.points["hull"].thresholds == pytest.approx((0.7, 0.7))


def test_a_thin_group_keeps_its_thresholds_but_says_which_constraint_they_miss():
    """Too few rated rows to recalibrate: the group keeps its thresholds in force (it cannot
    be re-optimised), and the kept point's reason names the hard constraint they violate on
    its grid (min_recall with audit rows; estimated recall 0.39 < 0.9 here)."""
    from costlib.thresholds.loop._recalibration import apply_fallback

    target = resolve_target(target_marginal_precision=0.15)
    grid = _grids(11, floor=0.02)
    for options, named in (({"min_recall": 0.9}, True), ({"min_recall": 0.1}, False)):
        result = optimize_group("g", grid, methods=["hull"], target=target, rule="any",
                                min_positives=1e9, min_negatives=1, in_force=(0.9, 0.9),
                                **options)
        kept = apply_fallback({"g": result}, fallback="none")["g"]
        point = kept.points["hull"]
        assert kept.status == "kept" and point.thresholds == (0.9, 0.9)
        recall = point.estimated_recall
        assert (recall < 0.9) and (recall > 0.1)
        assert ("violate constraints.min_recall" in point.reason) is named


def test_the_one_row_margin_is_the_weight_of_one_audited_row_in_the_added_region():
    """The default bound also subtracts ``sqrt(W / A)`` of the region a candidate adds (rows
    with 0 < π < 1 flagged by it and not by the thresholds in force: ``W = Σ (1 - π)/π``,
    ``A = Σ π``, straight from the rows): the best bound over the candidates, by direct
    loops, is the one taken; a drop-only move (no added region) pays no margin."""
    target = resolve_target(target_marginal_precision=0.2)
    kwargs = {"target": target, "rule": "any", "method": "hull"}
    z = 1.645
    for seed in range(3):
        scores, _, pi = _concentrated_rows(seed)
        grid = _concentrated_grid(seed)
        chosen = optimize(grid, **kwargs)
        for in_force, with_segment in (((0.5, np.inf), True), ((0.5, 0.5), False)):
            kept = point_at(grid, in_force, **kwargs)
            f_flags = brute_flags(scores, grid.threshold_values(kept.index), "any")
            candidates, _ = _brute_force_bound_choice(grid, chosen, in_force, z, target,
                                                      with_segment)
            se = gain_standard_errors(grid, kept.index, rule="any", slope=target.slope,
                                      unseen_rows=1.0)
            tp, fp = grid.counts("any")
            base = tp[kept.index] - target.slope * fp[kept.index]
            bounds = {}
            for c in candidates:
                added = brute_flags(scores, grid.threshold_values(c), "any") & ~f_flags
                added &= (pi > 0) & (pi < 1)
                a = pi[added].sum()
                margin = np.sqrt(((1 - pi[added]) / pi[added]).sum() / a) if a > 0 else 0.0
                bounds[c] = tp[c] - target.slope * fp[c] - base - z * se[c] - margin
            best = max(bounds.values())
            bounded = lower_bound_move(grid, chosen, in_force, z=z, census=False, **kwargs)
            assert bounded.move == (best > 0), (seed, in_force)
            if bounded.move:
                taken = tuple(int(i) for i in bounded.point.index)
                assert bounds[taken] == pytest.approx(best, rel=1e-6)
            plain = lower_bound_move(grid, chosen, in_force, z=z, census=False,
                                     one_row_margin=False, **kwargs)
            if not plain.move:
                assert not bounded.move  # the margin only ever makes a move harder
