"""Benchmark: do the bootstrap intervals of estimated recall cover the truth? (issue 21)

Run: ``.venv/bin/python tests/benchmarks/bench_recall_intervals.py [--salts 200]
[--rows 50000] [--replicates 100]``

One fixed, fully labelled population (two classifiers, prevalence 0.5%, scores concentrated
near 0 for negatives); the thresholds in force flag a few rows, which are rated with
certainty; every unflagged row is audited with probability ``π`` from a stratified design
(:mod:`costlib.audit._sampling`, floor and three strata by the highest score) at three budgets.
For each audit salt (a new audit sample of the same population):

1. the grid of rated rows with Horvitz–Thompson weights (:meth:`ThresholdGrid.from_scores` with
   the audit probabilities) and its Poisson-bootstrap replicates
   (:meth:`costlib.thresholds.loop._bootstrap.BootstrapGrids.from_scores`, the pipeline's
   resampling);
2. **fixed point**: the estimated recall ``TP̂ / P̂`` at fixed thresholds (those in force and a
   lower tuple that flags ~3x as much), its nominal 90% percentile interval over the replicates
   (each replicate evaluated at the same thresholds), against the true recall of those thresholds
   on the population;
3. **chosen point**: the recall interval the pipeline records
   (:func:`costlib.thresholds.loop._bootstrap.
   confidence_intervals`, every replicate re-optimised, hull method, target marginal precision
   0.2), against the true recall of the point chosen on the run's grid.

It prints the coverage (share of salts whose interval holds the truth) per budget and point,
with the mean interval width and the audited share. Target (issue 21): 85-95% for the nominal
90% interval.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe

from costlib.audit._sampling import AuditDesign, audit_sample
from costlib.thresholds.binning._edges import decision_edges
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop._bootstrap import BootstrapGrids, confidence_intervals
from costlib.thresholds.point._operating_point import point_at
from costlib.thresholds.point._optimize import optimize

IN_FORCE = (0.5, 0.5)
LOWER = (0.3, 0.3)
LEVEL = 0.9


def population(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.005
    scores = np.column_stack([
        np.where(y, rng.beta(2 + j, 6, n), rng.beta(0.5, 12, n)) for j in range(2)])
    return np.arange(n, dtype=np.int64), scores, y


def true_recall(scores, y, thresholds) -> float:
    flagged = (scores >= np.asarray(thresholds)).any(axis=1)
    return float(np.sum(flagged & y) / np.sum(y))


def percentile_interval(values: np.ndarray) -> tuple[float, float]:
    return (float(np.quantile(values, (1 - LEVEL) / 2)),
            float(np.quantile(values, 1 - (1 - LEVEL) / 2)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--salts", type=int, default=200)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--replicates", type=int, default=100)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    ids, scores, y = population(args.rows)
    flagged = (scores >= np.asarray(IN_FORCE)).any(axis=1)
    kwargs = {"target_marginal_precision": 0.2, "rule": "any", "method": "hull"}
    truth = {name: true_recall(scores, y, t) for name, t in (("in force", IN_FORCE),
                                                             ("lower", LOWER))}
    print(f"population: {args.rows:,} rows, {int(y.sum())} positives, {int(flagged.sum())} "
          f"flagged by {IN_FORCE}; true recall in force {truth['in force']:.3f}, at {LOWER} "
          f"{truth['lower']:.3f}; {args.salts} audit salts, {args.replicates} Poisson-bootstrap "
          f"replicates, nominal {LEVEL:.0%} intervals")
    print(f"{'budget_share':>12} {'audited':>8} {'point':>12} {'coverage':>9} {'mean width':>11}")
    start = time.perf_counter()
    for budget in (0.005, 0.02, 0.08):
        design = AuditDesign(edges=(0.05, 0.2), weights=(0.5, 2.0, 6.0), floor=budget / 10,
                             budget_share=budget)
        hits = {"in force": [], "lower": [], "chosen": []}
        widths = {name: [] for name in hits}
        audited = []
        for salt in range(args.salts):
            sample = audit_sample(ids, scores, flagged, f"salt-{salt}", design)
            rated = flagged | sample.audit
            labels = np.where(rated, y, None).astype(object)
            p = sample.audit_probability
            audited.append(sample.audit.sum() / (~flagged).sum())
            edges = decision_edges(scores, labels, audit_probabilities=p,
                                   thresholds_in_force=[IN_FORCE, LOWER])
            grid = ThresholdGrid.from_scores(scores, labels, edges, audit_probabilities=p)
            boots = BootstrapGrids.from_scores(scores, labels, edges, ids,
                                               n_replicates=args.replicates,
                                               audit_probabilities=p)
            for name, thresholds in (("in force", IN_FORCE), ("lower", LOWER)):
                recalls = np.array([point_at(boots.replicate(r), thresholds, **kwargs)
                                    .estimated_recall for r in range(boots.n_replicates)])
                low, high = percentile_interval(recalls[np.isfinite(recalls)])
                hits[name].append(low <= truth[name] <= high)
                widths[name].append(high - low)
            chosen = optimize(grid, **kwargs)
            interval = confidence_intervals(boots, level=LEVEL, **kwargs).estimated_recall
            assert interval is not None
            real = true_recall(scores, y, chosen.thresholds)
            hits["chosen"].append(interval[0] <= real <= interval[1])
            widths["chosen"].append(interval[1] - interval[0])
        for name in hits:
            print(f"{budget:12.3f} {np.mean(audited):8.2%} {name:>12} "
                  f"{np.mean(hits[name]):9.1%} {np.mean(widths[name]):11.3f}")
    print(f"target (issue 21): coverage 85-95%; {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
