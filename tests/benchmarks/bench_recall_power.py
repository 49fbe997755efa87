"""Benchmark: does the audit the power calculation recommends reach the recall half-width asked?

Run: ``.venv/bin/python tests/benchmarks/bench_recall_power.py [--audits 30] [--follow-ups 40]
[--half-width 0.05]`` (one process, a few minutes).

The populations, strata and designs of ``bench_recall_coverage.py`` (prevalence 0.1%, 0.5%,
2%; audit budget 0.25%, 1%, 5%; the ``default`` and the ``score`` design; the ``near`` and the
``far`` family; 1- and 7-day windows of 60,000 rows a day). Per cell, ``--audits`` independent
audits at the cell's design each give the evidence a run's records carry (per stratum: rows,
``π``, audited rows, positives found among the rows the thresholds miss), and
:func:`costlib.audit.audit_for_recall_width` turns it into a design for ``± half-width``. That
design is then audited ``--follow-ups`` times from the true population (``x_h ~
Binomial(M_h, π'_h)``, census strata known) and the recall interval of each
(:func:`costlib.audit.recall_interval`, as the records compute it) gives the half-width the
design achieved.

Prints per cell the half-width requested, the mean achieved over the audits' designs and the
ratio, the median audited share recommended, the share the true positives would need (the same
calculation with the true ``M_h`` in place of the posterior), the mean positives the first audit
found among the missed rows, and how many designs were out of reach; then the cells within
±20% of the request, overall and by the evidence the first audit had.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recall_coverage import (
    BUDGETS,
    DESIGNS,
    FAMILIES,
    PREVALENCES,
    WINDOWS,
    population,
    probabilities,
    strata_of,
)
from machine import describe

from costlib.audit import audit_for_recall_width, recall_interval

LEVEL = 0.9


@dataclass(frozen=True)
class Cell:
    """The truth of one cell: caught positives, and per stratum rows, missed positives, π."""

    caught: float
    rows: np.ndarray
    missed: np.ndarray
    pi: np.ndarray


def make_cell(prevalence: float, budget: float, design: str, family: str, days: int,
              rows_per_day: int, seed: int) -> Cell:
    scores, truth, t = population(prevalence, family, rows_per_day * days, seed)
    flagged = scores >= t
    stratum, weights = strata_of(scores, t, design)
    rows = np.bincount(stratum, minlength=weights.size).astype(np.float64)
    missed = np.bincount(stratum, weights=truth[~flagged].astype(np.float64),
                         minlength=weights.size)
    pi = probabilities(rows, weights, design, budget)
    keep = rows > 0
    return Cell(float(np.sum(truth & flagged)), rows[keep], missed[keep], pi[keep])


def half_widths(caught: float, missed: np.ndarray, pi: np.ndarray, found: np.ndarray
                ) -> np.ndarray:
    """Half-width of the recall interval of each audit (rows of ``found``) at design ``pi``."""
    census = pi >= 1.0
    w = 1.0 / pi[~census]
    wm = float(w.max()) if w.size else 0.0
    known = float(missed[census].sum())
    out = []
    for x in found:
        xs = x[~census]
        low, high = recall_interval((caught, 0.0, 0.0, 0.0),
                                    (known, float((xs * w).sum()), float((xs * w * w).sum()),
                                     wm), LEVEL)
        out.append(0.0 if low is None or high is None else (high - low) / 2.0)
    return np.asarray(out)


def truth_share(cell: Cell, half_width: float) -> float | None:
    """The audited share the true missed positives need: the smallest scale of the design whose
    half-width at the expected counts ``min(1, k π_h) M_h`` is at most ``half_width``."""
    def width(k: float) -> float:
        p = np.minimum(1.0, k * cell.pi)
        return float(half_widths(cell.caught, cell.missed, p, (cell.missed * p)[None, :])[0])

    k_max = 1.0 / float(cell.pi.min())
    if width(k_max) > half_width:
        return None
    lo, hi = math.log(1e-6), math.log(k_max)
    for _ in range(40):
        mid = (lo + hi) / 2.0
        lo, hi = (lo, mid) if width(math.exp(mid)) <= half_width else (mid, hi)
    p = np.minimum(1.0, math.exp(hi) * cell.pi)
    return float((cell.rows * p).sum() / cell.rows.sum())


@dataclass(frozen=True)
class Outcome:
    achieved: float  # mean half-width achieved over the designs (nan: none reachable)
    share: float  # median audited share recommended
    found: float  # mean positives the first audits found among the missed rows
    unreachable: int


def run_cell(cell: Cell, half_width: float, audits: int, follow_ups: int, seed: int
             ) -> Outcome:
    rng = np.random.default_rng(seed)
    missed = cell.missed.astype(np.int64)
    negatives = (cell.rows - cell.missed).astype(np.int64)
    achieved, shares, found, unreachable = [], [], [], 0
    for _ in range(audits):
        x = rng.binomial(missed, cell.pi).astype(np.float64)
        n = x + rng.binomial(negatives, cell.pi)
        found.append(float(x[cell.pi < 1].sum()))
        plan = audit_for_recall_width(cell.caught, cell.rows, cell.pi, n, x, half_width,
                                      level=LEVEL)
        if not plan.reachable:
            unreachable += 1
            continue
        p = np.asarray(plan.probabilities)
        again = rng.binomial(missed[None, :], p[None, :],
                             size=(follow_ups, p.size)).astype(np.float64)
        achieved.append(float(half_widths(cell.caught, cell.missed, p, again).mean()))
        shares.append(plan.share)
    return Outcome(float(np.mean(achieved)) if achieved else float("nan"),
                   float(np.median(shares)) if shares else float("nan"),
                   float(np.mean(found)), unreachable)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audits", type=int, default=30)
    parser.add_argument("--follow-ups", type=int, default=40)
    parser.add_argument("--half-width", type=float, default=0.05)
    parser.add_argument("--rows-per-day", type=int, default=60_000)
    args = parser.parse_args(argv)
    print(describe())
    print(f"{args.audits} first audits per cell, {args.follow_ups} follow-up audits per "
          f"design, {args.rows_per_day} rows a day, nominal {LEVEL:.0%} interval, "
          f"requested half-width {args.half_width:g} (target: achieved within ±20%)")
    print(f"{'prev':>6} {'budget':>6} {'design':>7} {'family':>6} {'days':>4} {'found':>6} "
          f"{'requested':>9} {'achieved':>8} {'ratio':>5} {'share':>7} {'truth':>7} "
          f"{'unreach':>7}")
    start = time.perf_counter()
    rows = []
    for n, (prev, budget, design, family, days) in enumerate(
            itertools.product(PREVALENCES, BUDGETS, DESIGNS, FAMILIES, WINDOWS)):
        cell = make_cell(prev, budget, design, family, days, args.rows_per_day, 1000 + n)
        out = run_cell(cell, args.half_width, args.audits, args.follow_ups, 2000 + n)
        need = truth_share(cell, args.half_width)
        ratio = out.achieved / args.half_width
        rows.append((out.found, ratio))
        truth = "census" if need is None else f"{need:.2%}"
        print(f"{prev:>6.2%} {budget:>6.2%} {design:>7} {family:>6} {days:>4} "
              f"{out.found:>6.1f} {args.half_width:>9.3f} {out.achieved:>8.3f} {ratio:>5.2f} "
              f"{out.share:>7.2%} {truth:>7} {out.unreachable:>7}", flush=True)
    within = [abs(r - 1.0) <= 0.2 for _, r in rows]
    print(f"within ±20%: {sum(within)} of {len(rows)} cells")
    for lo, hi in ((0.0, 2.0), (2.0, 10.0), (10.0, math.inf)):
        sel = [w for (f, _), w in zip(rows, within, strict=True) if lo <= f < hi]
        if sel:
            print(f"  first audit found {lo:g} to {hi:g} missed positives on average: "
                  f"{sum(sel)} of {len(sel)} cells within ±20%")
    print(f"{time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
