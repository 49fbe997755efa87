"""costlib.thresholds.allocate_capacity: one review capacity for many groups, against brute force
over every combination of per-group cells, and the LP relaxation solved by scipy."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from coverage_data import make_selective_rows
from scipy.optimize import linprog

from costlib.thresholds.capacity._allocation import allocate_capacity, lagrangian_volume
from costlib.thresholds.capacity._group_frontiers import group_frontiers
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._target import Target


def make_grids(n_groups: int, k: int, seed: int, *, unrated: bool) -> dict[str, ThresholdGrid]:
    """Small grids (at most 5 x 4 cells) of weighted rows, some unrated, one lattice."""
    out = {}
    for g in range(n_groups):
        scores, labels, weights, edges, truth, _ = make_selective_rows(
            60 + 40 * g, k, seed * 10 + g, weighted=True)
        edges = [e[1::2] for e in edges][:k]
        if not unrated:
            labels = truth
        out[f"g{g}"] = ThresholdGrid.from_scores(scores, labels, edges, weights)
    return out


def cell_values(grid, rule, objective, slope, share, scale, lo, hi):
    """(V, U, candidate) at every cell, straight from the grid."""
    tp, fp = grid.counts(rule)
    vol = grid.volume(rule).ravel() * scale
    util = (tp if objective == "true_positives" else tp - slope * fp).ravel() * scale
    cand = grid.covered(rule, share).ravel() & (vol >= lo) & (vol <= hi)
    return vol, util, cand


def brute_force(values, capacity):
    """Best sum of U over every combination of one candidate per group with sum V <= C."""
    total_v, total_u = np.zeros(1), np.zeros(1)
    for vol, util, cand in values:
        total_v = np.add.outer(total_v, vol[cand]).ravel()
        total_u = np.add.outer(total_u, util[cand]).ravel()
    ok = total_v <= capacity
    return float(total_u[ok].max()) if ok.any() else None


def lp_relaxation(values, capacity):
    """The LP: a distribution over candidates per group, expected volume <= C (scipy HiGHS)."""
    v = np.concatenate([vol[c] for vol, _, c in values])
    u = np.concatenate([util[c] for _, util, c in values])
    sizes = [int(c.sum()) for _, _, c in values]
    eq = np.zeros((len(sizes), v.size))
    for i, start in enumerate(np.cumsum([0, *sizes[:-1]])):
        eq[i, start:start + sizes[i]] = 1
    res = linprog(-u, A_ub=v[None, :], b_ub=[capacity], A_eq=eq, b_eq=np.ones(len(sizes)),
                  bounds=(0, None), method="highs")
    assert res.status == 0
    return -res.fun


CASES = [
    # (n_groups, k, rule, objective, unrated share, bounds, scales)
    (2, 1, "any", "linear", None, False, False),
    (3, 1, "all", "true_positives", 0.0, True, False),
    (4, 1, "any", "linear", 0.3, True, True),
    (2, 2, "all", "linear", 0.0, False, True),
    (3, 2, "any", "true_positives", 0.0, True, True),
    (3, 2, "all", "linear", 0.5, True, False),
    (4, 2, "any", "linear", 0.0, False, False),
    (4, 2, "all", "true_positives", 0.2, False, True),
]


@functools.cache
def instance(case, seed):
    n_groups, k, rule, objective, share, bounded, scaled = case
    grids = make_grids(n_groups, k, seed, unrated=share is not None)
    rng = np.random.default_rng(seed)
    names = list(grids)
    scale = {g: float(rng.choice([0.5, 1.0, 2.0])) for g in names} if scaled else None
    lo = hi = None
    if bounded:
        vmax = {g: grids[g].volume(rule).max() * (scale or {}).get(g, 1.0) for g in names}
        lo = {names[0]: float(np.floor(vmax[names[0]] * 0.2))}
        hi = {names[-1]: float(np.floor(vmax[names[-1]] * 0.6))}
    kwargs = dict(rule=rule, objective=objective, max_unrated_share=share or 0.0,
                  target=Target(slope=0.5) if objective == "linear" else None,
                  min_volume=lo, max_volume=hi, volume_scale=scale)
    values = [cell_values(grids[g], rule, objective, 0.5, share or 0.0,
                          (scale or {}).get(g, 1.0), (lo or {}).get(g, 0.0),
                          (hi or {}).get(g, np.inf)) for g in names]
    top = sum(float(v[c].max()) for v, _, c in values)
    return grids, kwargs, values, top


def check_allocation(result, grids, kwargs, capacity):
    """Every group's reported counts are its grid's counts at the reported cell."""
    total = 0.0
    for g, a in result.groups.items():
        grid = grids[g]
        scale = (kwargs["volume_scale"] or {}).get(g, 1.0)
        tp, fp = grid.counts(kwargs["rule"])
        assert a.volume == grid.volume(kwargs["rule"])[a.index] * scale
        assert a.true_positives == tp[a.index] * scale
        assert a.false_positives == fp[a.index] * scale
        assert a.thresholds == grid.threshold_values(a.index)
        assert grid.covered(kwargs["rule"], kwargs["max_unrated_share"])[a.index]
        assert (kwargs["min_volume"] or {}).get(g, 0.0) <= a.volume
        assert a.volume <= (kwargs["max_volume"] or {}).get(g, np.inf)
        total += a.volume
    assert total <= capacity
    assert result.total_volume == pytest.approx(total)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("seed", [0, 1])
def test_exact_equals_brute_force_and_bound_is_the_lp(case, seed):
    grids, kwargs, values, top = instance(case, seed)
    for fraction in (0.0, 0.1, 0.25, 0.5, 0.8):
        capacity = float(np.floor(top * fraction)) + 0.5 * (seed == 1)
        best = brute_force(values, capacity)
        if best is None:  # the lower bounds alone exceed the capacity
            result = allocate_capacity(grids, capacity, exact=True, **kwargs)
            assert not result.feasible and np.isnan(result.upper_bound)
            continue
        result = allocate_capacity(grids, capacity, exact=True, **kwargs)
        assert result.exact and result.feasible
        assert result.total_utility == pytest.approx(best, abs=1e-9)
        check_allocation(result, grids, kwargs, capacity)
        assert result.upper_bound == pytest.approx(lp_relaxation(values, capacity), abs=1e-6)
        assert result.lagrangian_total == pytest.approx(result.upper_bound, abs=1e-9)
        assert result.integrality_gap == pytest.approx(result.upper_bound - best, abs=1e-9)
        assert result.integrality_gap >= -1e-9


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_lagrangian_allocation_is_feasible_and_within_its_gap(case):
    grids, kwargs, values, top = instance(case, 0)
    for fraction in (0.05, 0.2, 0.4, 0.7, 1.0):
        capacity = top * fraction
        best = brute_force(values, capacity)
        if best is None:
            continue
        result = allocate_capacity(grids, capacity, exact=False, **kwargs)
        assert not result.exact
        check_allocation(result, grids, kwargs, capacity)
        assert result.total_utility == result.greedy_utility
        assert result.total_utility <= best + 1e-9
        assert best - result.total_utility <= result.integrality_gap + 1e-9
        assert result.upper_bound >= best - 1e-9


def test_exact_search_beats_the_frontier_somewhere():
    """The exact optimum uses cells below the concave frontier on some instance (else the
    brute-force test would not tell the two apart)."""
    better = 0
    for case, seed in itertools.product(CASES, (0, 1)):
        grids, kwargs, values, top = instance(case, seed)
        for fraction in (0.1, 0.25, 0.5):
            cap = top * fraction
            if brute_force(values, cap) is None:
                continue
            r = allocate_capacity(grids, cap, exact=True, **kwargs)
            better += r.total_utility > r.greedy_utility + 1e-9
    assert better > 0


@pytest.mark.parametrize("case", CASES[:4], ids=lambda c: "-".join(map(str, c)))
def test_frontier_is_the_pareto_set_of_the_candidates(case):
    grids, kwargs, values, _ = instance(case, 1)
    kwargs = {k: v for k, v in kwargs.items()}
    fronts = group_frontiers(grids, **kwargs)
    for (vol, util, cand), f in zip(values, fronts.values(), strict=True):
        points = set(zip(vol[cand].tolist(), util[cand].tolist(), strict=True))
        pareto = {(v, u) for v, u in points
                  if not any(v2 <= v and u2 >= u and (v2, u2) != (v, u) for v2, u2 in points)}
        assert set(zip(f.volume.tolist(), f.utility.tolist(), strict=True)) == pareto
        assert np.all(np.diff(f.volume) > 0) and np.all(np.diff(f.utility) > 0)
        # hull: strictly decreasing slopes, every Pareto point on or below it
        hv, hu = f.volume[f.hull], f.utility[f.hull]
        slopes = np.diff(hu) / np.diff(hv)
        assert np.all(np.diff(slopes) < 0)
        assert np.all(f.utility <= np.interp(f.volume, hv, hu) + 1e-9)


def test_lambda_monotone():
    grids, kwargs, _, top = instance(CASES[6], 0)
    fronts = group_frontiers(grids, **kwargs)
    lams = np.concatenate(([0.0], np.geomspace(1e-3, 10, 60)))
    vols = [lagrangian_volume(fronts, lam) for lam in lams]
    assert all(a >= b for a, b in itertools.pairwise(vols))
    assert vols[0] > vols[-1]
    results = [allocate_capacity(grids, top * f, exact=False, **kwargs)
               for f in np.linspace(0, 1.2, 25)]
    multipliers = [r.multiplier for r in results]
    assert all(a >= b for a, b in itertools.pairwise(multipliers))
    assert multipliers[-1] == 0.0
    for r in results:  # the Lagrangian choice at lambda fits the capacity (lower vertices)
        assert lagrangian_volume(fronts, r.multiplier) <= r.capacity + 1e-9
        if r.objective == "linear":
            assert r.marginal_precision == pytest.approx((r.multiplier + 0.5) / 1.5)


def test_capacity_zero_flags_nothing_and_ample_capacity_gives_each_its_best():
    grids, kwargs, values, top = instance(CASES[6], 1)
    none = allocate_capacity(grids, 0.0, **kwargs)
    assert none.total_volume == 0 and none.total_utility == 0
    for g, a in none.groups.items():
        assert a.index == tuple(n - 1 for n in grids[g].shape)  # all off
        assert a.thresholds == (np.inf,) * grids[g].k
        assert a.status == "capacity_bound"
    ample = allocate_capacity(grids, top + 1.0, **kwargs)
    assert ample.multiplier == 0.0 and ample.integrality_gap == pytest.approx(0.0)
    assert all(a.status == "ok" for a in ample.groups.values())
    for (_, util, cand), a in zip(values, ample.groups.values(), strict=True):
        assert a.utility == util[cand].max() == a.best_utility
    assert allocate_capacity(grids, np.inf, **kwargs).total_utility == ample.total_utility


def test_infeasible_groups_and_bounds():
    grids, kwargs, _, _ = instance(CASES[6], 0)
    names = list(grids)
    vmax = grids[names[0]].volume("any").max()
    kw = dict(kwargs, min_volume={names[0]: vmax + 1})
    r = allocate_capacity(grids, 50.0, **kw)
    assert r.groups[names[0]].status == "infeasible" and r.groups[names[0]].volume == 0
    assert np.isnan(r.groups[names[0]].best_volume)
    assert r.feasible
    kw = dict(kwargs, min_volume={g: 30.0 for g in names})
    r = allocate_capacity(grids, 50.0, **kw)
    assert not r.feasible and r.multiplier == np.inf and np.isnan(r.integrality_gap)
    assert all(a.volume >= 30 for a in r.groups.values() if a.status != "infeasible")


def test_bad_input_raises_clear_errors():
    grids, kwargs, _, _ = instance(CASES[6], 0)
    with pytest.raises(ValueError, match="capacity must be >= 0"):
        allocate_capacity(grids, -1.0, **kwargs)
    with pytest.raises(ValueError, match="capacity must be >= 0"):
        allocate_capacity(grids, float("nan"), **kwargs)
    with pytest.raises(ValueError, match=r"max_volume names groups that have no grid: \['nope'\]"):
        allocate_capacity(grids, 1.0, **dict(kwargs, max_volume={"nope": 3.0}))
    with pytest.raises(ValueError, match=r"volume_scale\['g0'\] must be finite and > 0"):
        allocate_capacity(grids, 1.0, **dict(kwargs, volume_scale={"g0": 0.0}))
    with pytest.raises(ValueError, match=r"min_volume\['g1'\] must be finite and >= 0"):
        allocate_capacity(grids, 1.0, **dict(kwargs, min_volume={"g1": -2}))
    other = ThresholdGrid.from_scores(np.zeros((3, 2)), [True, False, True],
                                      [np.array([0.0, 1.0]), np.array([0.5])])
    with pytest.raises(ValueError, match="groups 'g0' and 'odd' have different edges"):
        allocate_capacity({**grids, "odd": other}, 1.0, **kwargs)
    with pytest.raises(ValueError, match="needs at least one group"):
        allocate_capacity({}, 1.0, target=Target(slope=1.0))
    with pytest.raises(ValueError, match="needs a target"):
        allocate_capacity(grids, 1.0)
    with pytest.raises(ValueError, match="takes none"):
        allocate_capacity(grids, 1.0, objective="true_positives", target=Target(slope=1.0))
    with pytest.raises(ValueError, match="objective must be one of"):
        allocate_capacity(grids, 1.0, objective="f1")
    # A bare number could be a marginal precision or a slope: refused, naming both readings.
    with pytest.raises(TypeError, match="could be a marginal precision or the slope r"):
        allocate_capacity(grids, 1.0, target=0.2)
    by_precision = allocate_capacity(grids, 5.0, target=Target.from_marginal_precision(0.2))
    by_slope = allocate_capacity(grids, 5.0, target=Target(slope=0.25))
    assert by_precision.total_utility == by_slope.total_utility
    with pytest.raises(ValueError, match="exact must be"):
        allocate_capacity(grids, 1.0, target=Target(slope=1.0), exact="yes")
    with pytest.raises(ValueError, match="max_unrated_share"):
        allocate_capacity(grids, 1.0, target=Target(slope=1.0), max_unrated_share=1.5)


def test_deterministic_and_order_of_groups_only_orders_the_output():
    grids, kwargs, _, top = instance(CASES[4], 0)
    a = allocate_capacity(grids, top * 0.3, **kwargs)
    b = allocate_capacity(grids, top * 0.3, **kwargs)
    assert a.groups == b.groups and a.multiplier == b.multiplier
    flipped = dict(reversed(list(grids.items())))
    c = allocate_capacity(flipped, top * 0.3, **kwargs)
    assert c.total_utility == pytest.approx(a.total_utility)
    assert list(c.groups) == list(flipped)
