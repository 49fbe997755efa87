"""Closed-loop benchmark: decide -> rate -> recalibrate, day by day, on the real pipelines.

Each simulated day:

1. a generated population with known labels (two classifiers, 3 groups) is written as Parquet
   *without* labels;
2. ``run_decide`` (FnApiRunner) applies the currently published operating points, with an audit
   sample of the unflagged rows when audit is enabled;
3. a simulated rater labels every row whose ``threshold_decision`` is true or whose ``audit`` is
   true, from the truth (the rater-facing contract);
4. the day's *rated score stream* (scores; label null for unrated rows; the decision records'
   ``audit_probability`` in ``columns.audit_probability``) is written as Parquet;
5. ``run_recalibrate`` (batch mode) over the rated streams of the last ``--window`` days
   publishes the next day's operating points. The publish guard is made permissive in the
   config (``publish: {max_threshold_change: null, min_rated: 0}``) so it never stalls the
   loop; a held run would be reported as ``held`` and the previous point kept.

The config is the product's defaults unless told otherwise: ``grid.edges: auto`` (carried
from the published run), the schema's audit and ``in_force`` defaults (:func:`make_config`).

Per day it prints the utility TP - r*FP (r = m / (1 - m) from the target marginal precision m)
of the operating points in force that day, counted from the decision records against the day's
full labels; the same-day full-label optimum and the *window oracle* (the full-label optimum
of the previous ``--window`` days, applied to the day; both per group with
``optimize(method="hull", max_unrated_share=1)`` on the edges the config's recipe places on
the labelled rows, :func:`reference_edges`); the starting point's utility on the same day; the
rater load (rows rated); and the audit share (audited / unflagged rows).

Scenarios, each from two starting points (both classifiers on; the image model off): with
audit; without audit; drift (with audit; from ``--drift-day`` the positives' scores fall
towards the negatives', ``--drift-logit``); ``thin_audit`` (the drift under a 0.25% audit).
Score families (``--families``): ``spread`` (sigmoid of a latent score), ``concentrated``
(beta near 0) and ``model`` (two logistic regressions, :mod:`model_scores`). At the end each
target per family and scenario with PASS or FAIL (:func:`targets`).

Run: ``.venv/bin/python tests/benchmarks/bench_feedback_loop.py [--rows-per-day 60000]
[--days 21] [--drift-day 11] [--target 0.2] [--scenarios audit,no_audit,drift,thin_audit]
[--seeds 0 1 2] [--families spread,concentrated,model] [--prevalence 0.002 0.003 0.005]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop_population import (  # noqa: F401  (the loop's population and references)
    CLASSIFIERS,
    CORRELATION,
    FAMILIES,
    GROUPS,
    PREVALENCE,
    SEPARATION,
    STARTS,
    STARTS_CONCENTRATED,
    apply_thresholds,
    full_label_optimum,
    full_label_points,
    population,
    population_optimum,
    reference_edges,
    starts_of,
    utility_of,
    utility_of_points,
    window_oracle,
)
from machine import describe

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.plots._audit_plots import plot_audit_pn_curves
from costlib.thresholds.point._target import resolve_target
from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.pipeline import run_decide
from costlib_pipelines.decide.records import read_decisions
from costlib_pipelines.io.records import arrow_schema, records_to_table
from costlib_pipelines.io.runs import latest_run_id, load_operating_points
from costlib_pipelines.recalibrate.pipeline import run_recalibrate
from costlib_pipelines.recalibrate.publish import PublishRefused

#: The thin audit (scenario ``thin_audit``): 0.25% budget, floor 0.0005.
THIN_AUDIT = {"budget_share": 0.0025, "floor": 0.0005, "edges": [0.05, 0.3],
              "weights": [0.5, 3.0, 10.0]}


def score_table(g, ids, scores, label=None, audit_probability=None) -> pa.Table:
    columns = {
        "group": pa.array(np.asarray(GROUPS, dtype=object)[g]),
        "item_id": pa.array(ids),
    }
    for j, name in enumerate(CLASSIFIERS):
        columns[name] = pa.array(scores[:, j])
    if label is not None:
        columns["label"] = label
    if audit_probability is not None:
        columns["audit_probability"] = audit_probability
    return pa.table(columns)


# ----------------------------------------------------------------------------- configs
#: Audit options that leave the schema's audit defaults (with their values when another is set).
AUDIT_OPTIONS = {"budget_share": 0.01, "audit_floor": 0.001, "strata_edges": [0.3, 0.6],
                 "strata_weights": [0.5, 3.0, 10.0], "strata_steps": None,
                 "strata_shares": None, "audit_design": None}


def audit_defaults(args) -> bool:
    """Whether the loop runs the schema's audit defaults: ``--audit-defaults``, or none of
    the options of :data:`AUDIT_OPTIONS` given."""
    return bool(getattr(args, "audit_defaults", False)) or all(
        getattr(args, name, None) is None for name in AUDIT_OPTIONS)


def make_config(args, audit: bool, thin: bool = False) -> RunConfig:
    """The loop's run config: the product's defaults except the target, ``min_rated``,
    ``in_force`` and grid options given, the audit options given (:func:`audit_defaults`)
    and a publish guard that never holds a run (``--guard off``)."""
    defaults = audit_defaults(args)
    args = argparse.Namespace(**{**vars(args), **{
        name: value for name, value in AUDIT_OPTIONS.items()
        if getattr(args, name, None) is None}})
    design = (THIN_AUDIT if thin else
              {"budget_share": args.budget_share, "floor": args.audit_floor,
               "edges": args.strata_edges, "weights": args.strata_weights})
    steps = getattr(args, "strata_steps", None)
    strata: dict = {"edges": design["edges"], "weights": design["weights"]}
    shares = getattr(args, "strata_shares", None)
    if steps is not None or shares is not None:  # relative to the point (thin: same strata)
        strata = {"relative_to": "point", "weights": args.strata_weights,
                  **({"shares": shares} if shares is not None else {"steps": steps})}
    audit_section = {
        "enabled": audit, "floor": design["floor"], "budget_share": design["budget_share"],
        **({} if getattr(args, "audit_design", None) is None
           else {"design": args.audit_design}),
        "strata": strata,
    }
    if defaults:  # the schema's audit defaults (thin: 0.25%)
        audit_section = {"enabled": audit, **({"budget_share": THIN_AUDIT["budget_share"],
                                               "floor": THIN_AUDIT["floor"]} if thin else {})}
    return RunConfig.from_dict({
        "columns": {"audit_probability": "audit_probability"} if audit else {},
        "classifiers": list(CLASSIFIERS), "rule": "any",
        "grid": {"edges": args.edges, "range": [0.0, 1.0],
                 **({} if args.bins is None else {"bins": args.bins})},
        "target": {"marginal_precision": args.target},
        "methods": ["hull"], "decision_method": "hull",
        "min_rated": {k: v for k, v in (("positives", args.min_rated_positives),
                                         ("negatives", args.min_rated_negatives))
                      if v is not None},
        "bootstrap": {"replicates": args.bootstrap_replicates},
        "in_force": {"min_gain_z": args.min_gain_z,
                     **({} if args.evidence_z == "default" else
                        {"evidence_z": None if args.evidence_z == "none"
                         else float(args.evidence_z)}),
                     **({} if args.unseen_rows is None else {"unseen_rows": args.unseen_rows})},
        "audit": audit_section,
        "publish": ({"max_threshold_change": None, "min_rated": 0} if args.guard == "off"
                    else {"max_threshold_change": 0.2, "min_rated": 50}),
    })


def write_start_points(path: Path, thresholds, target: float) -> str:
    """Day 0's operating points by hand: every field of schemas/operating_point.json."""
    unset = {f.name: None for f in arrow_schema("operating_point.json")}
    records = []
    for group in [*GROUPS, "__all__"]:
        records.append({
            **unset, "objective": "linear",
            "group": group, "window_start": None, "window_end": None, "rule": "any",
            "method": "hull", "classifiers": list(CLASSIFIERS),
            "thresholds": [float(t) for t in thresholds],
            "target_marginal_precision": target, "tp": 0.0, "fp": 0.0, "precision": None,
            "marginal_precision_left": None, "marginal_precision_right": None,
            "volume": 0.0, "unrated": 0.0, "coverage": None,
            "rated_positives": 0.0, "rated_negatives": 0.0,
            "status": "ok", "fallback_group": None, "point_status": "ok", "reason": None,
            "max_unrated_share": 0.0, "pane_index": 0,
            "run_id": "day-0-by-hand", "config_digest": "by-hand",
        })
    pq.write_table(records_to_table(records, "operating_point.json"), path)
    return str(path)


@dataclass
class Day:
    day: int
    utility: float
    optimum: float
    start_utility: float
    rated: int
    audited: int
    unflagged: int
    thresholds: dict = field(default_factory=dict)
    published: str = ""
    oracle: float = float("nan")
    population: float = float("nan")
    seconds: float = 0.0
    accounting: dict = field(default_factory=dict)
    expected_audited: float = float("nan")  # sum of the unflagged rows' audit probabilities

    @property
    def ratio(self) -> float:
        return self.utility / self.optimum if self.optimum > 0 else float("nan")

    @property
    def oracle_ratio(self) -> float:
        """Utility / the window oracle's (the previous days' full-label optimum, applied)."""
        return self.utility / self.oracle if self.oracle > 0 else float("nan")

    @property
    def start_ratio(self) -> float:
        """Utility / that of the starting thresholds on the same day."""
        return self.utility / self.start_utility if self.start_utility > 0 else float("nan")

    @property
    def population_ratio(self) -> float:
        return self.utility / self.population if self.population > 0 else float("nan")


def fmt_t(t) -> str:
    if isinstance(t, str):
        return t
    return "(" + ",".join("inf" if not math.isfinite(x) else f"{x:.3f}" for x in t) + ")"


# ----------------------------------------------------------------------------- the loop
def audit_salt(seed: int, day: int) -> str:
    """The audit salt of a day of a loop: one per seed and day, so that loops of different
    seeds draw independent audits (the items of a day have the same ids in every seed; with a
    salt per day only, every seed drew the same uniforms and the seeds' audited counts erred
    the same way)."""
    return f"s{seed}-day-{day:02d}"


def run_loop(args, root: Path, *, name: str, start, audit: bool, drift: bool,
             seed: int | None = None, family: str = "spread", thin: bool = False) -> list[Day]:
    seed = args.seed if seed is None else seed
    config = make_config(args, audit, thin)
    slope = args.target / (1 - args.target)
    root.mkdir(parents=True)
    current = write_start_points(root / "start_operating_points.parquet", start, args.target)
    rated_paths: list[str] = []
    rated_counts: list[int] = []
    history: list = []  # (groups, scores, labels) per day, for the window oracle
    audited_rated: list[int] = []
    out: list[Day] = []
    print(f"\n== {name}: start {fmt_t(start)}, audit {'on' if audit else 'off'}"
          + (f", drift -{args.drift_logit} logit on positives from day {args.drift_day}"
             if drift else ""))
    print(f"{'day':>3} {'utility':>9} {'optimum':>9} {'ratio':>6} {'orc/opt':>7} {'u/orc':>6} "
          f"{'u/start':>7} "
          f"{'pop_opt':>9} {'u/pop':>6} {'start_u':>9} "
          f"{'rated':>6} {'audited':>7} {'audit%':>6}  thresholds in force "
          f"({', '.join(GROUPS)})  next  sec")
    for day in range(args.days):
        t0 = time.perf_counter()
        in_force = thresholds_of(current)
        g, ids, scores, y = population(args.rows_per_day, day, seed=seed,
                                       drift_day=args.drift_day if drift else None,
                                       drift_logit=args.drift_logit, family=family,
                                       prevalence=args.prevalence)
        day_dir = root / f"day-{day:02d}"
        day_dir.mkdir()
        scores_path = day_dir / "scores.parquet"
        pq.write_table(score_table(g, ids, scores), scores_path, row_group_size=250_000)
        run_decide(config.with_overrides({"audit.salt": audit_salt(seed, day)}, source="loop"),
                   str(scores_path), current, str(root / "decide"), beam_args=[],
                   run_id=f"day-{day:02d}")
        records = read_decisions(str(root / "decide")).to_pandas()
        records["item_id"] = records["item_id"].astype(np.int64)
        records = records.set_index("item_id").loc[ids]
        td = records["threshold_decision"].to_numpy(dtype=object)
        td = td == True  # noqa: E712 (null: not flagged)
        audited = records["audit"].to_numpy(dtype=bool)
        rated = td | audited
        # the rater: labels from the truth for flagged or audited rows, null otherwise
        label = pa.array(np.where(rated, y, False), mask=~rated, type=pa.bool_())
        p = records["audit_probability"].to_numpy(dtype=float) if audit else None
        if audit and args.figure and day == args.figure_day and not Path(args.figure).exists():
            write_figure(args, g, scores, y, td, audited, p,
                         reference_edges(config, scores, y), in_force)
        rated_path = day_dir / "rated.parquet"
        pq.write_table(score_table(g, ids, scores, label,
                                   None if p is None else pa.array(p, mask=np.isnan(p))),
                       rated_path, row_group_size=250_000)
        rated_paths.append(str(rated_path))
        window = rated_paths[-args.window:]
        rated_counts.append(int(rated.sum()))
        # recalibrate's audit.audited counts rated rows with p < 1: a stratum audited with
        # pi = 1 (a census, e.g. the default nearest lattice step) is rated with certainty
        audited_rated.append(int((audited & (p < 1)).sum()) if p is not None
                             else int(audited.sum()))
        published = "published"
        try:
            run_recalibrate(config, window, str(root / "recal"), beam_args=[],
                            run_id=f"day-{day:02d}", in_force=current)
        except PublishRefused as err:
            published = f"held: {str(err).splitlines()[0][:60]}"
        manifest = json.loads((root / "recal" / "runs" / f"day-{day:02d}" / "manifest.json")
                              .read_text())
        accounting = manifest["row_accounting"]
        # the pipeline's accounting must match the rater's: every rated row of the window used
        expected = {"read": args.rows_per_day * len(window),
                    "used": sum(rated_counts[-args.window:]), "dead_lettered": 0}
        got = {k: accounting.get(k) for k in expected}
        if audit:
            expected["audit.audited"] = sum(audited_rated[-args.window:])
            got["audit.audited"] = accounting.get("audit.audited", 0)
        if got != expected:
            raise AssertionError(f"day {day}: recalibrate accounting {got} != rater {expected}")
        points = (thresholds_of(str(root / "recal"))
                  if latest_run_id(str(root / "recal")) else in_force)
        oracle = (window_oracle(history[-args.window:], g, scores, y, config, args.target,
                                slope) if history else float("nan"))
        history.append((g, scores, y))
        row = Day(
            day=day,
            utility=utility_of(td, y, slope), oracle=oracle,
            population=population_optimum(day, g, scores, y, config, args, slope, drift, seed,
                                          family)[0],
            optimum=full_label_optimum(g, scores, y, config, args.target, slope),
            start_utility=utility_of(apply_thresholds(scores, start), y, slope),
            rated=int(rated.sum()), audited=int(audited.sum()), unflagged=int((~td).sum()),
            thresholds=in_force, published=published,
            seconds=time.perf_counter() - t0, accounting=accounting,
            expected_audited=(float(np.nansum(p[~td])) if p is not None else 0.0),
        )
        if latest_run_id(str(root / "recal")) is not None:
            current = str(root / "recal")  # else: nothing published yet, the start stays
        out.append(row)
        print(f"{day:>3} {row.utility:9.1f} {row.optimum:9.1f} {row.ratio:6.3f} "
              f"{row.oracle / row.optimum:7.3f} {row.oracle_ratio:6.3f} {row.start_ratio:7.3f} "
              f"{row.population:9.1f} "
              f"{row.population_ratio:6.3f} {row.start_utility:9.1f} {row.rated:6d} "
              f"{row.audited:7d} "
              f"{100 * row.audited / max(row.unflagged, 1):5.2f}%  "
              f"{' '.join(fmt_t(row.thresholds[gr]) for gr in GROUPS)}  "
              f"{' '.join(fmt_t(points[gr]) for gr in GROUPS)}"
              f"{'' if published == 'published' else ' ' + published}  {row.seconds:.1f}")
    return out


def write_figure(args, g, scores, y, flagged, audited, p, edges, in_force) -> None:
    """The day's PN frontier of one group three ways: audit-weighted (flagged + audited rows,
    Horvitz–Thompson), rated only (flagged rows), and all labels (the truth)."""
    k = GROUPS.index(args.figure_group)
    sel = g == k
    rated = (flagged | audited)[sel]
    labels = np.where(rated, y[sel], None).astype(object)
    grids = {
        "audit-weighted": ThresholdGrid.from_scores(scores[sel], labels, edges,
                                                    audit_probabilities=p[sel]),
        "rated only": ThresholdGrid.from_scores(scores[sel][flagged[sel]],
                                                y[sel][flagged[sel]], edges),
        "all labels": ThresholdGrid.from_scores(scores[sel], y[sel], edges),
    }
    force = in_force[args.figure_group]
    plot_audit_pn_curves(
        grids, target=resolve_target(args.target), in_force=None if force == "null" else force,
        path=args.figure,
        title=f"{args.figure_group}, day {args.figure_day}: PN frontier estimated from "
              f"{int(audited[sel].sum())} audited + {int(flagged[sel].sum())} flagged rows")
    print(f"figure: {args.figure}")


def thresholds_of(source: str) -> dict:
    """Per group, the thresholds decide applies from ``source`` (display only; the utility is
    counted from the decision records themselves)."""
    records, _ = load_operating_points(source)
    by_group = {r["group"]: r for r in records if r["method"] == "hull"}
    out = {}
    for group in GROUPS:
        r = by_group.get(group, by_group.get("__all__"))
        if r is None or r["status"] == "insufficient_data" or r["thresholds"] is None:
            out[group] = "null"  # decide gives null threshold decisions: nothing flagged
        else:
            out[group] = tuple(float(t) for t in r["thresholds"])
    return out


# ----------------------------------------------------------------------------- summary
def targets(results: dict, args) -> None:
    """The audit loop's targets per family and scenario with PASS or FAIL
    (:func:`loop_figures.print_targets`; scenario ``audit`` is reported as ``steady``), and
    for loops without audit the days below the starting thresholds' utility."""
    import loop_figures

    loops = []
    for (family, scenario, start_name, seed), days in results.items():
        if scenario == "no_audit":
            below = [d.day for d in days if d.utility < d.start_utility]
            print(f"{family} / no_audit / {start_name} / seed {seed}: days below the start's "
                  f"utility {below or 'none'}")
            continue
        drift = scenario in ("drift", "thin_audit")
        config = make_config(args, True, scenario == "thin_audit")
        fig = loop_figures.figures(days, check_day=args.check_day,
                                   drift_day=args.drift_day if drift else None)
        budget = (float(config.audit.budget_share) if config.audit.design == "auto"
                  else None)
        loops.append(loop_figures.LoopResult(
            family, "steady" if scenario == "audit" else scenario, start_name, seed, fig,
            budget))
    if loops:
        print("\n== targets")
        loop_figures.print_targets(loops, check_day=args.check_day)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows-per-day", type=int, default=60_000)
    parser.add_argument("--days", type=int, default=15)
    parser.add_argument("--window", type=int, default=7, help="recalibrate over the last N days")
    parser.add_argument("--target", type=float, default=0.3, help="target marginal precision")
    parser.add_argument("--edges", choices=("auto", "uniform"), default="auto",
                        help="config grid.edges (default: the product's, auto, carried from "
                        "the published run)")
    parser.add_argument("--bins", type=int, default=None,
                        help="config grid.bins (default: the product's, 128 candidates for "
                        "auto edges, 64 for uniform)")
    parser.add_argument("--budget-share", type=float, default=None,
                        help="audit.budget_share (default: the schema's audit defaults; with "
                        "any audit option given the others default to 0.01, floor 0.001, "
                        "strata edges 0.3 0.6, weights 0.5 3 10)")
    parser.add_argument("--audit-floor", type=float, default=None)
    parser.add_argument("--strata-edges", type=float, nargs="*", default=None)
    parser.add_argument("--strata-weights", type=float, nargs="*", default=None)
    parser.add_argument("--strata-steps", type=int, nargs="*", default=None,
                        help="audit.strata.relative_to point with these lattice steps (weights: "
                        "--strata-weights, far to near; --strata-edges ignored); also for "
                        "the thin_audit scenario")
    parser.add_argument("--strata-shares", type=float, nargs="*", default=None,
                        help="audit.strata.relative_to point with these shares of each group's "
                        "unflagged rows nearest the point (weights: --strata-weights, far to "
                        "near); also for the thin_audit scenario")
    parser.add_argument("--audit-defaults", action="store_true",
                        help="the schema's audit defaults (only enabled set; thin_audit: "
                        "budget_share 0.0025, floor 0.0005); the other --audit/--strata "
                        "options are ignored")
    parser.add_argument("--drift-day", type=int, default=7)
    parser.add_argument("--drift-logit", type=float, default=1.0)
    parser.add_argument("--min-rated-positives", type=float, default=None,
                        help="config min_rated.positives (default: the schema's)")
    parser.add_argument("--min-rated-negatives", type=float, default=None,
                        help="config min_rated.negatives (default: the schema's)")
    parser.add_argument("--guard", choices=("off", "example"), default="off",
                        help="off: publish {max_threshold_change: null, min_rated: 0} (also the "
                        "schema's defaults); example: schemas/example_config.yaml's {0.2, 50}; a "
                        "held run keeps the points in force")
    parser.add_argument("--min-gain-z", type=float, default=None,
                        help="config in_force.min_gain_z: move only when the estimated gain "
                        "exceeds this many bootstrap standard errors (default: always move)")
    parser.add_argument("--evidence-z", default="default",
                        help="in_force.evidence_z: 'default' (the config default, 1.645), "
                             "'none' (off: always take the optimum) or a number")
    parser.add_argument("--bootstrap-replicates", type=int, default=0,
                        help="config bootstrap.replicates (>= 2 with --min-gain-z)")
    parser.add_argument("--figure", default=None, metavar="PNG",
                        help="write the PN frontier (audit-weighted vs rated only vs all labels) "
                        "of --figure-group on --figure-day of the first audit loop to this file")
    parser.add_argument("--figure-day", type=int, default=3)
    parser.add_argument("--figure-group", choices=GROUPS, default="market_c")
    parser.add_argument("--check-day", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="*", default=None,
                        help="run every loop once per seed (default: --seed only)")
    parser.add_argument("--families", default="spread",
                        help="comma-separated score families: spread (sigmoid of a latent "
                        "score), concentrated (negatives beta(0.5, 30), positives beta(1.5, "
                        "2.5); starts at 0.5 instead of 0.9)")
    parser.add_argument("--prevalence", type=float, nargs=3, default=list(PREVALENCE),
                        help="prevalence of the 3 groups (e.g. 0.002 0.003 "
                        "0.005)")
    parser.add_argument("--audit-design", choices=("fixed", "auto"), default=None,
                        help="config audit.design (default: the config default); auto sizes "
                        "each day's design from the previous day's counts")
    parser.add_argument("--unseen-rows", type=float, default=None,
                        help="config in_force.unseen_rows (default: the config default, 1)")
    parser.add_argument("--reference-factor", type=int, default=10,
                        help="the population optimum is fitted on this many times the day's rows")
    parser.add_argument("--scenarios", default="audit,no_audit,drift",
                        help="comma-separated: audit, no_audit, drift (audit on), thin_audit "
                        "(drift with a thin 0.25%% audit: budget_share 0.0025, floor "
                        "0.0005, strata [0.05, 0.3] weights [0.5, 3, 10])")
    parser.add_argument("--starts", default="high,image-off")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    print(f"machine: {describe()}")
    print(f"population: {args.rows_per_day:,} rows/day, groups {GROUPS} prevalence "
          f"{args.prevalence}, "
          f"separation {SEPARATION}, correlation {CORRELATION}; target marginal precision "
          f"{args.target} (r = {args.target / (1 - args.target):.4f}); grid "
          f"{make_config(args, False).raw['grid']}; "
          f"window {args.window} days; audit: {make_config(args, True).raw['audit']}; "
          f"min_rated {make_config(args, False).raw['min_rated']}; in_force "
          f"{make_config(args, False).raw['in_force']}; bootstrap replicates "
          f"{args.bootstrap_replicates}; "
          f"publish guard {make_config(args, False).raw['publish']} ({args.guard})")
    print(f"families {args.families}; seeds {args.seeds or [args.seed]}; prevalence "
          f"{args.prevalence}; thin_audit design {THIN_AUDIT}")
    results = {}
    start_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
        for family in args.families.split(","):
            starts = starts_of(family)
            for seed in args.seeds or [args.seed]:
                for scenario in args.scenarios.split(","):
                    for start_name in args.starts.split(","):
                        results[(family, scenario, start_name, seed)] = run_loop(
                            args, Path(tmp) / f"{family}-{seed}-{scenario}-{start_name}",
                            name=f"{family} / seed {seed} / {scenario} / {start_name}",
                            start=starts[start_name], audit=scenario != "no_audit",
                            drift=scenario in ("drift", "thin_audit"), seed=seed,
                            family=family, thin=scenario == "thin_audit")
    targets(results, args)
    print(f"total wall {time.perf_counter() - start_all:.0f} s; load average at end "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
