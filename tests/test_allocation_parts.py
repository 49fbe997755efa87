"""costlib.thresholds.capacity._group_frontiers, _allocation and _split_baselines, the parts a
pipeline uses:
frontiers computed group by group, the allocation from frontiers reduced to their vertices,
next-period volume scales, and the equal and traffic-proportional baselines against a scan of
every cell."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_allocation import CASES, instance

from costlib.thresholds.capacity._allocation import (
    EXACT_AUTO_GROUPS,
    allocate_capacity,
    allocate_frontiers,
)
from costlib.thresholds.capacity._group_frontiers import group_frontiers
from costlib.thresholds.capacity._split_baselines import (
    grid_rows,
    split_baselines,
    split_shares,
    utility_within,
    volume_scales,
)
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._target import Target


def same_frontier(a, b) -> None:
    for name in ("cells", "volume", "utility", "true_positives", "false_positives", "hull"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name  # bit for bit


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_frontiers_group_by_group_equal_all_at_once(case):
    grids, kwargs, _, _ = instance(case, 1)
    per_group = ("min_volume", "max_volume", "volume_scale")
    kw = {k: v for k, v in kwargs.items() if k not in per_group}
    together = group_frontiers(grids, **kwargs)
    for g, grid in grids.items():
        mine = {k: {h: v for h, v in (kwargs[k] or {}).items() if h == g} for k in per_group}
        same_frontier(group_frontiers({g: grid}, **kw, **mine)[g], together[g])


def many_grids(n_groups: int, seed: int = 3) -> dict[str, ThresholdGrid]:
    """More groups than the exact programme takes, of different sizes (different batches)."""
    rng = np.random.default_rng(seed)
    edges = [np.linspace(0.1, 0.9, 9)] * 2
    out = {}
    for g in range(n_groups):
        n = int(rng.integers(20, 400))
        y = rng.random(n) < rng.uniform(0.02, 0.3)
        scores = rng.beta(np.where(y, 4, 1)[:, None], np.where(y, 2, 4)[:, None], size=(n, 2))
        rated = (scores.max(axis=1) > 0.5) | (rng.random(n) < 0.1)
        labels = np.where(rated, y.astype(float), np.nan)
        out[f"m{g:03d}"] = ThresholdGrid.from_scores(scores, labels, edges,
                                                     rng.uniform(0.5, 2.0, n))
    return out


@pytest.mark.parametrize("exact", [False, "auto"])
def test_vertices_give_the_same_allocation(exact):
    grids = many_grids(EXACT_AUTO_GROUPS + 6)
    kwargs = dict(rule="any", objective="true_positives")
    fronts = group_frontiers(grids, **kwargs)
    total = sum(float(f.volume[-1]) for f in fronts.values() if f.feasible)
    thresholds = next(iter(grids.values())).thresholds
    for share in (0.0, 0.1, 0.3, 0.7, 1.5):
        cap = total * share
        full = allocate_capacity(grids, cap, exact=exact, **kwargs)
        reduced = allocate_frontiers({g: f.vertices() for g, f in fronts.items()}, cap,
                                     thresholds=thresholds, exact=exact, **kwargs)
        assert not full.exact and not reduced.exact  # more groups than the exact programme
        assert full.groups == reduced.groups
        for name in ("multiplier", "total_volume", "total_utility", "upper_bound",
                     "lagrangian_total", "greedy_utility", "integrality_gap"):
            assert getattr(full, name) == getattr(reduced, name), name


def test_volume_scales():
    scales = volume_scales({"a": 100.0, "b": 50.0, "c": 10.0}, period_share=0.25,
                           expected_rows={"b": 200.0})
    assert scales == {"a": 0.25, "b": 4.0, "c": 0.25}
    assert volume_scales({"a": 3.0}) == {"a": 1.0}
    with pytest.raises(ValueError, match=r"expected_rows names groups that have no grid"):
        volume_scales({"a": 1.0}, expected_rows={"zz": 1.0})
    with pytest.raises(ValueError, match=r"expected_rows\['a'\] must be finite and > 0"):
        volume_scales({"a": 1.0}, expected_rows={"a": 0.0})
    with pytest.raises(ValueError, match="period_share must be finite and > 0"):
        volume_scales({"a": 1.0}, period_share=math.inf)
    with pytest.raises(ValueError, match=r"rows\['a'\] must be finite and > 0"):
        volume_scales({"a": 0.0})


def test_grid_rows_counts_every_row():
    rng = np.random.default_rng(0)
    scores = rng.random((50, 2))
    scores[:5, 0] = -np.inf  # not scored by the first classifier
    labels = np.where(rng.random(50) < 0.5, (rng.random(50) < 0.3).astype(float), np.nan)
    weights = rng.uniform(0.5, 2.0, 50)
    grid = ThresholdGrid.from_scores(scores, labels, [np.linspace(0.2, 0.8, 4)] * 2, weights)
    # weights are quantised (costlib.thresholds.binning._rows.quantize_weights): equal to ~1e-6
    assert grid_rows(grid) == pytest.approx(weights.sum(), rel=1e-5)
    assert grid_rows(grid) == pytest.approx(grid.pos.sum() + grid.neg.sum() + grid.unrated.sum())


@pytest.mark.parametrize("case", CASES[:6], ids=lambda c: "-".join(map(str, c)))
def test_split_baselines_against_a_scan_of_every_cell(case):
    grids, kwargs, values, top = instance(case, 0)
    fronts = group_frontiers(grids, **kwargs)
    rng = np.random.default_rng(1)
    traffic = {g: float(rng.uniform(1, 10)) for g in grids}
    for cap in (0.0, top * 0.2, top * 0.6, top * 2):
        shares = split_shares(traffic, cap)
        base = split_baselines(fronts, traffic, cap)
        expect_equal, expect_prop = [], []
        for (g, grid), (vol, util, cand) in zip(grids.items(), values, strict=True):
            tp = grid.counts(kwargs["rule"])[0].ravel() * (kwargs["volume_scale"] or {}).get(
                g, 1.0)
            for share, out in zip(shares[g], (expect_equal, expect_prop), strict=True):
                fits = cand & (vol <= share)
                if not fits.any():
                    out.append((0.0, 0.0))
                    continue
                best = util[fits].max()
                # the least volume among the best: the Pareto point
                at = np.flatnonzero(fits & (util == best))
                at = at[np.argmin(vol[at])]
                out.append((best, tp[at]))
        assert base.equal_utility == pytest.approx(sum(u for u, _ in expect_equal), abs=1e-9)
        assert base.equal_true_positives == pytest.approx(sum(t for _, t in expect_equal),
                                                          abs=1e-9)
        assert base.proportional_utility == pytest.approx(sum(u for u, _ in expect_prop),
                                                          abs=1e-9)
        assert base.proportional_true_positives == pytest.approx(
            sum(t for _, t in expect_prop), abs=1e-9)
        alloc = allocate_capacity(grids, cap, exact=True, **kwargs)
        if alloc.feasible:  # the optimum is at least as good as either split
            assert alloc.total_utility >= base.equal_utility - 1e-9
            assert alloc.total_utility >= base.proportional_utility - 1e-9
    f = next(iter(fronts.values()))
    assert utility_within(f, -1.0) == (0.0, 0.0, 0.0)


def test_frontiers_group_by_group_equal_all_at_once_many_batches(monkeypatch):
    """Groups of different compressed sizes are stacked in padded batches; a group alone gets
    the same frontier bit for bit (cumulative sums never add a padding cell before a real one)."""
    import costlib.thresholds.capacity._group_frontiers as frontiers

    monkeypatch.setattr(frontiers, "BATCH_CELLS", 400)  # many small batches
    grids = many_grids(40, seed=5)
    for rule in ("any", "all"):
        for share in (0.0, 0.2):
            kw = dict(rule=rule, objective="linear", target=Target(slope=0.4),
                      max_unrated_share=share)
            together = group_frontiers(grids, **kw)
            for g, grid in grids.items():
                same_frontier(group_frontiers({g: grid}, **kw)[g], together[g])
