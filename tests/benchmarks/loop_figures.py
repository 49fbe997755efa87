"""The target figures of a closed loop's days (``feedback_sim.simulate_loop`` or
``bench_feedback_loop.run_loop``), and of the full-label references they are judged against.

Figures are ratios of a day's utility ``TP - r FP`` (``r = m / (1 - m)``, ``m`` the target
marginal precision) to a reference's on the same day: the *window oracle* (the full-label hull
optimum of the previous ``window`` days, on the edges the config's recipe would place on them,
applied to the day) and the *start* (the starting thresholds applied to the day).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_feedback_loop as loop

GROUPS = loop.GROUPS


#: Days of the trailing sums of :func:`smoothed_ratios` (the smoothed recovery figure).
SMOOTHING_DAYS = 3


def recovery_day(ratios: Sequence[float], drift_day: int, level: float = 0.95) -> int | None:
    """Days after ``drift_day`` until ``ratios`` stay ``>= level`` for good (None: never)."""
    back = next((d for d in range(drift_day, len(ratios))
                 if all(r >= level for r in ratios[d:])), None)
    return None if back is None else back - drift_day


def smoothed_ratios(utility: Sequence[float], oracle: Sequence[float],
                    days: int = SMOOTHING_DAYS, first: int = 1) -> list[float]:
    """Utility over the reference's (the window oracle's by default) on trailing sums of
    ``days`` days from day ``first`` on (day 0 has no window oracle): the daily ratio with
    the day-to-day noise of both summed over ``days`` days."""
    out = [math.nan] * len(utility)
    for d in range(first, len(utility)):
        lo = max(first, d - days + 1)
        total = sum(oracle[lo:d + 1])
        out[d] = sum(utility[lo:d + 1]) / total if total > 0 else math.nan
    return out


@dataclass(frozen=True)
class Figures:
    """The target figures of one loop.

    ``late_mean`` / ``late_min``: mean / min of utility over the window oracle's from
    ``check_day`` on; ``min_start``: min utility over the starting thresholds' (same day);
    ``recovery``: days after the drift until the oracle ratio is >= 0.95 for good (None:
    never; not set without a drift); ``recovery_smoothed``: the same on
    :data:`SMOOTHING_DAYS`-day trailing sums (:func:`smoothed_ratios`); ``min_start_smoothed``:
    ``min_start`` on those sums (a day worth ~2 net TP makes the daily ratio noise);
    ``oracle_at_min_start``: the window oracle's utility over the start's on the day of
    ``min_start`` (below 0.9 too: the reference itself misses the safety test that day);
    ``band_rows`` / ``band_share`` / ``band_min_pi``: the audited rows of the nearest audit
    stratum (the census band of the default strata) per day, median over days 1+; their
    median share of the day's audited rows; the lowest audit probability in that stratum
    (:func:`nearest_band`; NaN without relative strata); ``early_ratio``: utility over the
    window oracle's on the sums of days 1 to ``check_day - 1`` (the start of a loop, e.g. a
    new deployment that has no thresholds); ``losing_days``: days with utility below 0 (the
    thresholds in force flag rows worth less than nothing at the target);
    ``low_sums``: days (1+) whose :data:`SMOOTHING_DAYS`-day trailing sum of utility is below
    0.9 of the start's while the window oracle's is not (the safety target's misses);
    ``audit_deviation``: audited / expected - 1 over the loop; ``share``: audited / unflagged
    rows over the loop; ``expected_share``.
    """

    late_mean: float
    late_min: float
    min_start: float
    recovery: int | None
    audit_deviation: float
    share: float
    expected_share: float
    recovery_smoothed: int | None = None
    min_start_smoothed: float = math.nan
    oracle_at_min_start: float = math.nan
    early_ratio: float = math.nan
    losing_days: int = 0
    band_rows: float = math.nan
    band_share: float = math.nan
    band_min_pi: float = math.nan
    low_sums: int = 0

    def meets(self, budget: float | None = None, late: float = 0.97) -> dict[str, bool]:
        """Each per-loop target met or not: days ``check_day``+ mean >= ``late`` of the window
        oracle; back within 5% on :data:`SMOOTHING_DAYS`-day sums in <= 5 days; no such sum
        below 0.9 of the start's unless the oracle's is; no day below 0; the audited rows
        within 10% of the design's expectation and (``budget``) the audited share within 10%
        of the budget."""
        return {
            "late": self.late_mean >= late,
            "recovery": self.recovery_smoothed is not None and self.recovery_smoothed <= 5,
            "safety": self.low_sums == 0,
            "no loss": self.losing_days == 0,
            "audit": abs(self.audit_deviation) <= 0.10 and (
                budget is None or abs(self.share / budget - 1) <= 0.10)}


def figures(days: Sequence[loop.Day], *, check_day: int, drift_day: int | None) -> Figures:
    """The target figures (:class:`Figures`) of one loop's days."""
    late = [d.oracle_ratio for d in days[check_day:]]
    start = [d.start_ratio for d in days]
    started = not all(math.isnan(r) for r in start)  # not from "no thresholds" (utility 0)
    worst = days[int(np.nanargmin(start))] if started else days[0]
    recovery = smoothed = None
    if drift_day is not None:
        recovery = recovery_day([d.oracle_ratio for d in days], drift_day)
        smoothed = recovery_day(smoothed_ratios([d.utility for d in days],
                                                [d.oracle for d in days]), drift_day)
    audited = sum(d.audited for d in days)
    expected = sum(d.expected_audited for d in days)
    unflagged = max(sum(d.unflagged for d in days), 1)
    return Figures(
        late_mean=float(np.nanmean(late)) if late else math.nan,
        late_min=float(np.nanmin(late)) if late else math.nan,
        min_start=float(np.nanmin(start)) if started else math.nan,
        recovery=recovery,
        audit_deviation=audited / expected - 1 if expected > 0 else math.nan,
        share=audited / unflagged, expected_share=expected / unflagged,
        recovery_smoothed=smoothed,
        min_start_smoothed=float(np.nanmin(smoothed_ratios(
            [d.utility for d in days], [d.start_utility for d in days], first=0)))
        if started else math.nan,
        oracle_at_min_start=(worst.oracle / worst.start_utility
                             if worst.start_utility > 0 and worst.oracle > 0 else math.nan),
        early_ratio=(sum(d.utility for d in days[1:check_day])
                     / max(sum(d.oracle for d in days[1:check_day]), 1e-12)),
        losing_days=sum(d.utility < 0 for d in days),
        low_sums=low_sums(days) if started else 0)


def low_sums(days: Sequence[loop.Day], level: float = 0.9) -> int:
    """Days (1+) whose trailing :data:`SMOOTHING_DAYS`-day sums have utility below ``level``
    times the start's while the window oracle's sum is at least that (a miss of the safety
    target that the full-label reference does not share)."""
    u = smoothed_ratios([d.utility for d in days], [d.start_utility for d in days])
    o = smoothed_ratios([d.oracle for d in days], [d.start_utility for d in days])
    return sum(1 for d in range(1, len(days)) if u[d] < level and not o[d] < level)


@dataclass(frozen=True)
class ReferenceNoise:
    """The target figures of references that know more than any loop, against the window
    oracle (:func:`reference_noise`): ``twins`` per independent replicate, ``population``
    for the population optimum. Each is ``(late mean, recovery, smoothed recovery)``."""

    twins: list[tuple[float, int | None, int | None]]
    population: tuple[float, int | None, int | None]
    #: Lowest daily utility / that of a starting point (days 1+ where the start's is > 0), per
    #: start name: per twin, and of the population optimum (the per-day safety target).
    twins_min_start: list[dict[str, float]] = field(default_factory=list)
    population_min_start: dict[str, float] = field(default_factory=dict)


def reference_noise(args: argparse.Namespace, *, seed: int, family: str, twins: int = 5,
                    reference_factor: int = 10, drift: bool = True,
                    starts: Mapping[str, Sequence[float]] | None = None) -> ReferenceNoise:
    """How far the per-loop targets are a test of the window oracle's own noise.

    On the loop's days (``bench_feedback_loop.population`` with ``seed``) and against its
    window oracle (the full-label hull optimum of the previous ``window`` days, per group,
    applied to the day's rows), the figures of

    - **twins**: the same window oracle computed on ``twins`` independent replicate
      populations (seeds ``seed + 777_777 * (t + 1)``, same generator, days and drift), i.e.
      a loop that rated *every* row of statistically identical days, applied to the loop's
      rows;
    - **population**: the thresholds optimal for each day's distribution (hull on all labels
      of an independent sample ``reference_factor`` times the day's size:
      ``bench_feedback_loop.population_optimum``), a perfectly informed policy without the
      window's lag.

    A target that these miss on a seed is not a test of the loop on that seed. With
    ``starts`` (name -> thresholds applied to every group) each reference's lowest daily
    utility over the start's is computed too (the per-day safety target).
    """
    config = loop.make_config(args, True)
    slope = args.target / (1 - args.target)
    kw = {"drift_day": args.drift_day if drift else None, "drift_logit": args.drift_logit,
          "family": family, "prevalence": args.prevalence, "problem": seed}

    def rows_of(pop) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        g, _, s, y = pop
        return g, s, y

    def utility(pop, points) -> float:
        g, _, s, y = pop
        return loop.utility_of_points(g, s, y, points, slope)

    def oracle(by_day: list[tuple[np.ndarray, ...]], day: int) -> float:
        """The window oracle of ``by_day``'s rows applied to the loop's day ``day``."""
        g, _, s, y = pops[day]
        return loop.window_oracle(by_day[max(0, day - args.window):day], g, s, y, config,
                                  args.target, slope)

    def summary(u: list[float], o: list[float]) -> tuple[float, int | None, int | None]:
        ratios = [math.nan] + [u[d] / o[d] if o[d] > 0 else math.nan for d in range(1, len(u))]
        late = float(np.nanmean(ratios[args.check_day:]))
        return (late, recovery_day(ratios, args.drift_day),
                recovery_day(smoothed_ratios(u, o), args.drift_day))

    pops = [loop.population(args.rows_per_day, d, seed=seed, **kw) for d in range(args.days)]
    own = [rows_of(p) for p in pops]
    o = [math.nan] + [oracle(own, d) for d in range(1, args.days)]
    start_u = {name: [utility(pops[d], [tuple(t)] * len(GROUPS)) for d in range(args.days)]
               for name, t in (starts or {}).items()}

    def min_start(u: list[float]) -> dict[str, float]:
        return {name: float(np.nanmin([u[d] / su[d] if su[d] > 0 else math.nan
                                       for d in range(1, args.days)]))
                for name, su in start_u.items()}

    out, twin_starts = [], []
    for t in range(twins):
        other = [rows_of(loop.population(args.rows_per_day, d, seed=seed + 777_777 * (t + 1),
                                         **kw)) for d in range(args.days)]
        u = [math.nan] + [oracle(other, d) for d in range(1, args.days)]
        out.append(summary(u, o))
        twin_starts.append(min_start(u))
    ref = argparse.Namespace(**{**vars(args), "reference_factor": reference_factor})
    if reference_factor <= 0:  # no population optimum
        return ReferenceNoise(out, (math.nan, None, None), twin_starts, {})
    population = [math.nan] + [
        loop.population_optimum(d, *pops[d][:1], *pops[d][2:], config, ref, slope, drift, seed,
                                family)[0] for d in range(1, args.days)]
    return ReferenceNoise(out, summary(population, o), twin_starts, min_start(population))


@dataclass(frozen=True)
class LoopResult:
    """One loop's figures and what it ran: ``budget`` is the audit's budget share (None: a
    fixed design, whose share is not a target)."""

    family: str
    scenario: str
    start: str
    seed: int
    figures: Figures
    budget: float | None


#: Days ``check_day``+ mean over the window oracle asked per scenario (thin: the 0.25% audit).
LATE_TARGET = {"drift": 0.97, "steady": 0.97, "thin_audit": 0.90}


def print_targets(results: Sequence[LoopResult],
                  twins: Mapping[str, list[int | None]] | None = None,
                  check_day: int = 10) -> dict[str, bool]:
    """The targets per family and scenario over every start and seed, each PASS or FAIL:

    - days ``check_day``+ mean utility over the window oracle's, the mean over loops at least
      :data:`LATE_TARGET` (0.97 at 1%, 0.90 for the thin 0.25% audit);
    - after the drift, back within 5% of the window oracle on :data:`SMOOTHING_DAYS`-day
      sums in <= 5 days in at least as large a share of loops as the full-label window-oracle
      replicas manage (``twins``: their smoothed recoveries per family);
    - no :data:`SMOOTHING_DAYS`-day sum below 0.9 of the start's unless the window oracle's
      is too, and no day below 0 net utility, in any loop;
    - the audited share of the unflagged rows within 10% of the budget, and the audited rows
      within 10% of the design's expectation, in every loop.

    Returns each line's verdict by ``family/scenario/target``."""
    verdicts: dict[str, bool] = {}
    keys = sorted({(r.family, r.scenario) for r in results},
                  key=lambda k: (loop.FAMILIES.index(k[0]), k[1]))
    for family, scenario in keys:
        rows = [r for r in results if (r.family, r.scenario) == (family, scenario)]
        figs = [r.figures for r in rows]
        n = len(figs)
        starts = sorted({r.start for r in rows})
        print(f"\n{family} / {scenario}: {n} loops (starts {', '.join(starts)}; seeds "
              f"{min(r.seed for r in rows)}-{max(r.seed for r in rows)})")

        def verdict(name: str, ok: bool, text: str,
                    family: str = family, scenario: str = scenario) -> None:
            verdicts[f"{family}/{scenario}/{name}"] = ok
            print(f"  {'PASS' if ok else 'FAIL'}  {text}")

        goal = LATE_TARGET.get(scenario, 0.97)
        late = np.array([f.late_mean for f in figs])
        per_start = ", ".join(
            f"{s} {np.nanmean([r.figures.late_mean for r in rows if r.start == s]):.3f}"
            for s in starts)
        verdict("late", bool(np.nanmean(late) >= goal),
                f"days {check_day}+ / window oracle: mean {np.nanmean(late):.3f} (target >= "
                f"{goal}; {per_start}); lowest loop {np.nanmin(late):.3f}; loops >= {goal}: "
                f"{int(np.sum(late >= goal))}/{n}")
        if scenario != "steady":
            back = sum(f.recovery_smoothed is not None and f.recovery_smoothed <= 5 for f in figs)
            mine = twins.get(family) if twins else None
            if mine:
                ref = sum(t is not None and t <= 5 for t in mine)
                verdict("recovery", back / n >= ref / len(mine),
                        f"back within 5% on {SMOOTHING_DAYS}-day sums in <= 5 days after the "
                        f"drift: {back}/{n} loops ({100 * back / n:.0f}%); full-label "
                        f"window-oracle replicas {ref}/{len(mine)} ({100 * ref / len(mine):.0f}%)")
            else:
                print(f"  ----  back within 5% on {SMOOTHING_DAYS}-day sums in <= 5 days: "
                      f"{back}/{n} loops (no replicas run: --twins 0)")
        low = [(r.seed, r.start, r.figures.low_sums) for r in rows if r.figures.low_sums]
        verdict("safety", not low,
                f"{SMOOTHING_DAYS}-day sums below 0.9 of the start's (window oracle's not): "
                f"{sum(x[2] for x in low)} days in {len(low)} loops"
                + (f" ({', '.join(f'seed {a} {b}: {c}' for a, b, c in low[:6])})" if low else "")
                + f"; lowest {SMOOTHING_DAYS}-day ratio "
                f"{np.nanmin([f.min_start_smoothed for f in figs]):.3f}")
        losing = sum(f.losing_days for f in figs)
        verdict("no loss", losing == 0,
                f"days below 0 net utility: {losing} in {sum(f.losing_days > 0 for f in figs)} "
                "loops")
        budget = rows[0].budget
        shares = np.array([f.share for f in figs])
        deviation = max((f.audit_deviation for f in figs), key=abs)
        ok = all(f.meets(r.budget)["audit"] for f, r in zip(figs, rows, strict=True))
        verdict("audit", ok,
                f"audited share of unflagged rows {100 * shares.min():.3f}-"
                f"{100 * shares.max():.3f}% (budget "
                f"{'fixed design' if budget is None else f'{100 * budget:.2f}%'}); audited / "
                f"expected - 1 worst {100 * deviation:+.1f}%")
    return verdicts
