"""Issue 21's closed-loop targets for many settings, with the library-level loop
(``feedback_sim.simulate_loop``, seconds per 21-day loop instead of ~5 minutes).

Every configuration runs the scenarios ``drift`` (the budget of ``--budget-share``) and
``thin_audit`` (the issue's 0.25% audit) for every family and seed, from the start (0.9, 0.9)
((0.5, 0.5) for the concentrated family), and prints per configuration, family and scenario
the four target figures over the seeds:

- ``late``: days ``--check-day``+ mean utility / the window oracle's (min over seeds; target
  >= 0.97);
- ``start``: lowest utility / the starting thresholds' on any day (target >= 0.9);
- ``recov``: days after the drift until utility stays within 5% of the window oracle (max over
  seeds; ``-`` never; target <= 5);
- ``audit``: audited rows / the design's expected count - 1 (worst over seeds; target within
  +-10%) and the audited share of unflagged rows (mean over seeds; <= 1% asked).

Configurations (``--configs``, comma-separated names of :data:`CONFIGS`) are overrides of the
run config (``section.key: value``) on top of the benchmark's issue-21 settings, plus an
optional rule variant (``feedback_sim.Recalibrate``).

``--check-pipeline``: run one loop both ways (the real pipelines and the simulator) and
compare the thresholds in force day by day.

Run: ``PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_feedback_sim.py --seeds 0 1 2
--families spread,concentrated --configs default,z0,auto``
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_feedback_loop as loop
import feedback_sim as sim
from machine import describe

#: The issue-21 loop of docs/audit.md ("Issue 21 targets").
BASE = ["--rows-per-day", "60000", "--days", "21", "--drift-day", "11", "--check-day", "10",
        "--target", "0.2", "--prevalence", "0.002", "0.003", "0.005",
        "--budget-share", "0.002", "--audit-floor", "0.0005", "--strata-edges", "0.05", "0.3",
        "--strata-weights", "0.5", "3", "10", "--reference-factor", "0"]

#: Strata with a band near the thresholds (band score >= 0.5 / 0.6 holds ~5% of the spread
#: family's rows and ~98% of its positives).
S5 = {"edges": [0.05, 0.3, 0.5], "weights": [0.5, 3.0, 10.0, 40.0]}
S6 = {"edges": [0.05, 0.3, 0.6], "weights": [0.5, 3.0, 10.0, 50.0]}

#: Strata relative to the point in force (``audit.strata.relative_to: point``): name ->
#: (lattice steps, weights far to near).
RELATIVE: dict[str, tuple[list[int], list[float]]] = {
    "a": ([8, 24, 48], [0.5, 3.0, 10.0, 40.0]),
    "b": ([4, 16, 32], [0.5, 3.0, 10.0, 40.0]),
    "c": ([2, 8, 32], [1.0, 5.0, 20.0, 40.0]),
    "d": ([16, 32], [0.5, 5.0, 40.0]),
    "e": ([4, 16], [1.0, 10.0, 40.0]),
}

#: Strata by shares of each group's unflagged rows nearest the point (relative_to point):
#: name -> (shares, weights far to near).
SHARES: dict[str, tuple[list[float], list[float]]] = {
    "a": ([0.01, 0.05, 0.25], [0.5, 3.0, 10.0, 40.0]),
    "b": ([0.02, 0.1, 0.3], [0.5, 3.0, 10.0, 40.0]),
    "c": ([0.05, 0.2], [0.5, 5.0, 40.0]),
    "d": ([0.01, 0.1], [1.0, 10.0, 40.0]),
    "e": ([0.005, 0.05, 0.25], [0.5, 3.0, 10.0, 40.0]),
    "f": ([0.01, 0.05, 0.25], [0.5, 2.0, 10.0, 60.0]),
    "g": ([0.005, 0.05, 0.25], [0.5, 2.0, 10.0, 60.0]),
    "h": ([0.01, 0.05, 0.25], [0.5, 1.0, 10.0, 100.0]),
    "i": ([0.01, 0.05, 0.25], [0.25, 2.0, 10.0, 60.0]),
    "j": ([0.02, 0.1, 0.3], [0.5, 2.0, 10.0, 60.0]),
    #: the defaults plus a census-like band of the nearest lattice step(s) (depth <= k with
    #: at least 0.01% of the rows)
    "n1": ([0.0001, 0.01, 0.05, 0.25], [0.5, 2.0, 10.0, 60.0, 1000.0]),
    "n2": ([0.001, 0.01, 0.05, 0.25], [0.5, 2.0, 10.0, 60.0, 1000.0]),
    "n3": ([0.0001, 0.01, 0.05, 0.25], [0.5, 2.0, 10.0, 60.0, 200.0]),
}

#: name -> (config overrides "section.key": value, rule variant name or None, bench args)
CONFIGS: dict[str, tuple[dict[str, Any], str | None, list[str]]] = {
    "default": ({}, None, []),
    #: the schema's audit defaults (relative share strata, auto design, 1% budget, floor 0.001;
    #: thin_audit: budget 0.25%, floor 0.0005)
    "audit_defaults": ({}, None, ["--audit-defaults"]),
    #: the defaults before stop 33: no census review, no one-row margin
    "ad_nocensus": ({"in_force.census_review": False, "in_force.one_row_margin": False}, None,
                    ["--audit-defaults"]),
    #: the defaults without the one-row margin (census review on: the defaults of 0799df2)
    "ad_no_one_row": ({"in_force.one_row_margin": False}, None, ["--audit-defaults"]),
    "ad_z1": ({"in_force.evidence_z": 1.0}, None, ["--audit-defaults"]),
    "ad_z0.5": ({"in_force.evidence_z": 0.5}, None, ["--audit-defaults"]),
    "ad_z2.33": ({"in_force.evidence_z": 2.33}, None, ["--audit-defaults"]),
    "ad_k0": ({"in_force.unseen_rows": 0.0}, None, ["--audit-defaults"]),
    "ad_k0.5": ({"in_force.unseen_rows": 0.5}, None, ["--audit-defaults"]),
    "ad_k0.25": ({"in_force.unseen_rows": 0.25}, None, ["--audit-defaults"]),
    "rel_labels": ({}, None, ["--audit-defaults"]),
    "ad_lattice": ({}, "lattice", ["--audit-defaults"]),
    "ad_ratio": ({}, "ratio_bounds", ["--audit-defaults"]),
    "ad_segment": ({}, "segment", ["--audit-defaults"]),
    "ad_trim": ({}, "trim", ["--audit-defaults"]),
    "ad_noprop": ({"audit.strata.proposal_stratum": None}, None, ["--audit-defaults"]),
    "ad_prop2": ({"audit.strata.proposal_stratum": 2}, None, ["--audit-defaults"]),
    "ad_prop3": ({"audit.strata.proposal_stratum": 3}, None, ["--audit-defaults"]),
    "ad_census5": ({"audit.strata.shares": [0.0005, 0.01, 0.05, 0.25]}, None,
                   ["--audit-defaults"]),
    #: the census band of the defaults (0.1%) and the band before stop 34 (0.01%)
    "ad_census10": ({"audit.strata.shares": [0.001, 0.01, 0.05, 0.25]}, None,
                    ["--audit-defaults"]),
    "ad_census1": ({"audit.strata.shares": [0.0001, 0.01, 0.05, 0.25]}, None,
                   ["--audit-defaults"]),
    "ad_census20": ({"audit.strata.shares": [0.002, 0.01, 0.05, 0.25]}, None,
                    ["--audit-defaults"]),
    #: the defaults with a switch-on from no thresholds that needs no evidence (before stop 34)
    "ad_switch_on_free": ({"in_force.switch_on_evidence": False}, None, ["--audit-defaults"]),
    "ad_near120": ({"audit.strata.weights": [0.5, 2.0, 10.0, 120.0, 1000.0]}, None,
                   ["--audit-defaults"]),
    "ad_popvar": ({}, "population_variance", ["--audit-defaults"]),
    "ad_popvar_census5": ({"audit.strata.shares": [0.0005, 0.01, 0.05, 0.25]},
                          "population_variance", ["--audit-defaults"]),
    "ad_box": ({}, "box", ["--audit-defaults"]),
    "z_off": ({"in_force.evidence_z": None}, None, []),
    "z1": ({"in_force.evidence_z": 1.0}, None, []),
    "z0.5": ({"in_force.evidence_z": 0.5}, None, []),
    "z0": ({"in_force.evidence_z": 0.0}, None, []),
    "k0": ({"in_force.unseen_rows": 0.0}, None, []),
    "k3": ({"in_force.unseen_rows": 3.0}, None, []),
    "auto": ({"audit.design": "auto"}, None, []),
    "auto_b01": ({"audit.design": "auto", "audit.budget_share": 0.01}, None, []),
    "s5_fixed": ({"audit.strata": S5, "audit.budget_share": 0.0015}, None, []),
    "s5_auto": ({"audit.strata": S5, "audit.design": "auto", "audit.budget_share": 0.01},
                None, []),
    "s5_auto_z1": ({"audit.strata": S5, "audit.design": "auto", "audit.budget_share": 0.01,
                    "in_force.evidence_z": 1.0}, None, []),
    "s5_auto_k0": ({"audit.strata": S5, "audit.design": "auto", "audit.budget_share": 0.01,
                    "in_force.unseen_rows": 0.0}, None, []),
    "s5_auto_z1_k0": ({"audit.strata": S5, "audit.design": "auto", "audit.budget_share": 0.01,
                       "in_force.evidence_z": 1.0, "in_force.unseen_rows": 0.0}, None, []),
    "s6_auto": ({"audit.strata": S6, "audit.design": "auto", "audit.budget_share": 0.01},
                None, []),
    **{f"rel_{name}": ({"audit.strata": {"relative_to": "point", "steps": steps,
                                         "weights": weights},
                        "audit.design": "auto", "audit.budget_share": 0.01}, None, [])
       for name, (steps, weights) in RELATIVE.items()},
    **{f"sh_{name}": ({"audit.strata": {"relative_to": "point", "shares": shares,
                                        "weights": weights},
                       "audit.design": "auto", "audit.budget_share": 0.01}, None, [])
       for name, (shares, weights) in SHARES.items()},
}


#: name -> feedback_sim.EXPERIMENT switches of a configuration (simulator-only prototypes).
EXPERIMENTS: dict[str, dict[str, Any]] = {"rel_labels": {"relative_label_spreads": True}}


def config_for(args: argparse.Namespace, overrides: dict[str, Any], audit: bool, thin: bool):
    config = loop.make_config(args, audit, thin)
    if thin:  # the thin audit's budget is the issue's; other overrides apply
        overrides = {k: v for k, v in overrides.items()
                     if k not in ("audit.budget_share", "audit.floor")}
    return config.with_overrides(overrides, source="bench_feedback_sim") if overrides else config


def run_one(job: tuple, keep_days: bool = False) -> tuple:
    name, family, scenario, seed, argv, start_name = job
    overrides, rule, extra = CONFIGS[name]
    args = loop.parse_args(argv + extra)
    sim.EXPERIMENT.clear()
    sim.EXPERIMENT.update(EXPERIMENTS.get(name, {}))
    thin = scenario == "thin_audit"
    config = config_for(args, overrides, True, thin)
    start = None if start_name == "none" else (
        loop.STARTS_CONCENTRATED if family == "concentrated" else loop.STARTS)[start_name]
    t0 = time.perf_counter()
    rated: list[sim.RatedDay] = []
    days = sim.simulate_loop(args, start=start, audit=True, drift=True, seed=seed,
                             family=family, thin=thin, config=config,
                             recalibrate=sim.RULES[rule] if rule else None,
                             observe=rated.append)
    fig = sim.figures(days, check_day=args.check_day, drift_day=args.drift_day)
    if config.audit.strata.get("relative_to") == "point":
        nearest = len(config.audit.strata["weights"]) - 1
        fig = dataclasses.replace(fig, **sim.nearest_band(rated, nearest))
    budget = float(config.audit.budget_share) if config.audit.design == "auto" else None
    out = (name if start_name == "high" else f"{name}@{start_name}", family, scenario, seed,
           fig, budget, time.perf_counter() - t0)
    return (*out, days) if keep_days else out


def table(results: list[tuple], verbose: bool = False) -> None:
    print(f"\n{'config':<12} {'family':<12} {'scenario':<10} {'late mean (min)':>16} "
          f"{'start':>6} {'recov':>9} {'audit dev':>10} {'share':>6}  met (late/start/recov/audit)")
    keys = sorted({(r[0], r[1], r[2]) for r in results},
                  key=lambda k: (list(CONFIGS).index(k[0].split("@")[0]), k[0], k[1], k[2]))
    for key in keys:
        rows = [r for r in results if r[:3] == key]
        figs = [r[4] for r in rows]
        budget = rows[0][5]
        late = [f.late_mean for f in figs]
        recov = [f.recovery for f in figs]
        recov_text = ",".join("-" if r is None else str(r) for r in recov)
        smooth_text = ",".join("-" if f.recovery_smoothed is None else str(f.recovery_smoothed)
                               for f in figs)
        dev = max((f.audit_deviation for f in figs), key=abs)
        met = [f.meets(budget) for f in figs]
        flags = "/".join(f"{sum(m[k] for m in met)}" for k in
                         ("late>=0.97", "start>=0.9", "recovery<=5", "audit+-10%"))
        print(f"{key[0]:<12} {key[1]:<12} {key[2]:<10} "
              f"{np.mean(late):7.3f} ({min(late):5.3f}) {min(f.min_start for f in figs):6.3f} "
              f"{recov_text:>9} {100 * dev:+9.1f}% {100 * np.mean([f.share for f in figs]):5.2f}%"
              f"  {flags} of {len(figs)}")
        low = [(r[3], f) for r, f in zip(rows, figs, strict=True) if f.min_start < 0.9]
        if low:  # the safety misses, with the window oracle's own figure on the same day
            print(f"{'':<36} below 0.9 of the start: " + ", ".join(
                f"seed {seed} {f.min_start:.3f} (window oracle {f.oracle_at_min_start:.3f})"
                for seed, f in low))
        if verbose:
            print(f"{'':<36} late per seed {' '.join(f'{x:.3f}' for x in late)}; min/start "
                  f"{' '.join(f'{f.min_start:.3f}' for f in figs)}; on "
                  f"{sim.SMOOTHING_DAYS}-day sums: recovery {smooth_text}, min/start "
                  f"{min(f.min_start_smoothed for f in figs):.3f}")
            print(f"{'':<36} days before the check day (sums) over the window oracle "
                  f"{np.mean([f.early_ratio for f in figs]):.3f} (min "
                  f"{min(f.early_ratio for f in figs):.3f}); days below 0 net TP "
                  f"{sum(f.losing_days for f in figs)} in {len(figs)} loops (worst loop "
                  f"{max(f.losing_days for f in figs)})")
            band = np.array([(f.band_rows, f.band_share, f.band_min_pi) for f in figs])
            if not np.isnan(band[:, 0]).all():
                print(f"{'':<36} nearest audit stratum: audited rows a day (median over "
                      f"days) {np.nanmedian(band[:, 0]):.0f} (loops "
                      f"{np.nanmin(band[:, 0]):.0f}-{np.nanmax(band[:, 0]):.0f}), share of the "
                      f"audited rows {np.nanmedian(band[:, 1]):.2f} (max "
                      f"{np.nanmax(band[:, 1]):.2f}), lowest pi {np.nanmin(band[:, 2]):.2f}")


def check_pipeline(argv: list[str], seed: int, family: str, start_name: str = "high") -> None:
    """One loop on the pipelines and in the simulator: thresholds in force day by day."""
    args = loop.parse_args(argv)
    start = (loop.STARTS_CONCENTRATED if family == "concentrated" else loop.STARTS)[start_name]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-sim-check-") as tmp:
        piped = loop.run_loop(args, Path(tmp) / "loop", name="pipeline", start=start,
                              audit=True, drift=True, seed=seed, family=family)
    t1 = time.perf_counter()
    simulated = sim.simulate_loop(args, start=start, audit=True, drift=True, seed=seed,
                                  family=family)
    t2 = time.perf_counter()
    same = 0
    for a, b in zip(simulated, piped, strict=True):
        ok = (a.thresholds == b.thresholds and (a.rated, a.audited) == (b.rated, b.audited)
              and a.utility == b.utility)
        same += ok
        print(f"day {a.day:2d}: {'same' if ok else 'DIFFERENT'}  sim "
              f"{' '.join(loop.fmt_t(a.thresholds[g]) for g in loop.GROUPS)} | pipeline "
              f"{' '.join(loop.fmt_t(b.thresholds[g]) for g in loop.GROUPS)}")
    print(f"check: {same}/{len(piped)} days identical (thresholds in force, rated and audited "
          f"rows, utility); pipeline {t1 - t0:.0f} s, simulator {t2 - t1:.1f} s")


def noise_one(job: tuple) -> tuple:
    family, seed, argv, twins = job
    args = loop.parse_args(argv)
    starts = loop.STARTS_CONCENTRATED if family == "concentrated" else loop.STARTS
    return family, seed, sim.reference_noise(args, seed=seed, family=family, twins=twins,
                                             starts=starts)


def reference_noise_table(argv: list[str], families: list[str], seeds: list[int], twins: int,
                          processes: int) -> None:
    """Issue 21's per-loop figures of references that know more than any loop
    (:func:`feedback_sim.reference_noise`), per family and seed, and how often they meet the
    targets: what share of the loop's misses the window oracle's own noise explains."""
    jobs = [(family, seed, argv, twins) for family in families for seed in seeds]
    if processes > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            results = pool.map(noise_one, jobs, chunksize=1)
    else:
        results = [noise_one(job) for job in jobs]
    fmt = lambda r: "-" if r is None else str(r)  # noqa: E731
    print(f"\n{'family':<12} {'seed':>4}  twins (full labels, replicate days): late; recovery; "
          f"recovery on {sim.SMOOTHING_DAYS}-day sums | population optimum: same")
    for family in families:
        met = {"late": 0, "recov": 0, "smooth": 0, "n": 0, "p_late": 0, "p_recov": 0,
               "p_smooth": 0, "p_n": 0}
        for fam, seed, noise in results:
            if fam != family:
                continue
            late = " ".join(f"{t[0]:.3f}" for t in noise.twins)
            print(f"{family:<12} {seed:>4}  {late}; {','.join(fmt(t[1]) for t in noise.twins)}; "
                  f"{','.join(fmt(t[2]) for t in noise.twins)} | {noise.population[0]:.3f}; "
                  f"{fmt(noise.population[1])}; {fmt(noise.population[2])}")
            for t in noise.twins:
                met["n"] += 1
                met["late"] += t[0] >= 0.97
                met["recov"] += t[1] is not None and t[1] <= 5
                met["smooth"] += t[2] is not None and t[2] <= 5
            p = noise.population
            met["p_n"] += 1
            met["p_late"] += p[0] >= 0.97
            met["p_recov"] += p[1] is not None and p[1] <= 5
            met["p_smooth"] += p[2] is not None and p[2] <= 5
        print(f"{family:<12} met: twins late>=0.97 {met['late']}/{met['n']}, recovery<=5 "
              f"{met['recov']}/{met['n']}, smoothed recovery<=5 {met['smooth']}/{met['n']}; "
              f"population optimum {met['p_late']}/{met['p_n']}, {met['p_recov']}/{met['p_n']}, "
              f"{met['p_smooth']}/{met['p_n']}")
        mine = [noise for fam, _, noise in results if fam == family]
        for start in (mine[0].population_min_start if mine else {}):
            twins_min = [t[start] for noise in mine for t in noise.twins_min_start]
            pop_min = [noise.population_min_start[start] for noise in mine]
            print(f"{family:<12} no day below 0.9 of the start {start!r}: twins "
                  f"{sum(v >= 0.9 for v in twins_min)}/{len(twins_min)} (lowest "
                  f"{min(twins_min):.3f}), population optimum "
                  f"{sum(v >= 0.9 for v in pop_min)}/{len(pop_min)} (lowest {min(pop_min):.3f})")


def replicate_day_table(argv: list[str], opts: argparse.Namespace) -> None:
    """``--replicate-day``: one loop's day, its realised utility and what its thresholds in
    force are worth in expectation (:func:`feedback_sim.replicate_day`)."""
    name, start_name = opts.configs.split(",")[0], opts.starts.split(",")[0]
    family, scenario = opts.families.split(",")[0], opts.scenarios.split(",")[0]
    seed, day = opts.seeds[0], opts.replicate_day
    result = run_one((name, family, scenario, seed, argv, start_name), keep_days=True)
    row = result[-1][day]
    args = loop.parse_args(argv + CONFIGS[name][2])
    start = (loop.STARTS_CONCENTRATED if family == "concentrated" else loop.STARTS)[start_name]
    worth = sim.replicate_day(args, row.thresholds, start, day=day, seed=seed, family=family)
    point, base = worth["point"], worth["start"]
    print(f"{name}@{start_name} {family} {scenario} seed {seed} day {day}: thresholds in force "
          f"{' '.join(loop.fmt_t(row.thresholds[g]) for g in loop.GROUPS)}")
    print(f"  that day: utility {row.utility:.2f}, start's {row.start_utility:.2f} "
          f"(ratio {row.start_ratio:.3f}), window oracle's {row.oracle:.2f}")
    print(f"  on {point.size} replicate days: utility {point.mean():.2f} ± "
          f"{point.std(ddof=1) / np.sqrt(point.size):.2f} (sd {point.std(ddof=1):.2f}), "
          f"start's {base.mean():.2f} ± {base.std(ddof=1) / np.sqrt(base.size):.2f}; "
          f"days below 0.9 of the start's: {int(np.sum(point < 0.9 * base))}/{point.size}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="default")
    parser.add_argument("--families", default="spread,concentrated")
    parser.add_argument("--scenarios", default="drift,thin_audit")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--starts", default="high",
                        help="starting points, comma-separated: high (0.9, 0.9), image-off "
                        "(0.9, inf); (0.5, ...) for the concentrated family; none: no "
                        "thresholds anywhere (a new deployment: every group is switched on by "
                        "recalibration)")
    parser.add_argument("--per-seed", action="store_true",
                        help="also print each seed's late mean and min utility / start")
    parser.add_argument("--reference-noise", type=int, default=0, metavar="TWINS",
                        help="instead of loops: the target figures of TWINS full-label "
                        "replicates of the window oracle and of the population optimum")
    parser.add_argument("--check-pipeline", action="store_true",
                        help="compare one loop (first seed, family and start) with the "
                        "pipelines")
    parser.add_argument("--replicate-day", type=int, default=None, metavar="DAY",
                        help="run one loop (first config, start, family, scenario and seed) "
                        "and print what its thresholds in force on DAY are worth on 20 "
                        "replicate populations of that day, against the start's")
    parser.add_argument("loop_args", nargs="*",
                        help="further bench_feedback_loop.py arguments (after --)")
    opts = parser.parse_args()
    argv = BASE + opts.loop_args
    print(f"machine: {describe()}")
    print(f"loop: {' '.join(argv)}")
    if opts.check_pipeline:
        check_pipeline(argv, opts.seeds[0], opts.families.split(",")[0],
                       opts.starts.split(",")[0])
        return
    if opts.replicate_day is not None:
        replicate_day_table(argv, opts)
        return
    if opts.reference_noise:
        t0 = time.perf_counter()
        reference_noise_table(argv, opts.families.split(","), opts.seeds, opts.reference_noise,
                              opts.processes)
        print(f"\n{time.perf_counter() - t0:.0f} s wall")
        return
    jobs = [(name, family, scenario, seed, argv, start)
            for name in opts.configs.split(",") for start in opts.starts.split(",")
            for family in opts.families.split(",")
            for scenario in opts.scenarios.split(",") for seed in opts.seeds]
    t0 = time.perf_counter()
    if opts.processes > 1:
        with multiprocessing.get_context("fork").Pool(opts.processes) as pool:
            results = pool.map(run_one, jobs, chunksize=1)
    else:
        results = [run_one(job) for job in jobs]
    table(results, opts.per_seed)
    print(f"\n{len(jobs)} loops, {time.perf_counter() - t0:.0f} s wall")


if __name__ == "__main__":
    main()
