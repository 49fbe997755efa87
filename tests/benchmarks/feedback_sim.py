"""The closed loop of ``bench_feedback_loop.py`` with the library alone: one day in ~0.3 s.

``bench_feedback_loop.run_loop`` runs the real pipelines (``run_decide``, ``run_recalibrate``
on the FnApiRunner) day by day, ~15 s a day. :func:`simulate_loop` reproduces each day with
the ``costlib`` calls those pipelines make, on the same generated population
(``bench_feedback_loop.population``) and the same :class:`~costlib_pipelines.config.RunConfig`
(``bench_feedback_loop.make_config``), so that settings can be compared in seconds:

1. **decide** -- every group is decided with its thresholds in force (the ``"__all__"``
   thresholds for a group without a usable record; none when neither is usable: nothing
   flagged). A row is flagged iff ``max_j [s_j >= t_j]`` (rule ``any``). Audit sample:
   :func:`costlib.audit._sampling.audit_sample` with the run id ``day-NN`` as salt (the
   decide default), rows of groups without a point counted as unflagged; the design is the
   configured one (``audit.design: fixed``) or, with ``auto``,
   :func:`costlib.audit._neyman.neyman_design` on the previous day's unflagged rows per
   stratum with spreads ``weights[h] * rms_h`` from the audited labels per stratum of the
   recalibration being applied (what ``costlib_pipelines.decide.audit_sizing.sized_design`` reads
   from the two manifests). Relative strata (``audit.strata.relative_to: point``): each row's
   depth below its group's thresholds on the lattice the points were published on
   (``costlib.audit._strata``); share cutoffs per group from the previous day's rows per
   lattice cell re-based to today's point, and the auto design sized on those rows re-cut by
   today's cutoffs (weights only), as ``costlib decide`` does. Audit disabled: the floor audit
   of groups without a point only.
2. **rate** -- flagged and audited rows get their true label, the others none.
3. **recalibrate** -- per group, ``ThresholdGrid.from_scores`` over the rated streams of the
   last ``window`` days with the records' ``audit_probability`` (``w / π`` weights, design
   channels), on the config's edges with every threshold in force added
   (:func:`costlib.thresholds._edges.with_thresholds`, as ``in_force.add_to_edges``), then
   :func:`costlib.thresholds._recalibration.recalibrate_grids` with the config's methods, target,
   rule, ``min_rated``, fallback, ``optimize_options`` and ``in_force`` settings (``evidence_z``,
   ``unseen_rows``; the all-groups grid is the sum, as the pipeline's). The published
   thresholds are the decision method's point per group, null for ``insufficient_data`` or
   an infeasible point (as ``costlib decide`` reads them).

The references (window oracle, starting point, same-day optimum) are those of
``bench_feedback_loop``; :func:`figures` computes issue 21's four target figures of a loop.
``tests/test_feedback_sim.py`` checks that the published thresholds equal the pipeline loop's
day by day on a small configuration.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_feedback_loop as loop

from costlib.audit._neyman import gain_spreads, neyman_design
from costlib.audit._sampling import AuditDesign, audit_sample
from costlib.audit._strata import (
    cutoff_strata,
    depth_counts_from_cells,
    flagged_rows,
    lattice_cells,
    lattice_depths,
    promote_proposed,
    proposal_recount,
    share_cutoffs,
    stratum_counts,
)
from costlib.thresholds._edges import decision_edges_from_sketch, with_thresholds
from costlib.thresholds._grid import ThresholdGrid, lattice_counts
from costlib.thresholds._lattice_regions import flagged_by_one, one_sided
from costlib.thresholds._move_evidence import segment_cells
from costlib.thresholds._operating_point import point_at
from costlib.thresholds._optimize import optimize
from costlib.thresholds._rows import apply_audit
from costlib.thresholds._score_sketch import EdgeSketch
from costlib.thresholds._recalibration import (
    ALL_GROUPS,
    PROPOSED,
    GroupResult,
    recalibrate_grids,
)
from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.audit_sizing import first_run_design

GROUPS = loop.GROUPS
#: Experimental switches (bench_feedback_sim.py sets them per configuration).
EXPERIMENT: dict[str, Any] = {}
#: The window's rows as the last recalibration saw them (group index, scores, labels (NaN:
#: unrated), audit probabilities; references, not copies), for rule variants that need more
#: than the grids (:func:`window_rows` selects a group's).
WINDOW_ROWS: dict[str, tuple[np.ndarray, ...]] = {}


def window_rows(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(scores, labels, audit probabilities)`` of group ``name`` (``ALL_GROUPS``: every row)
    in the last recalibration's window; None without audit probabilities."""
    if "window" not in WINDOW_ROWS:
        return None
    g, scores, labels, p = WINDOW_ROWS["window"]
    if name == ALL_GROUPS:
        return scores, labels, p
    sel = g == GROUPS.index(name)
    return scores[sel], labels[sel], p[sel]
CLASSIFIERS = loop.CLASSIFIERS

#: ``recalibrate(config, grids, in_force) -> results``: the optimiser call; the default is the
#: pipeline's (:func:`pipeline_recalibrate`). Experiments pass their own.
Recalibrate = Callable[[RunConfig, dict[str, ThresholdGrid], dict[str, Any]],
                       Mapping[str, GroupResult]]


def pipeline_recalibrate(config: RunConfig, grids: dict[str, ThresholdGrid],
                         in_force: dict[str, Any]) -> Mapping[str, GroupResult]:
    """What ``costlib recalibrate`` computes per group (``optimizing.optimize_one`` on every
    group's grid and the all-groups sum, then ``apply_fallback``), without a bootstrap."""
    settings = config.in_force
    return recalibrate_grids(
        grids, methods=config.methods, target=config.target, rule=config.rule,
        min_positives=config.min_positives, min_negatives=config.min_negatives,
        fallback=config.fallback, options=config.optimize_options,
        in_force=in_force, min_gain_z=None, evidence_z=settings["evidence_z"],
        unseen_rows=settings["unseen_rows"], census_review=settings["census_review"],
        one_row_margin=settings["one_row_margin"],
        switch_on_evidence=settings["switch_on_evidence"])


@dataclass
class Published:
    """Thresholds per group as ``costlib decide`` applies them (None: null decisions)."""

    by_group: dict[str, tuple[float, ...] | None]

    def get(self, group: str) -> tuple[float, ...] | None:
        if group in self.by_group and self.by_group[group] is not None:
            return self.by_group[group]
        if group in self.by_group:  # a record without usable thresholds: null decisions
            return None
        return self.by_group.get(ALL_GROUPS)

    def in_force(self, group: str) -> tuple[float, ...] | None:
        """What recalibrate reads as the group's thresholds in force
        (``costlib_pipelines.recalibrate.in_force.InForce.get``: groups without usable thresholds
        take the ``"__all__"`` ones)."""
        t = self.by_group.get(group)
        return t if t is not None else self.by_group.get(ALL_GROUPS)

    def display(self, group: str):
        t = self.get(group)
        return "null" if t is None else t


def published_from(results: Mapping[str, GroupResult], method: str) -> Published:
    """The decision method's thresholds per group of a recalibration (null: no point,
    ``insufficient_data`` or an infeasible point)."""
    out: dict[str, tuple[float, ...] | None] = {}
    for name, res in results.items():
        point = res.points.get(method)
        if res.status == "insufficient_data" or point is None or point.status == "infeasible":
            out[name] = None
        else:
            out[name] = tuple(float(t) for t in point.thresholds)
    return Published(out)


def day_sketches(scores: np.ndarray, labels: np.ndarray,
                 p: np.ndarray | None) -> list[EdgeSketch]:
    """Each classifier's edge sketch of one rated day's rows as they enter the grids (NaN
    labels unrated; with audit probabilities the Horvitz–Thompson weights and represented rows
    left out), as ``costlib recalibrate`` sketches every batch; sums over days are exact."""
    unrated = np.isnan(labels)
    s, y, w, gaps, _, _ = apply_audit(scores, labels == 1, None,
                                      unrated if unrated.any() else None, p)
    return [EdgeSketch.from_rows(s[:, j], y, w, gaps) for j in range(s.shape[1])]


def lattice_of(config: RunConfig, published: Published,
               carried: list[EdgeSketch] | None,
               window: Sequence[RatedDay] | None = None) -> list[np.ndarray]:
    """A recalibration's edges: the config's fixed edges, or with ``grid.edges: auto`` those
    placed from the published run's sketch ``carried`` (a first pass over ``window``'s rows
    when nothing was published, ``auto_edges_from: this_run``); with every finite threshold in
    force added (``add_to_edges``)."""
    edges = config.fixed_edges()
    if edges is None:
        if config.grid["auto_edges_from"] != "previous_run" or carried is None:
            assert window is not None, "a first pass needs the window's rows"
            carried = window_sketches(window)
        edges = [decision_edges_from_sketch(sketch, config.n_edges) for sketch in carried]
    if not config.in_force["add_to_edges"]:
        return edges
    table = np.asarray([t for t in published.by_group.values() if t is not None],
                       dtype=np.float64).reshape(-1, len(CLASSIFIERS))
    if table.size == 0:
        return edges
    return [with_thresholds(edges[j], table[:, j]) for j in range(len(CLASSIFIERS))]


def window_sketches(window: Sequence[RatedDay]) -> list[EdgeSketch]:
    """The summed sketches of a window's days (what a run writes to ``edge_sketch.parquet``)."""
    return [EdgeSketch.sum(d.sketches[j] for d in window) for j in range(len(CLASSIFIERS))]


def sized_design(config: RunConfig, previous_unflagged: np.ndarray | None,
                 audited_labels: tuple[np.ndarray, np.ndarray] | None) -> AuditDesign:
    """The decide run's audit design (``costlib_pipelines.decide.audit_sizing.sized_design``)."""
    configured = config.audit_design()
    if config.audit["design"] != "auto":
        return configured
    if previous_unflagged is None or previous_unflagged.sum() == 0:
        return first_run_design(configured)
    weights = np.asarray(configured.weights, dtype=np.float64)
    if audited_labels is None or audited_labels[0].sum() + audited_labels[1].sum() == 0:
        spreads = weights
    else:
        spreads = weights * gain_spreads(audited_labels[0], audited_labels[1],
                                         float(config.target.slope))
    try:
        design, _ = neyman_design(previous_unflagged.astype(np.float64), spreads,
                                  configured.edges, configured.budget_share, configured.floor)
    except ValueError:
        return first_run_design(configured)
    return design


def proposals_from(results: Mapping[str, GroupResult], method: str,
                   published: Published) -> np.ndarray:
    """The method's own point per group (rows: ``GROUPS``) where the evidence rule published
    other thresholds (``details["proposed_thresholds"]``, the records' ``proposed_thresholds``);
    ``+inf`` rows (flag nothing) elsewhere and for groups without a usable point in
    ``published`` (decide reads no proposal for them)."""
    out = np.full((len(GROUPS), len(CLASSIFIERS)), np.inf)
    for k, name in enumerate(GROUPS):
        res = results.get(name)
        point = None if res is None else res.points.get(method)
        if point is not None and point.details.get(PROPOSED) is not None and \
                published.get(name) is not None:
            out[k] = point.details[PROPOSED]
    return out


def proposal_moves(config: RunConfig, previous_cells: dict, proposals: np.ndarray,
                   table: np.ndarray, lattice: list[np.ndarray], cutoffs: np.ndarray
                   ) -> np.ndarray:
    """Change of the previous day's rows per stratum when the rows of each group's proposal are
    audited in at least ``audit.strata.proposal_stratum`` (what ``costlib decide``'s
    ``relative_cutoffs`` adds to the counts an auto design is sized on)."""
    configured = config.audit_design()
    band = config.proposal_stratum
    out = np.zeros(configured.n_strata)
    if band is None:
        return out
    for k in range(len(GROUPS)):
        found, count = previous_cells[k]
        out += proposal_recount(found, count, previous_cells["lattice"], table[k], lattice,
                                proposals[k], cutoffs[k], configured.n_strata, band,
                                config.rule)[0]
    return out


def relative_cutoffs(config: RunConfig, previous: dict[int, np.ndarray] | None) -> np.ndarray:
    """Depth cutoffs per group (rows: ``GROUPS``): ``strata.steps``, or ``strata.shares`` of
    the previous day's rows per group below today's point (``previous``: rows per depth, from
    their lattice cells; none: ``inf``, a uniform audit)."""
    strata = config.audit["strata"]
    if strata.get("shares"):
        return np.array([share_cutoffs(previous[k] if previous else [], strata["shares"])
                         for k in range(len(GROUPS))])
    return np.tile(np.asarray(strata["steps"], dtype=np.float64), (len(GROUPS), 1))


@dataclass
class RatedDay:
    """One day's rated stream (what the rater returns) and its audit accounting."""

    g: np.ndarray
    scores: np.ndarray
    labels: np.ndarray  # float: 1 / 0 / NaN (unrated)
    p: np.ndarray | None  # audit_probability (NaN: null); None when audit is disabled
    audited: np.ndarray
    stratum: np.ndarray | None = None  # audit stratum of each row at decide time
    sketches: list[EdgeSketch] = field(default_factory=list)  # auto edges: day_sketches


def simulate_loop(args: argparse.Namespace, *, start, audit: bool, drift: bool,
                  seed: int | None = None, family: str = "spread", thin: bool = False,
                  config: RunConfig | None = None, recalibrate: Recalibrate | None = None,
                  verbose: bool = False,
                  observe: Callable[[RatedDay], None] | None = None) -> list[loop.Day]:
    """One closed loop, as ``bench_feedback_loop.run_loop(args, ...)`` runs it on the
    pipelines; returns the same per-day records (``thresholds`` = in force that day,
    ``published`` = the status counts of the day's recalibration). ``observe`` is called with
    each day's rated stream (its audit probabilities and strata) as it is made."""
    seed = args.seed if seed is None else seed
    config = loop.make_config(args, audit, thin) if config is None else config
    recalibrate = pipeline_recalibrate if recalibrate is None else recalibrate
    auto_edges = config.fixed_edges() is None
    carried: list[EdgeSketch] | None = None  # the published run's edge sketch
    slope = args.target / (1 - args.target)
    method = config.decision_method
    start_t = None if start is None else tuple(float(t) for t in start)
    current = Published({**dict.fromkeys(GROUPS, start_t), ALL_GROUPS: start_t})
    start_flags = start_t if start_t is not None else (math.inf,) * len(CLASSIFIERS)
    floor_design = AuditDesign(edges=(), weights=(1.0,), floor=float(config.audit["floor"]),
                               budget_share=float(config.audit["floor"]))
    configured = config.audit_design()
    rated_days: list[RatedDay] = []
    history: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (g, scores, y) per day
    previous_unflagged: np.ndarray | None = None
    audited_labels: tuple[np.ndarray, np.ndarray] | None = None
    decide_lattice: list[np.ndarray] | None = None
    previous_cells: dict | None = None
    out: list[loop.Day] = []
    proposals = np.full((len(GROUPS), len(CLASSIFIERS)), np.inf)
    for day in range(args.days):
        t0 = time.perf_counter()
        g, ids, scores, y = loop.population(args.rows_per_day, day, seed=seed,
                                            drift_day=args.drift_day if drift else None,
                                            drift_logit=args.drift_logit, family=family,
                                            prevalence=args.prevalence)
        # ---- decide
        table = np.full((len(GROUPS), len(CLASSIFIERS)), np.inf)
        usable = np.zeros(len(GROUPS), dtype=bool)
        for k, name in enumerate(GROUPS):
            t = current.get(name)
            if t is not None:
                table[k], usable[k] = t, True
        flagged = (scores >= table[g]).any(axis=1) & usable[g]
        no_point = ~usable[g]
        salt = loop.audit_salt(seed, day)
        if audit:
            if config.relative_strata:  # depth below the point, on the publishing lattice
                lattice = decide_lattice
                if lattice is None and config.fixed_edges() is not None:  # points by hand
                    lattice = lattice_of(config, current, None)
                depths_now = None
                if previous_cells is not None:  # yesterday's rows below today's point
                    depths_now = {k: depth_counts_from_cells(*previous_cells[k], previous_cells[
                        "lattice"], table[k], lattice, config.rule) for k in range(len(GROUPS))}
                cutoffs_today = relative_cutoffs(config, depths_now)
                if depths_now is not None and config.audit["strata"].get("shares"):
                    previous_unflagged = sum(stratum_counts(depths_now[k], cutoffs_today[k],
                                                            configured.n_strata)
                                             for k in range(len(GROUPS)))
                    previous_unflagged = previous_unflagged + proposal_moves(
                        config, previous_cells, proposals, table, lattice, cutoffs_today)
            design = sized_design(config, previous_unflagged, audited_labels)
            bands = scores
            if config.relative_strata:
                depth = (np.full(len(scores), np.inf) if lattice is None  # no lattice yet
                         else lattice_depths(scores, table[g], lattice, config.rule))
                strata_now = cutoff_strata(depth, cutoffs_today[g])
                if config.proposal_stratum is not None:
                    strata_now = promote_proposed(
                        strata_now, flagged_rows(scores, proposals[g], config.rule),
                        config.proposal_stratum)
                bands = strata_now[:, None].astype(np.float64)
                previous_cells = None
                if lattice is not None:  # rows per lattice cell (decide's audit_cells.json)
                    cells = lattice_cells(scores, lattice)
                    previous_cells = {"lattice": lattice}
                    for k in range(len(GROUPS)):
                        found, count = np.unique(cells[g == k], axis=0, return_counts=True)
                        previous_cells[k] = (found, count)
            sample = audit_sample(ids, bands, flagged, salt, design)
            audited, p = sample.audit, sample.audit_probability
            previous_unflagged = np.bincount(sample.stratum[~flagged],
                                             minlength=configured.n_strata)
        elif no_point.any():
            sample = audit_sample(ids, scores, ~no_point, salt, floor_design)
            audited, p = sample.audit, None
        else:
            audited, p = np.zeros(len(y), dtype=bool), None
        rated = flagged | audited
        labels = np.where(rated, y.astype(np.float64), np.nan)
        rated_days.append(RatedDay(g, scores, labels, p, audited,
                                   sample.stratum if audit else None,
                                   day_sketches(scores, labels, p) if auto_edges else []))
        if observe is not None:
            observe(rated_days[-1])
        # ---- recalibrate over the window
        window = rated_days[-args.window:]
        edges = lattice_of(config, current, carried, window)
        if auto_edges:  # this run's sketch, the next run's carried edges
            carried = window_sketches(window)
        w_g = np.concatenate([d.g for d in window])
        w_s = np.concatenate([d.scores for d in window])
        w_y = np.concatenate([d.labels for d in window])
        w_p = None if not audit else np.concatenate([d.p for d in window])
        grids = {}
        for k, name in enumerate(GROUPS):
            sel = w_g == k
            grids[name] = ThresholdGrid.from_scores(
                w_s[sel], w_y[sel], edges, names=list(CLASSIFIERS),
                audit_probabilities=None if w_p is None else w_p[sel])
        in_force = {name: current.in_force(name) for name in [*GROUPS, ALL_GROUPS]}
        WINDOW_ROWS.clear()
        if w_p is not None:
            WINDOW_ROWS["window"] = (w_g, w_s, w_y, w_p)
        results = recalibrate(config, grids, in_force)
        statuses = {}
        for res in results.values():
            statuses[res.status] = statuses.get(res.status, 0) + 1
        decide_lattice = edges  # the lattice of the points published today
        if audit and config.relative_strata and EXPERIMENT.get("relative_label_spreads"):
            w_a = np.concatenate([d.audited for d in window])
            strata = np.concatenate([d.stratum for d in window])[w_a]
            pos = w_y[w_a] == 1
            audited_labels = (
                np.bincount(strata[pos], minlength=configured.n_strata).astype(np.float64),
                np.bincount(strata[~pos], minlength=configured.n_strata).astype(np.float64))
        if audit and not config.relative_strata:  # audited labels per stratum (auto designs)
            w_a = np.concatenate([d.audited for d in window])
            strata = configured.strata(w_s[w_a])
            pos = w_y[w_a] == 1
            audited_labels = (
                np.bincount(strata[pos], minlength=configured.n_strata).astype(np.float64),
                np.bincount(strata[~pos], minlength=configured.n_strata).astype(np.float64))
        # ---- references (as bench_feedback_loop)
        oracle = float("nan")
        if history:
            oracle = loop.window_oracle(history[-args.window:], g, scores, y, config,
                                        args.target, slope)
        history = [*history, (g, scores, y)][-args.window:]
        optimum = 0.0
        if getattr(args, "same_day_optimum", False):
            optimum = loop.full_label_optimum(g, scores, y, config, args.target, slope)
        row = loop.Day(
            day=day, utility=loop.utility_of(flagged, y, slope), oracle=oracle,
            optimum=optimum,
            start_utility=loop.utility_of(loop.apply_thresholds(scores, start_flags), y, slope),
            rated=int(rated.sum()), audited=int(audited.sum()),
            unflagged=int((~flagged).sum()),
            thresholds={name: current.display(name) for name in GROUPS},
            published=" ".join(f"{k}:{v}" for k, v in sorted(statuses.items())),
            seconds=time.perf_counter() - t0,
            expected_audited=float(np.nansum(p[~flagged])) if p is not None else 0.0)
        out.append(row)
        current = published_from(results, method)
        proposals = proposals_from(results, method, current)
        if verbose:
            print(f"{day:>3} u/orc {row.oracle_ratio:6.3f} u/start {row.start_ratio:6.3f} "
                  f"audited {row.audited:5d} {100 * row.audited / max(row.unflagged, 1):5.2f}% "
                  f"{' '.join(loop.fmt_t(row.thresholds[n]) for n in GROUPS)} "
                  f"[{row.published}] {row.seconds:.2f}s")
    return out


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
    """Issue 21's target figures of one loop.

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
    ``audit_deviation``:
    audited / expected - 1 over the loop; ``share``: audited / unflagged rows over the loop;
    ``expected_share``.
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

    def meets(self, budget: float | None = None) -> dict[str, bool]:
        out = {"late>=0.97": self.late_mean >= 0.97, "start>=0.9": self.min_start >= 0.9,
               "recovery<=5": self.recovery is not None and self.recovery <= 5}
        out["audit+-10%"] = abs(self.audit_deviation) <= 0.10 and (
            budget is None or abs(self.share / budget - 1) <= 0.10)
        return out


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
        losing_days=sum(d.utility < 0 for d in days))


def nearest_band(rated: Sequence[RatedDay], stratum: int) -> dict[str, float]:
    """What the nearest audit stratum ``stratum`` cost over days 1+ of a loop (day 0 has no
    previous run, hence no relative strata): :class:`Figures` ``band_rows``, ``band_share``,
    ``band_min_pi``."""
    rows, shares, pis = [], [], []
    for day in rated[1:]:
        if day.stratum is None or day.p is None:
            continue
        band = day.stratum == stratum
        audited = int(day.audited.sum())
        rows.append(int((band & day.audited).sum()))
        shares.append(rows[-1] / audited if audited else 0.0)
        if band.any():
            pis.append(float(np.nanmin(day.p[band])))
    if not rows:
        return {}
    return {"band_rows": float(np.median(rows)), "band_share": float(np.median(shares)),
            "band_min_pi": min(pis) if pis else math.nan}


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
    """How far issue 21's per-loop targets are a test of the window oracle's own noise.

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
    population = [math.nan] + [
        loop.population_optimum(d, *pops[d][:1], *pops[d][2:], config, ref, slope, drift, seed,
                                family)[0] for d in range(1, args.days)]
    return ReferenceNoise(out, summary(population, o), twin_starts, min_start(population))


#: Rule variants by name (``bench_feedback_sim.py`` configurations refer to them). A variant
#: tried and dropped: "the largest gain whose lower bound is above -0.05 x the objective in
#: force" published the same thresholds as ``lower_bound_move`` (docs/audit.md, issue 21).
RULES: dict[str, Recalibrate] = {}



def _with_candidates(config: RunConfig, grids: dict[str, ThresholdGrid],
                     in_force: dict[str, Any],
                     candidates: Callable[[ThresholdGrid, Any, Any], np.ndarray]
                     ) -> Mapping[str, GroupResult]:
    """The pipeline's recalibration with ``lower_bound_move`` searching ``candidates(grid,
    chosen, kept)`` (cells, shape (m, k)) instead of the method's curve. The optimiser's module
    looks ``lower_bound_move`` up by name, so it is swapped there for the call."""
    import dataclasses

    import costlib.thresholds._recalibration as recal
    original = recal.lower_bound_move

    def searching(grid, chosen, in_force_t, **kwargs):
        kept = point_at(grid, in_force_t, target=kwargs["target"], rule=kwargs["rule"],
                        method=kwargs["method"], **(kwargs.get("options") or {}))
        cells = candidates(grid, chosen, kept)
        return original(grid, dataclasses.replace(chosen, path=cells), in_force_t, **kwargs)

    recal.lower_bound_move = searching
    try:
        return pipeline_recalibrate(config, grids, in_force)
    finally:
        recal.lower_bound_move = original


def _lattice_candidates(config: RunConfig, grids: dict[str, ThresholdGrid],
                        in_force: dict[str, Any]) -> Mapping[str, GroupResult]:
    """Experiment (dropped, docs/audit.md "Issue 21 on 30 seeds"): the lower-bound move searches
    every cell of the lattice, not only the method's curve."""
    return _with_candidates(config, grids, in_force, lambda grid, chosen, kept: np.indices(
        grid.shape).reshape(grid.k, -1).T.astype(np.intp))


RULES["lattice"] = _lattice_candidates


def _region_lattices(scores: np.ndarray, edges: list[np.ndarray], rule: str,
                     parts: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """Lattice sums (every threshold tuple) of row weights: name -> (row mask, weights)."""
    out = {}
    for name, (mask, weights) in parts.items():
        grid = ThresholdGrid.from_scores(scores[mask], np.ones(int(mask.sum())), edges,
                                         weights=weights[mask])
        out[name] = lattice_counts(grid.pos, rule)
    return out


def _precision_bounds(region: dict[str, np.ndarray], alpha: float, *, upper: bool,
                      pseudo: float) -> np.ndarray:
    """Korn–Graubard bound on a region's precision from its audited rows: Clopper–Pearson on
    the Kish effective sample ``n = (Σ1/π)² / Σ1/π²`` with ``x = n p̂`` (Hájek p̂), plus
    ``pseudo`` rows of the adverse label; no audited row: 0 (lower) or 1 (upper)."""
    ht = region["pos"] + region["neg"]
    with np.errstate(divide="ignore", invalid="ignore"):
        phat = np.where(ht > 0, region["pos"] / np.where(ht > 0, ht, 1.0), 0.0)
        n = np.where(region["sq"] > 0, ht * ht / np.where(region["sq"] > 0, region["sq"], 1.0),
                     0.0)
    x = phat * n + (pseudo if upper else 0.0)
    n = n + pseudo
    if upper:
        return np.where(x < n, beta_dist.ppf(1 - alpha, x + 1, np.maximum(n - x, 1e-12)), 1.0)
    return np.where(x > 0, beta_dist.ppf(alpha, np.maximum(x, 1e-12), n - x + 1), 0.0)


def ratio_bound_gains(rows: tuple[np.ndarray, np.ndarray, np.ndarray], edges: list[np.ndarray],
                      index: Sequence[int], *, rule: str, slope: float, z: float,
                      pseudo: float = 1.0) -> np.ndarray:
    """Experiment (issue 21): a lower bound of every tuple's gain ``TP - r FP`` over the tuple
    ``index`` from *ratio* estimates instead of the Horvitz–Thompson one.

    Rows rated with certainty (``π = 1``) count exactly. The rows a tuple adds (or drops) with
    ``0 < π < 1`` are post-stratified by ``π`` (factor-2 bins); in each bin the precision of
    the added rows gets a one-sided lower bound (the dropped rows an upper one) from its audited
    rows (:func:`_precision_bounds`) and the bin contributes ``N (p_L (1 + r) - r)``, ``N`` its
    rows, so that one audited row weighs its share of ``N`` rather than ``1/π``. The bins'
    bounds are summed (conservative). Needs the rows (:func:`window_rows`): in the pipelines
    this would take four channels per probability bin in every grid."""
    scores, labels, p = rows
    alpha = float(norm.sf(z))
    rated = ~np.isnan(labels)
    ones = np.ones(len(p))
    census = rated & (p >= 1)
    exact = _region_lattices(scores, edges, rule, {
        "pos": (census & (labels == 1), ones), "neg": (census & (labels == 0), ones)})
    added, dropped = ({k: one_sided(v, index, rule)[side] for k, v in exact.items()}
                      for side in (0, 1))
    bound = (added["pos"] - slope * added["neg"]) - (dropped["pos"] - slope * dropped["neg"])
    sampled = (p > 0) & (p < 1)
    bins = np.floor(np.log2(np.clip(p, 1e-12, 1.0))).astype(int)
    for b in np.unique(bins[sampled]):
        in_bin = sampled & (bins == b)
        audited = in_bin & rated
        inverse = np.where(in_bin, 1.0 / np.where(in_bin, p, 1.0), 0.0)
        lattices = _region_lattices(scores, edges, rule, {
            "pos": (audited & (labels == 1), inverse), "neg": (audited & (labels == 0), inverse),
            "sq": (audited, inverse * inverse), "rows": (in_bin, ones)})
        added, dropped = ({k: one_sided(v, index, rule)[side] for k, v in lattices.items()}
                          for side in (0, 1))
        low = _precision_bounds(added, alpha, upper=False, pseudo=pseudo)
        high = _precision_bounds(dropped, alpha, upper=True, pseudo=pseudo)
        bound = bound + added["rows"] * ((1 + slope) * low - slope)
        bound = bound - dropped["rows"] * ((1 + slope) * high - slope)
    return bound


def _ratio_bounds(config: RunConfig, grids: dict[str, ThresholdGrid],
                  in_force: dict[str, Any]) -> Mapping[str, GroupResult]:
    """Experiment (docs/audit.md, "Issue 21: ratio bounds"): the pipeline's optimum without
    the evidence rule, then per group the tuple with the best :func:`ratio_bound_gains` over
    *every* covered lattice cell (ties: the least change in volume); keep the thresholds in
    force unless that bound is positive. Groups on the fallback take the all-groups result."""
    import dataclasses

    results = dict(pipeline_recalibrate(
        config.with_overrides({"in_force.evidence_z": None}, source="ratio bounds"), grids,
        in_force))
    total = None
    for grid in grids.values():
        total = grid if total is None else total + grid
    grids = {**grids, ALL_GROUPS: total}
    method, rule, slope = config.decision_method, config.rule, config.target.slope
    kwargs = {"target": config.target, "rule": rule, "method": method,
              **config.optimize_options}
    for name in [ALL_GROUPS, *GROUPS]:
        result, thresholds = results[name], in_force.get(name)
        if result.status == "fallback":
            results[name] = dataclasses.replace(result, points={
                **result.points, method: results[ALL_GROUPS].points.get(method)})
            continue
        chosen = result.points.get(method)
        if thresholds is None or chosen is None or result.status != "ok":
            continue
        rows = window_rows(name)
        if rows is None:
            continue
        grid = grids[name]
        kept = point_at(grid, thresholds, **kwargs)
        if tuple(kept.index) == tuple(chosen.index):
            continue
        bound = ratio_bound_gains(rows, list(grid.edges), kept.index, rule=rule,
                                  slope=slope, z=float(config.in_force["evidence_z"]))
        bound = np.where(grid.covered(rule, config.optimize_options.get("max_unrated_share",
                                                                        0.0)), bound, -np.inf)
        top = float(bound.max())
        if not top > 0:
            results[name] = dataclasses.replace(result, status="kept",
                                                points={**result.points, method: kept})
            continue
        volume = grid.volume(rule)
        tied = np.argwhere(bound >= top - 1e-9 * max(1.0, abs(top)))
        change = np.abs(volume[tuple(tied.T)] - volume[tuple(kept.index)])
        best = tuple(int(i) for i in tied[int(np.argmin(change))])
        point = point_at(grid, grid.threshold_values(best), **kwargs)
        results[name] = dataclasses.replace(result, points={**result.points, method: point})
    return results


RULES["ratio_bounds"] = _ratio_bounds


def _segment_candidates(config: RunConfig, grids: dict[str, ThresholdGrid],
                        in_force: dict[str, Any]) -> Mapping[str, GroupResult]:
    """Experiment (dropped): the lower-bound move always also considers the cells on the
    segment from the thresholds in force to the method's point (part-way moves towards it).
    ``lower_bound_move`` does so only when a classifier is off in force (docs/audit.md,
    "Turning a classifier on")."""
    return _with_candidates(config, grids, in_force, lambda grid, chosen, kept: np.unique(
        np.vstack([np.asarray(chosen.path, dtype=np.intp).reshape(-1, grid.k),
                   segment_cells(kept.index, chosen.index)]), axis=0))


RULES["segment"] = _segment_candidates


def axis_trims(cells: np.ndarray, kept: Sequence[int]) -> np.ndarray:
    """Every cell reached from a cell of ``cells`` by moving one coordinate back towards the
    tuple ``kept`` (the others held): for ``c`` and coordinate ``j``, ``c`` with ``c_j``
    replaced by each index between ``c_j`` and ``kept_j``."""
    out = [np.asarray(cells, dtype=np.intp).reshape(-1, len(kept))]
    for c in out[0]:
        for j, (a, b) in enumerate(zip(c, kept, strict=True)):
            lo, hi = sorted((int(a), int(b)))
            trimmed = np.repeat(c[None, :], hi - lo + 1, axis=0)
            trimmed[:, j] = np.arange(lo, hi + 1)
            out.append(trimmed)
    return np.unique(np.vstack(out), axis=0)


def _trim_candidates(config: RunConfig, grids: dict[str, ThresholdGrid],
                     in_force: dict[str, Any]) -> Mapping[str, GroupResult]:
    """Experiment: the method's curve and every axis trim of its cells towards the thresholds
    in force (:func:`axis_trims`)."""
    return _with_candidates(config, grids, in_force, lambda grid, chosen, kept: axis_trims(
        np.asarray(chosen.path, dtype=np.intp), kept.index))


def _box_candidates(config: RunConfig, grids: dict[str, ThresholdGrid],
                    in_force: dict[str, Any]) -> Mapping[str, GroupResult]:
    """Experiment: every cell of the box spanned by the thresholds in force and the method's
    point, and the method's curve."""
    def box(grid, chosen, kept):
        ranges = [np.arange(min(a, b), max(a, b) + 1) for a, b in zip(
            chosen.index, kept.index, strict=True)]
        cells = np.stack(np.meshgrid(*ranges, indexing="ij"), axis=-1).reshape(-1, grid.k)
        return np.unique(np.vstack([np.asarray(chosen.path, dtype=np.intp).reshape(
            -1, grid.k), cells]), axis=0)
    return _with_candidates(config, grids, in_force, box)


RULES["trim"] = _trim_candidates

RULES["box"] = _box_candidates



def replicate_day(args: argparse.Namespace, thresholds: Mapping[str, Sequence[float] | None],
                  start: Sequence[float], *, day: int, seed: int, family: str,
                  replicates: int = 20, drift: bool = True) -> dict[str, np.ndarray]:
    """Utility of ``thresholds`` (per group; None: nothing flagged) and of ``start`` on
    ``replicates`` independent populations of ``day`` (seeds ``seed + 1000 + r``: the same
    distribution as the loop's day, other rows): what a point is worth on such a day in
    expectation, and how often one day's realised utility falls below a fraction of the
    start's although the point is better (the per-day safety target's own noise)."""
    slope = args.target / (1 - args.target)
    out = {"point": np.zeros(replicates), "start": np.zeros(replicates)}
    for r in range(replicates):
        g, _, s, y = loop.population(args.rows_per_day, day, seed=seed + 1000 + r,
                                     drift_day=args.drift_day if drift else None,
                                     drift_logit=args.drift_logit, family=family,
                                     prevalence=args.prevalence, problem=seed)
        for k, name in enumerate(GROUPS):
            sel = g == k
            t = thresholds.get(name)
            if t is not None:
                out["point"][r] += loop.utility_of(loop.apply_thresholds(s[sel], tuple(t)),
                                                   y[sel], slope)
            out["start"][r] += loop.utility_of(loop.apply_thresholds(s[sel], tuple(start)),
                                               y[sel], slope)
    return out


def _population_variance(config: RunConfig, grids: dict[str, ThresholdGrid],
                         in_force: dict[str, Any]) -> Mapping[str, GroupResult]:
    """Experiment: the lower bound's variance also holds the population's own (Poisson) term
    of the estimated gain, ``D_TP + r² D_FP`` over the region flagged by exactly one of the two
    tuples (the HT estimate's variance as a total of a Poisson population: ``Σ w²/π`` rather
    than the design's ``Σ (1 - π) w²/π``, here for ``w = 1``), so that a move resting on a census
    (``π = 1``) needs evidence too."""
    import costlib.thresholds._move_evidence as evidence
    original = evidence.gain_standard_errors

    def with_population(grid, index, *, rule, slope, unseen_rows=0.0):
        design = original(grid, index, rule=rule, slope=slope, unseen_rows=unseen_rows)
        tp, fp = grid.counts(rule)
        total = design ** 2
        for lattice, coefficient in ((tp, 1.0), (fp, slope * slope)):
            total = total + coefficient * flagged_by_one(lattice, index, rule)
        return np.sqrt(total)

    evidence.gain_standard_errors = with_population
    try:
        return pipeline_recalibrate(config, grids, in_force)
    finally:
        evidence.gain_standard_errors = original


RULES["population_variance"] = _population_variance
