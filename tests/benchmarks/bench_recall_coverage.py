"""Benchmark: does the recall interval hold when the audit finds few or no missed positives?

Run: ``.venv/bin/python tests/benchmarks/bench_recall_coverage.py [--salts 200]
[--rows-per-day 60000]`` (one process, about a minute).

A fully labelled population per cell: one score, ``rows-per-day`` rows a day, positives at a
given prevalence. The thresholds in force flag the rows above ``t`` (rated with certainty:
``π = 1``); every unflagged row is audited with the probability of its stratum. For each audit
salt (an independent audit of the same population) the recall interval the records carry
(:func:`costlib.audit.recall_interval`: Fay–Feuer bounds on the missed positives, the caught
ones known) is checked against the population's true recall at ``t``. The audit of a stratum
of ``N_h`` rows holding ``M_h`` positives finds ``x_h ~ Binomial(M_h, π_h)`` of them: the hash
draw of :func:`costlib.audit.audit_sample` is an independent Bernoulli(``π_h``) per row, so
the benchmark draws the per-stratum counts directly (the grid path that turns a run's rows
into the same counts is checked in ``tests/test_recall_bounds.py``, 300 audits).

Cells (every combination):

- prevalence 0.1%, 0.5%, 2%;
- audit budget 0.25%, 1%, 5% of the unflagged rows;
- design ``default`` (the product's: strata relative to the point in force, the nearest 0.1%,
  1%, 5%, 25% of the unflagged rows and the rest, weights 1000, 60, 10, 2, 0.5 near to far,
  probabilities water-filled to the budget with floor 0.001) or ``score`` (fixed design: score
  strata below 0.1, 0.1-0.3 and above 0.3, ``π = budget × (0.5, 2, 8)``);
- family ``near`` (positives score Beta(4, 2): the missed ones sit just below ``t``) or ``far``
  (a third of the positives score like negatives, Beta(1, 12): missed far below ``t``, where
  the audit is thinnest); ``t`` catches about 75% of the positives;
- window 1 or 7 days.

Prints per cell the coverage of the nominal 90% interval (target >= 0.88 in every cell), its
mean width, the mean positives the audit found below ``t`` and the share of salts finding
none, then the lowest coverage.

``--grid-salts N`` (default 0; 1-day windows only, ~1 s per 15 salts) adds the coverage of
the same interval computed the way a run computes it: a Bernoulli(``π``) audit of every
unflagged row, the rated rows into a :class:`~costlib.thresholds.ThresholdGrid` with their
audit probabilities (edges at the stratum boundaries, as strata relative to the point in
force are), and :func:`costlib.thresholds.recall_bounds` at the thresholds in force (cell
probabilities recovered from the grid's design channels).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe

from costlib.audit import AuditDesign, budget_scale, recall_interval
from costlib.thresholds import ThresholdGrid, recall_bounds

PREVALENCES = (0.001, 0.005, 0.02)
BUDGETS = (0.0025, 0.01, 0.05)
DESIGNS = ("default", "score")
FAMILIES = ("near", "far")
WINDOWS = (1, 7)
LEVEL = 0.9
SHARES = (0.001, 0.01, 0.05, 0.25)  # of the unflagged rows, nearest the point first
WEIGHTS_NEAR_TO_FAR = (1000.0, 60.0, 10.0, 2.0, 0.5)
SCORE_EDGES = (0.1, 0.3)
SCORE_WEIGHTS = (0.5, 2.0, 8.0)


def population(prevalence: float, family: str, rows: int, seed: int
               ) -> tuple[np.ndarray, np.ndarray, float]:
    """Scores, labels and the threshold in force (catching ~75% of the positives)."""
    rng = np.random.default_rng(seed)
    truth = rng.random(rows) < prevalence
    scores = rng.beta(1, 12, rows)
    pos = np.flatnonzero(truth)
    if family == "near":
        scores[pos] = rng.beta(4, 2, pos.size)
        t = 0.49  # P(Beta(4, 2) >= 0.49) ~ 0.75
    else:
        far = rng.random(pos.size) < 1 / 3
        scores[pos] = np.where(far, rng.beta(1, 12, pos.size), rng.beta(4, 2, pos.size))
        t = 0.3  # ~0.97 of the near two thirds: ~0.65 overall, the rest far below
    return scores, truth, t


def grid_coverage(scores: np.ndarray, truth: np.ndarray, t: float, stratum: np.ndarray,
                  pi: np.ndarray, recall: float, salts: int, seed: int) -> float:
    """Coverage of :func:`costlib.thresholds.recall_bounds` on grids of audited rows."""
    flagged = scores >= t
    below = scores[~flagged]
    bounds_at = [below[stratum == h].max() for h in range(pi.size) if np.any(stratum == h)]
    edges = np.unique(np.r_[np.nextafter(np.asarray(bounds_at), np.inf), t,
                            np.linspace(t, 1.0, 8, endpoint=False)[1:]])
    row_pi = np.ones(scores.size)
    row_pi[~flagged] = pi[stratum]
    index = (int(np.searchsorted(edges, t)),)
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(salts):
        rated = flagged | (rng.random(scores.size) < row_pi)
        labels = np.where(rated, truth.astype(np.float64), np.nan)
        grid = ThresholdGrid.from_scores(scores[:, None], labels, [edges],
                                         audit_probabilities=row_pi)
        b = recall_bounds(grid, index, level=LEVEL)
        assert b is not None and b.recall_low is not None and b.recall_high is not None
        hits += b.recall_low <= recall <= b.recall_high
    return hits / salts


def strata_of(scores: np.ndarray, t: float, design: str) -> tuple[np.ndarray, np.ndarray]:
    """Stratum index of every unflagged row and the design weights (stratum order)."""
    below = scores[scores < t]
    if design == "default":
        order = np.argsort(-below, kind="stable")  # nearest the point first
        rank = np.empty(below.size, dtype=np.int64)
        rank[order] = np.arange(below.size)
        cuts = np.ceil(np.asarray(SHARES) * below.size)
        return np.searchsorted(cuts, rank, side="right"), np.asarray(WEIGHTS_NEAR_TO_FAR)
    return np.searchsorted(np.asarray(SCORE_EDGES), below, side="right"), np.asarray(
        SCORE_WEIGHTS)


def probabilities(counts: np.ndarray, weights: np.ndarray, design: str, budget: float
                  ) -> np.ndarray:
    floor = min(0.001, budget)
    if design == "default":  # auto: E[audited] = budget * unflagged rows
        d = AuditDesign(edges=tuple(float(i) + 0.5 for i in range(weights.size - 1)),
                        weights=tuple(float(w) for w in weights), floor=floor,
                        budget_share=budget)
        c = budget_scale(counts, d, budget * float(counts.sum()))
    else:
        c = budget
    return np.clip(c * weights, floor, 1.0)


def run_cell(prevalence, budget, design, family, days, rows_per_day, salts, seed,
             grid_salts=0):
    scores, truth, t = population(prevalence, family, rows_per_day * days, seed)
    flagged = scores >= t
    caught = float(np.sum(truth & flagged))
    recall = caught / float(truth.sum())
    stratum, weights = strata_of(scores, t, design)
    counts = np.bincount(stratum, minlength=weights.size).astype(np.float64)
    missed = np.bincount(stratum, weights=truth[~flagged].astype(np.float64),
                         minlength=weights.size)
    pi = probabilities(counts, weights, design, budget)
    census = pi >= 1.0
    omega = np.where(census, 0.0, 1.0 / pi)
    wm = float(omega[counts > 0].max()) if (counts > 0).any() else 0.0
    rng = np.random.default_rng(seed + 1)
    found = rng.binomial(missed.astype(np.int64)[None, :], pi[None, :],
                         size=(salts, weights.size)).astype(np.float64)
    hits, widths = 0, []
    for x in found:
        known = float(x[census].sum())  # a census stratum is known exactly
        xs, ws = x[~census], omega[~census]
        low, high = recall_interval((caught, 0.0, 0.0, 0.0),
                                    (known, float((xs * ws).sum()),
                                     float((xs * ws * ws).sum()), wm), LEVEL)
        assert low is not None and high is not None
        hits += low <= recall <= high
        widths.append(high - low)
    sampled = ~census
    grid = (grid_coverage(scores, truth, t, stratum, pi, recall, grid_salts, seed + 2)
            if grid_salts and days == 1 else None)
    return {"grid": grid, "coverage": hits / salts, "width": float(np.mean(widths)),
            "recall": recall,
            "found": float(found[:, sampled].sum(axis=1).mean()),
            "none": float(np.mean(found[:, sampled].sum(axis=1) == 0)),
            "missed": float(missed.sum()), "share": float((counts * pi).sum() / counts.sum())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--salts", type=int, default=200)
    parser.add_argument("--rows-per-day", type=int, default=60_000)
    parser.add_argument("--grid-salts", type=int, default=0,
                        help="also run the grid path (1-day windows) with this many salts")
    args = parser.parse_args(argv)
    print(describe())
    print(f"{args.salts} audit salts per cell, {args.rows_per_day} rows a day, nominal "
          f"{LEVEL:.0%} interval (target coverage >= 0.88 in every cell)")
    header = (f"{'prev':>6} {'budget':>6} {'design':>7} {'family':>6} {'days':>4} "
              f"{'recall':>6} {'missed':>6} {'audited':>7} {'found':>6} {'none':>5} "
              f"{'coverage':>8} {'width':>6}" + (" grid" if args.grid_salts else ""))
    print(header)
    start = time.perf_counter()
    worst = 1.0
    for n, (prev, budget, design, family, days) in enumerate(
            itertools.product(PREVALENCES, BUDGETS, DESIGNS, FAMILIES, WINDOWS)):
        r = run_cell(prev, budget, design, family, days, args.rows_per_day, args.salts,
                     seed=1000 + n, grid_salts=args.grid_salts)
        worst = min(worst, r["coverage"], 1.0 if r["grid"] is None else r["grid"])
        grid = "" if r["grid"] is None else f" {r['grid']:.3f}"
        print(f"{prev:>6.2%} {budget:>6.2%} {design:>7} {family:>6} {days:>4} "
              f"{r['recall']:>6.3f} {r['missed']:>6.0f} {r['share']:>7.2%} {r['found']:>6.1f} "
              f"{r['none']:>5.2f} {r['coverage']:>8.3f} {r['width']:>6.3f}{grid}")
    print(f"lowest coverage {worst:.3f} (target >= 0.88); "
          f"{time.perf_counter() - start:.1f} s")
    return 0 if worst >= 0.88 else 1


if __name__ == "__main__":
    raise SystemExit(main())
