"""Relative audit strata (costlib.audit._strata): depths against a brute-force lattice walk."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from costlib.audit._sampling import audit_sample
from costlib.audit._strata import (
    check_shares,
    check_steps,
    cutoff_strata,
    flagged_rows,
    lattice_depths,
    relative_design,
    share_cutoffs,
)


def _brute_depth(s, t, edges, rule):
    """Min L1 lattice distance from the point in force to a tuple that flags the row, by
    enumerating every tuple of thresholds at or below ``t`` on the lattice (plus ``t``)."""
    k = len(s)
    options = []
    for j in range(k):
        below = sorted((e for e in edges[j] if e < t[j]), reverse=True)
        options.append([(0, t[j])] + [(i + 1, e) for i, e in enumerate(below)])
    best = np.inf
    for combo in itertools.product(*options):
        fires = [not np.isnan(s[j]) and s[j] >= combo[j][1] for j in range(k)]
        if (any(fires) if rule == "any" else all(fires)):
            best = min(best, sum(c[0] for c in combo))
    return best


@pytest.mark.parametrize("rule", ["any", "all"])
def test_depths_equal_brute_force(rule):
    rng = np.random.default_rng(3)
    edges = [np.sort(rng.choice(np.linspace(0, 1, 41), 9, replace=False)) for _ in range(2)]
    n = 400
    scores = rng.uniform(-0.05, 1.05, size=(n, 2))
    scores[rng.random((n, 2)) < 0.05] = np.nan
    t_choices = np.array([[edges[0][6], edges[1][5]], [0.73, np.inf], [np.inf, np.inf],
                          [0.2, 0.9]])
    thresholds = t_choices[rng.integers(0, len(t_choices), n)]
    depths = lattice_depths(scores, thresholds, edges, rule)
    for i in range(n):
        assert depths[i] == _brute_depth(scores[i], thresholds[i], edges, rule), i


def test_flagged_rows_have_depth_zero_and_no_point_is_unreachable():
    edges = [np.array([0.1, 0.5, 0.9])]
    scores = np.array([[0.95], [0.6], [0.3], [0.05], [np.nan], [0.6]])
    t = np.array([[0.9]] * 5 + [[np.nan]])
    np.testing.assert_array_equal(lattice_depths(scores, t, edges),
                                  [0, 1, 2, np.inf, np.inf, np.inf])


def test_relative_design_strata_follow_the_cutoffs():
    design = relative_design([0.5, 3.0, 10.0], floor=0.001, budget_share=0.01)
    depth = np.array([1, 2, 3, 8, 9, np.inf])
    stratum = cutoff_strata(depth, [2, 8])
    np.testing.assert_array_equal(stratum, [2, 2, 1, 1, 0, 0])
    np.testing.assert_array_equal(design.strata(stratum[:, None].astype(float)), stratum)
    assert check_steps([2, 8]) == [2, 8]
    for bad in ([3, 3], [0, 3], [2.5]):
        with pytest.raises(ValueError, match=r"strata\.steps"):
            check_steps(bad)
    for bad in ([0.5, 0.1], [0.0, 0.1], [0.5, 1.0]):
        with pytest.raises(ValueError, match=r"strata\.shares"):
            check_shares(bad)


def test_share_cutoffs_equal_the_definition():
    """k_i = the smallest depth whose cumulative count reaches shares[i] of all rows."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        counts = rng.integers(0, 20, size=rng.integers(2, 12)).astype(float)
        shares = np.sort(rng.choice(np.linspace(0.02, 0.98, 49), 3, replace=False))
        got = share_cutoffs(counts, shares)
        total = counts.sum()
        for q, k in zip(shares, got, strict=True):
            if total == 0:
                assert k == np.inf
                continue
            finite = counts[:-1]
            want = next((d + 1 for d in range(finite.size)
                         if finite[: d + 1].sum() >= q * total), max(finite.size, 1))
            assert k == want
    assert (share_cutoffs([], [0.1]) == np.inf).all()


def test_audited_count_over_salts_matches_the_design():
    """Monte Carlo over salts: mean audited count within 4 standard errors of sum N_h pi_h."""
    rng = np.random.default_rng(0)
    edges = [np.linspace(0, 1, 65)] * 2
    n = 20_000
    scores = rng.beta(1, 6, size=(n, 2))
    t = np.tile([0.6, 0.7], (n, 1))
    depth = lattice_depths(scores, t, edges)
    flagged = depth == 0
    design = relative_design([0.5, 3, 10, 40], floor=0.0005, budget_share=0.002)
    bands = cutoff_strata(depth, [2, 8, 24])[:, None].astype(float)
    pi = design.probabilities()[design.strata(bands)]
    expected = float(pi[~flagged].sum())
    var = float((pi * (1 - pi))[~flagged].sum())
    counts = [audit_sample(np.arange(n), bands, flagged, f"salt-{k}", design).audit.sum()
              for k in range(200)]
    assert abs(np.mean(counts) - expected) < 4 * np.sqrt(var / len(counts))
    assert abs(np.var(counts, ddof=1) / var - 1) < 0.35


def _random_rows(seed, edge_counts, n):
    """Random edges per classifier and ``n`` two-classifier rows around [0, 1] (5% of the
    scores null: the classifier did not score the row); the generator continues."""
    rng = np.random.default_rng(seed)
    edges = [np.sort(rng.uniform(0, 1, m)) for m in edge_counts]
    scores = rng.uniform(-0.1, 1.1, size=(n, 2))
    scores[rng.random((n, 2)) < 0.05] = np.nan
    return rng, edges, scores


@pytest.mark.parametrize("rule", ["any", "all"])
def test_depths_from_cells_equal_depths_of_the_rows_on_the_same_lattice(rule):
    """Rows counted per lattice cell give exactly the rows' own depths below any point on the
    lattice (a threshold between two edges would split a cell: not exact there)."""
    from costlib.audit._strata import depth_counts_from_cells, lattice_cells

    _, edges, scores = _random_rows(7, (20, 15), 3000)
    for t in ([edges[0][12], edges[1][9]], [edges[0][3], np.inf], [edges[0][-1], edges[1][0]]):
        depth = lattice_depths(scores, np.tile(t, (3000, 1)), edges, rule)
        cells, counts = np.unique(lattice_cells(scores, edges), axis=0, return_counts=True)
        got = depth_counts_from_cells(cells, counts, edges, t, edges, rule)
        finite = depth[np.isfinite(depth) & (depth > 0)].astype(int)
        want = np.bincount(finite, minlength=got.size)[1:]
        np.testing.assert_array_equal(got[:-1], want[: got.size - 1])
        assert got.size - 1 >= (finite.max() if finite.size else 1)
        assert got[-1] == np.count_nonzero(~np.isfinite(depth))


@pytest.mark.parametrize("rule", ["any", "all"])
def test_proposed_rows_and_cells_agree_with_a_loop_over_rows(rule):
    """The rows a proposed point flags (by a plain loop), the same judged per lattice cell (exact
    for a point on the lattice), and the promoted strata and counts."""
    from costlib.audit._strata import (
        flagged_rows,
        promote_counts,
        promote_proposed,
    )

    rng, edges, scores = _random_rows(3, (12, 9), 2000)
    for t in ([edges[0][4], edges[1][6]], [edges[0][8], np.inf], [np.inf, np.inf]):
        want = np.array([
            (any if rule == "any" else all)(
                (not np.isnan(s)) and s >= tj for s, tj in zip(row, t, strict=True))
            for row in scores])
        got = flagged_rows(scores, t, rule)
        np.testing.assert_array_equal(got, want)
        strata = rng.integers(0, 4, size=2000)
        raised = promote_proposed(strata, want, 2)
        np.testing.assert_array_equal(raised, [max(h, 2) if w else h
                                               for h, w in zip(strata, want, strict=True)])
        before = np.bincount(strata[want], minlength=4).astype(float)
        np.testing.assert_array_equal(promote_counts(before, 2),
                                      np.bincount(raised[want], minlength=4))
    with pytest.raises(ValueError, match="rule"):
        flagged_rows(scores, [0.5, 0.5], "most")


@pytest.mark.parametrize("rule", ["any", "all"])
def test_proposal_recount_equals_the_rows_strata_before_and_after_promotion(rule):
    """A previous run's rows per cell, re-cut below today's point with the proposed rows
    promoted: the same as computing every row's depth and stratum, promoting the rows the
    proposal flags, and counting (the point in force and the proposal on the lattice)."""
    from costlib.audit._strata import (
        cutoff_strata,
        flagged_rows,
        lattice_cells,
        promote_proposed,
        proposal_recount,
    )

    _, edges, scores = _random_rows(11, (14, 10), 4000)
    cells, counts = np.unique(lattice_cells(scores, edges), axis=0, return_counts=True)
    cutoffs = [1, 3, 8]
    for t, proposed in (([edges[0][10], edges[1][8]], [edges[0][6], edges[1][8]]),
                        ([edges[0][9], np.inf], [edges[0][9], edges[1][5]]),
                        ([edges[0][5], edges[1][5]], [edges[0][7], edges[1][7]])):
        depth = lattice_depths(scores, np.tile(t, (4000, 1)), edges, rule)
        unflagged = depth > 0
        strata = cutoff_strata(depth, cutoffs)
        raised = promote_proposed(strata, flagged_rows(scores, proposed, rule), 2)
        want = (np.bincount(raised[unflagged], minlength=4)
                - np.bincount(strata[unflagged], minlength=4))
        moving = flagged_rows(scores, proposed, rule) & unflagged
        change, rows = proposal_recount(cells, counts, edges, t, edges, proposed, cutoffs, 4, 2,
                                        rule)
        np.testing.assert_array_equal(change, want)
        assert rows == moving.sum()
        assert change.sum() == 0
        assert moving.any() == (proposed[0] < t[0] or proposed[1] < t[1])  # a case or none
    change, rows = proposal_recount(cells, counts, edges, t, edges, [np.inf, np.inf], cutoffs,
                                    4, 2, rule)
    assert rows == 0.0 and not change.any()


def _even_rows(cells, counts, edges, per_unit=400):
    """Rows spread evenly in score over each lattice cell (scores: midpoints of steps of
    ``1 / per_unit``; cell 0: not scored, NaN), one weight per row: the population that
    :func:`costlib.audit._strata.split_cells` assumes, row by row."""
    scores, weights = [], []
    for cell, count in zip(cells, counts, strict=True):
        axes = []
        for j, c in enumerate(cell):
            if c == 0:
                axes.append(np.array([np.nan]))
                continue
            a, b = edges[j][c - 1], edges[j][c]
            steps = round((b - a) * per_unit)
            axes.append(a + (np.arange(steps) + 0.5) / per_unit)
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(cell))
        scores.append(grid)
        weights.append(np.full(len(grid), count / len(grid)))
    return np.concatenate(scores), np.concatenate(weights)


@pytest.mark.parametrize("rule", ["any", "all"])
def test_depths_from_cells_on_a_moved_lattice_equal_rows_spread_evenly_in_each_cell(rule):
    """Cells counted on one lattice, depths taken on another (auto edges move between runs):
    the same as the depths of rows spread evenly over each cell, counted row by row."""
    from costlib.audit._strata import depth_counts_from_cells, proposal_recount, split_cells

    rng = np.random.default_rng(5)
    fine = np.arange(41) / 40  # both lattices on steps of 1/40: the rows' steps divide them
    then = [np.unique(np.r_[rng.choice(fine[1:-1], 12, replace=False), 0.0, 1.0])
            for _ in range(2)]
    now = [np.sort(rng.choice(fine[1:-1], m, replace=False)) for m in (20, 9)]
    cells = np.array([(a, b) for a in range(len(then[0])) for b in range(len(then[1]))
                      if (a > 0 or b > 0) and a < len(then[0]) - 1 and b < len(then[1]) - 1])
    counts = rng.integers(1, 50, len(cells)).astype(float)
    rows, weights = _even_rows(cells, counts, then)
    _corners, shares = split_cells(cells, counts, then, now)
    assert shares.sum() == pytest.approx(counts.sum())
    for t in ([now[0][15], now[1][6]], [now[0][10], np.inf], [now[0][-1], now[1][2]]):
        depth = lattice_depths(rows, np.tile(t, (len(rows), 1)), now, rule)
        got = depth_counts_from_cells(cells, counts, then, t, now, rule)
        finite = np.isfinite(depth) & (depth > 0)
        want = np.bincount(depth[finite].astype(int), weights[finite])[1:]
        size = max(got.size - 1, want.size)
        np.testing.assert_allclose(np.pad(got[:-1], (0, size - got.size + 1)),
                                   np.pad(want, (0, size - want.size)), atol=1e-9)
        assert got[-1] == pytest.approx(weights[~np.isfinite(depth)].sum())
        proposed = [now[0][4], t[1]]
        cutoffs = [1, 3, 8]
        change, moved = proposal_recount(cells, counts, then, t, now, proposed, cutoffs, 4, 2,
                                         rule)
        strata = cutoff_strata(depth, cutoffs)
        promote = flagged_rows(rows, proposed, rule) & (depth > 0)
        raised = np.where(promote, np.maximum(strata, 2), strata)
        unflagged = depth > 0
        np.testing.assert_allclose(change, np.bincount(raised[unflagged], weights[unflagged], 4)
                                   - np.bincount(strata[unflagged], weights[unflagged], 4),
                                   atol=1e-9)
        assert moved == pytest.approx(weights[promote].sum())


def _tail_edges(scores, n_edges):
    """Tail quantiles of ``scores`` spaced evenly in log(1 - q) (as auto edges are placed)."""
    q = 1 - np.geomspace(0.5, 1e-4, n_edges)
    return [np.unique(np.quantile(scores[:, j], q)) for j in range(scores.shape[1])]


def test_a_design_sized_on_the_previous_days_cells_spends_its_budget_on_the_next_day():
    """The audited share of a day's unflagged rows, expected under the auto design sized on
    the previous day's rows per cell (another day of the same distribution, counted on that
    day's own lattice: tail quantiles of a sample of 3,000 rows, so the edges move as auto
    edges do), against the budget: within 2% (cells taken whole at their lower corner: 3-4%
    over)."""
    from costlib.audit import neyman_design
    from costlib.audit._strata import depth_counts_from_cells, lattice_cells, stratum_counts

    rng = np.random.default_rng(17)
    days = [rng.beta(0.5, 30.0, size=(300_000, 2)) for _ in range(4)]
    shares, weights, budget = [0.001, 0.01, 0.05, 0.25], [0.5, 2.0, 10.0, 60.0, 1000.0], 0.01
    for yesterday, today in ((days[0], days[1]), (days[2], days[3])):
        then, now = _tail_edges(yesterday[::100], 128), _tail_edges(today[1::100], 128)
        t = [now[0][-12], now[1][-9]]
        cells, counts = np.unique(lattice_cells(yesterday, then), axis=0, return_counts=True)
        depth_counts = depth_counts_from_cells(cells, counts, then, t, now)
        cutoffs = share_cutoffs(depth_counts, shares)
        design, _ = neyman_design(stratum_counts(depth_counts, cutoffs, 5), weights,
                                  tuple(h + 0.5 for h in range(4)), budget, 0.001)
        depth = lattice_depths(today, np.tile(t, (len(today), 1)), now)
        pi = design.probabilities()[cutoff_strata(depth, cutoffs)]
        assert pi[depth > 0].mean() / budget == pytest.approx(1.0, abs=0.02)
