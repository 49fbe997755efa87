"""The audit loop's targets on many loops, with the library-level loop
(``feedback_sim.simulate_loop``: seconds per 21-day loop instead of ~5 minutes on the pipelines).

Every loop runs the product's defaults (``bench_feedback_loop --audit-defaults``: every audit
and ``in_force`` setting, ``grid.edges: auto`` carried from the published run; a permissive
publish guard) on 60,000 rows a day in 3 groups with 0.2-0.5% positives, 21 days, a target
marginal precision of 0.2 and a drift of the positives' scores from day 11. Scenarios:
``drift`` (the default 1% audit), ``thin_audit`` (the same drift under a 0.25% audit) and
``steady`` (1%, no drift); score families ``spread``, ``concentrated`` and ``model``
(``bench_feedback_loop.population``), each from both starts (both classifiers on, and the
image model off).

It prints, per family and scenario over every start and seed, each target with PASS or FAIL
(:func:`loop_figures.print_targets`); the recovery target is judged against full-label
window-oracle replicas (``--twins``, :func:`loop_figures.reference_noise`).

``--configs uniform`` runs the same loops on uniform edges (64 bins) instead of the default
recipe; ``--check-pipeline`` runs one loop both ways (the pipelines and the simulator) and
compares them day by day.

Run: ``PYTHONPATH=. nice -n 10 .venv/bin/python tests/benchmarks/bench_feedback_sim.py
--processes 2 --seeds $(seq 0 29)``
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_feedback_loop as loop
import feedback_sim as sim
import loop_figures as figures
from machine import describe

#: The loop: sizes, drift and target; the product's audit and in_force defaults.
BASE = ["--rows-per-day", "60000", "--days", "21", "--drift-day", "11", "--check-day", "10",
        "--target", "0.2", "--prevalence", "0.002", "0.003", "0.005",
        "--reference-factor", "0", "--audit-defaults"]

#: Edge recipes compared (further bench_feedback_loop arguments).
CONFIGS: dict[str, list[str]] = {
    "defaults": [],
    "uniform": ["--edges", "uniform", "--bins", "64"],
}


def run_one(job: tuple) -> figures.LoopResult:
    name, family, scenario, seed, argv, start_name = job
    args = loop.parse_args([*argv, *CONFIGS[name]])
    thin = scenario == "thin_audit"
    config = loop.make_config(args, True, thin)
    days = sim.simulate_loop(args, start=loop.starts_of(family)[start_name], audit=True,
                             drift=scenario != "steady", seed=seed, family=family, thin=thin,
                             config=config)
    fig = figures.figures(days, check_day=args.check_day,
                          drift_day=None if scenario == "steady" else args.drift_day)
    budget = float(config.audit.budget_share) if config.audit.design == "auto" else None
    return figures.LoopResult(family, scenario, start_name, seed, fig, budget)


def twins_one(job: tuple) -> tuple[str, list[int | None]]:
    _, family, seed, argv, twins = job
    args = loop.parse_args(list(argv))
    noise = figures.reference_noise(args, seed=seed, family=family, twins=twins,
                                    reference_factor=0)
    return family, [t[2] for t in noise.twins]


def twins_of(opts: argparse.Namespace, families: list[str],
              argv: list[str]) -> dict[str, list[int | None]]:
    """The smoothed recoveries of ``--twins`` full-label window-oracle replicas per family."""
    out: dict[str, list[int | None]] = {}
    if opts.twins <= 0:
        return out
    jobs = [("twins", f, s, tuple(argv), opts.twins) for s in opts.seeds for f in families]
    for family, recoveries in pool_map(twins_one, jobs, opts.processes, opts.keep):
        out.setdefault(family, []).extend(recoveries)
    return out


def check_pipeline(argv: list[str], seed: int, family: str, start_name: str) -> None:
    """One loop on the pipelines and in the simulator: thresholds in force day by day."""
    args = loop.parse_args(argv)
    start = loop.starts_of(family)[start_name]
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


def pool_map(function, jobs: list, processes: int, keep: Path | None = None) -> list:
    """``function`` over ``jobs`` (in ``processes`` processes); with ``keep``, each result is
    appended to that file as it comes (pickled ``(job, result)``) and jobs found there are not
    run again, so that an interrupted run resumes and a long one can be read part way
    (``--report``)."""
    done = dict(read_kept(keep)) if keep is not None and keep.exists() else {}
    todo = [job for job in jobs if job not in done]
    if processes > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            results = pool.imap_unordered(_tagged, [(function, job) for job in todo])
            _keep(results, done, keep)
    else:
        _keep((_tagged((function, job)) for job in todo), done, keep)
    return [done[job] for job in jobs]


def _tagged(item: tuple) -> tuple:
    function, job = item
    return job, function(job)


def _keep(results, done: dict, keep: Path | None) -> None:
    for job, result in results:
        done[job] = result
        if keep is not None:
            with keep.open("ab") as fh:
                pickle.dump((job, result), fh)


def read_kept(path: Path) -> list[tuple]:
    """The ``(job, result)`` pairs a run kept (:func:`pool_map`)."""
    out = []
    with path.open("rb") as fh:
        while True:
            try:
                out.append(pickle.load(fh))
            except EOFError:
                return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="defaults",
                        help=f"comma-separated edge recipes: {', '.join(CONFIGS)}")
    parser.add_argument("--families", default=",".join(loop.FAMILIES))
    parser.add_argument("--scenarios", default="drift,thin_audit",
                        help="comma-separated: drift, thin_audit, steady")
    parser.add_argument("--starts", default="high,image-off")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--twins", type=int, default=2,
                        help="full-label window-oracle replicas per family and seed (the "
                        "recovery target's reference; 0: none)")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, metavar="FILE",
                        help="append each loop's figures to FILE as it finishes and skip the "
                        "loops already there (resume)")
    parser.add_argument("--report", action="store_true",
                        help="with --keep: print the targets of the loops kept so far, run "
                        "nothing")
    parser.add_argument("--check-pipeline", action="store_true",
                        help="compare one loop (first seed, family and start) with the "
                        "pipelines")
    parser.add_argument("loop_args", nargs="*",
                        help="further bench_feedback_loop.py arguments (after --)")
    opts = parser.parse_args()
    argv = BASE + opts.loop_args
    families = opts.families.split(",")
    print(f"machine: {describe()}")
    print(f"loop: {' '.join(argv)}")
    if opts.check_pipeline:
        check_pipeline(argv, opts.seeds[0], families[0], opts.starts.split(",")[0])
        return
    t0 = time.perf_counter()
    check_day = loop.parse_args(argv).check_day
    if opts.report:
        kept = read_kept(opts.keep)
        twins: dict[str, list[int | None]] = {}
        for job, result in kept:
            if job[0] == "twins":
                twins.setdefault(result[0], []).extend(result[1])
        for name in opts.configs.split(","):
            results = [r for job, r in kept if job[0] == name]
            print(f"\n==== {name}: {len(results)} loops kept")
            figures.print_targets(results, twins, check_day=check_day)
        return
    # seed-major order: every cell gains a loop before any gains a second
    for name in opts.configs.split(","):
        jobs = [(name, family, scenario, seed, tuple(argv), start) for seed in opts.seeds
                for family in families for scenario in opts.scenarios.split(",")
                for start in opts.starts.split(",")]
        results = pool_map(run_one, jobs, opts.processes, opts.keep)
        print(f"\n==== {name}: grid {' '.join(CONFIGS[name]) or 'edges auto (the default)'}")
        figures.print_targets(results, twins_of(opts, families, argv), check_day=check_day)
    print(f"\n{time.perf_counter() - t0:.0f} s wall; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
