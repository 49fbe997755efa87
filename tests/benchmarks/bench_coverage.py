"""Cost of coverage and constraints (issue 10) next to today's unconstrained methods.

Run: ``.venv/bin/python tests/benchmarks/bench_coverage.py``

A 1024x1024 lattice (k = 2, 400k rows). The covered grid has the same rows, but only those
flagged by thresholds in force at the 60th edge of each axis (rule any) are rated; the rest are
unrated. Target: hull with coverage and constraints <= 2x the unconstrained hull.
Grid counts and volumes are cached per grid; every figure is best-of-5 on a warm grid (the
one-off cumulative sums are reported separately).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from machine import best_of, describe

from costlib.thresholds.binning._edges import uniform_edges
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._optimize import optimize


def grids(n_rows: int = 400_000, n_edges: int = 1023):
    rng = np.random.default_rng(1)
    y = rng.random(n_rows) < 0.02
    scores = rng.normal(size=(n_rows, 2)) + np.array([1.5, 1.0]) * y[:, None]
    edges = [uniform_edges(-3, 4, n_edges)] * 2
    in_force = np.array([edges[0][600], edges[1][600]])
    rated = (scores >= in_force).any(axis=1)
    plain = ThresholdGrid.from_scores(scores[rated], y[rated], edges)
    covered = ThresholdGrid.from_scores(scores, np.where(rated, y, None), edges)
    return plain, covered


def main() -> None:
    print(describe())
    plain, covered = grids()
    start = time.perf_counter()
    for rule in ("any",):
        covered.counts(rule), covered.volume(rule), covered.covered(rule)
    print(f"one-off: counts + unrated + volume cumulative sums, 1024x1024: "
          f"{(time.perf_counter() - start) * 1e3:.1f} ms")
    constraints = {"min_precision": 0.5, "max_volume": 3000.0, "max_false_positives": 1500.0}
    cases = [
        ("hull, frontier=False", {"method": "hull", "frontier": False}),
        ("hull, full frontier", {"method": "hull"}),
        ("graph", {"method": "graph"}),
    ]
    for name, kw in cases:
        base = best_of(lambda kw=kw: optimize(plain, target_marginal_precision=0.5, **kw))
        print(f"{name:<24} unconstrained, no unrated        {base * 1e3:8.1f} ms")
        variants = [
            ("constraints, no unrated", plain, constraints),
            ("coverage", covered, {}),
            ("coverage + constraints", covered, constraints),
            ("coverage + F1 + constr.", covered, {"objective": "f1", **constraints}),
        ]
        for label, grid, extra in variants:
            if "objective" in extra:
                def run(grid=grid, extra=extra, kw=kw):
                    return optimize(grid, **extra, **kw)
            else:
                def run(grid=grid, extra=extra, kw=kw):
                    return optimize(grid, target_marginal_precision=0.5, **extra, **kw)
            t = best_of(run)
            status = run().status
            print(f"{name:<24} {label:<32} {t * 1e3:8.1f} ms | ratio {t / base:5.2f}x "
                  f"| status {status}" + (" | target <= 2x" if name.startswith("hull") else ""))


if __name__ == "__main__":
    main()
