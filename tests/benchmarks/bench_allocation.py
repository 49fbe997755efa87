"""Benchmark: one review capacity shared by many groups (issue 22,
``costlib.thresholds.allocate_capacity``).

Run: ``PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_allocation.py [--groups 10 1000 10000]
[--capacity-share 0.01] [--repeat 3]``

Data: per group a 102 x 102 lattice (k = 2, 101 uniform edges per axis on [0, 1]) built directly
from per-row bin draws (no score files): skewed group sizes (lognormal, median 300 rows, a few
groups with 10^5), prevalences lognormal around 1% (0.05% to 20%), positives scoring higher.
Selective labels: a row is rated when the thresholds in force (bin 70 on either axis, rule
any) flag it, plus a 3% random sample; the rest is the grid's unrated weight.
Objective: true positives at a total capacity of ``capacity_share`` x all rows, rule any,
covered cells only (``max_unrated_share = 0``).

Printed per number of groups: the allocation time (best of ``--repeat``; building each group's
covered frontier included), and the total true positives of three ways to spend the same
capacity: the shared allocation, an equal split (capacity / G per group, each group then at its
best covered point within that volume) and a split proportional to the groups' rows. Each
group's best point within its share is read off its Pareto set (the most true positives among
covered cells with V <= share); for 10 groups it is checked against
``costlib.thresholds.point._optimize.optimize(method="hull", max_volume=share)``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from machine import best_of, describe

from costlib.thresholds.capacity._allocation import allocate_capacity
from costlib.thresholds.capacity._group_frontiers import group_frontiers
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._optimize import optimize

BINS = 101
IN_FORCE = 70


def make_grids(n_groups: int, seed: int = 0) -> tuple[dict[str, ThresholdGrid], np.ndarray]:
    """Grids of skewed sizes and prevalences; returns them and each group's row count."""
    rng = np.random.default_rng(seed)
    sizes = np.clip(rng.lognormal(np.log(300), 1.5, n_groups), 20, 100_000).astype(np.int64)
    prevalence = np.clip(rng.lognormal(np.log(0.01), 1.0, n_groups), 5e-4, 0.2)
    group = np.repeat(np.arange(n_groups), sizes)
    n = group.size
    y = rng.random(n) < prevalence[group]
    # Bins 0..101 per axis: negatives low, positives high (beta draws), some did not score.
    a = np.where(y, 3.0, 1.0)
    b = np.where(y, 2.0, 5.0)
    cells = np.zeros(n, dtype=np.int64)
    binned = []
    for _ in range(2):
        x = np.minimum((rng.beta(a, b) * BINS).astype(np.int64) + 1, BINS)
        x[rng.random(n) < 0.05] = 0
        binned.append(x)
        cells = cells * (BINS + 1) + x
    rated = (binned[0] > IN_FORCE) | (binned[1] > IN_FORCE) | (rng.random(n) < 0.03)
    size = (BINS + 1) ** 2
    channel = np.where(rated, y.astype(np.int64), 2)
    hist = np.bincount((group * 3 + channel) * size + cells, minlength=n_groups * 3 * size)
    hist = hist.astype(np.float64).reshape(n_groups, 3, BINS + 1, BINS + 1)
    edges = [np.linspace(0.0, 1.0, BINS)] * 2
    grids = {f"group{g:05d}": ThresholdGrid(edges=tuple(edges), pos=hist[g, 1], neg=hist[g, 0],
                                            unrated=hist[g, 2])
             for g in range(n_groups)}
    return grids, sizes


def best_within(front, share: float) -> float:
    """True positives of the group's best covered point with volume <= share."""
    i = int(np.searchsorted(front.volume, share, side="right")) - 1
    return float(front.true_positives[i]) if i >= 0 else 0.0


def run(n_groups: int, capacity_share: float, repeat: int) -> None:
    start = time.perf_counter()
    grids, sizes = make_grids(n_groups)
    built = time.perf_counter() - start
    capacity = capacity_share * float(sizes.sum())
    kwargs = dict(objective="true_positives", rule="any")
    seconds = best_of(lambda: allocate_capacity(grids, capacity, **kwargs), repeat)
    used = time.process_time()
    result = allocate_capacity(grids, capacity, **kwargs)
    cpu = time.process_time() - used  # what other work on the machine skews much less
    fronts = group_frontiers(grids, **kwargs)
    equal = capacity / n_groups
    tp_equal = sum(best_within(f, equal) for f in fronts.values())
    shares = capacity * sizes / sizes.sum()
    tp_traffic = sum(best_within(f, s) for f, s in zip(fronts.values(), shares, strict=True))
    if n_groups <= 10:  # the per-group optimum against optimize(method="hull", max_volume=...)
        for (g, f), s in zip(fronts.items(), shares, strict=True):
            p = optimize(grids[g], target_slope=1.0, method="hull", objective="precision_at_volume",
                         volume=s, check_resolution=False)
            tp = p.tp if p.status != "infeasible" else 0.0  # nothing flagged fits
            assert abs(tp - best_within(f, s)) < 1e-9, (g, tp, best_within(f, s))
    bound = result.upper_bound
    print(f"{n_groups:>6,} groups, {int(sizes.sum()):>11,} rows (largest group "
          f"{int(sizes.max()):,}), grids built in {built:.1f} s; capacity {capacity:,.0f}")
    print(f"    allocate_capacity: {seconds:.3f} s wall, {cpu:.3f} s CPU (target <= 2 s at "
          "10,000 groups); "
          f"exact={result.exact}, lambda = {result.multiplier:.4f} (marginal precision), "
          f"frontier vertices {sum(f.hull.size for f in fronts.values()):,}, "
          f"Pareto points {sum(f.cells.size for f in fronts.values()):,}")
    print(f"    true positives: shared {result.total_utility:,.0f} (volume "
          f"{result.total_volume:,.0f}; LP bound {bound:,.1f}, gap {result.integrality_gap:.2f}) | "
          f"equal split {tp_equal:,.0f} ({result.total_utility / tp_equal - 1:+.1%}) | "
          f"traffic-proportional {tp_traffic:,.0f} ({result.total_utility / tp_traffic - 1:+.1%})")
    status = result.to_frame()["status"].value_counts().to_dict()
    print(f"    statuses: {status}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[10, 1_000, 10_000])
    parser.add_argument("--capacity-share", type=float, default=0.01)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(describe())
    for g in args.groups:
        run(g, args.capacity_share, args.repeat)


if __name__ == "__main__":
    main()
