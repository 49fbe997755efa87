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
   (:func:`costlib.thresholds.binning._edges.with_thresholds`, as ``in_force.add_to_edges``), then
   :func:`costlib.thresholds.loop._recalibration.recalibrate_grids` with the config's methods,
   decision (``RunConfig.decision``: target, rule, objective, constraints, coverage),
   ``min_rated``, fallback and ``in_force`` settings (``evidence_z``,
   ``unseen_rows``; the all-groups grid is the sum, as the pipeline's). The published
   thresholds are the decision method's point per group, null for ``insufficient_data`` or
   an infeasible point (as ``costlib decide`` reads them).

Edges: the config's fixed edges, or with ``grid.edges: auto`` (the default) each run's edges
placed from the sketch of the previous run's window (a first pass on the first day), as
``costlib recalibrate`` carries them (:func:`lattice_of`; every run publishes: the loop's
publish guard is off).

The references (window oracle, starting point, same-day optimum) are those of
``bench_feedback_loop``; ``loop_figures`` computes the target figures of a loop.
``tests/test_feedback_sim.py`` checks that the published thresholds and each day's lattice
equal the pipeline loop's day by day on a small configuration.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

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
from costlib.thresholds.binning._edges import decision_edges_from_sketch, with_thresholds
from costlib.thresholds.binning._rows import apply_audit
from costlib.thresholds.binning._score_sketch import EdgeSketch
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop._recalibration import (
    ALL_GROUPS,
    PROPOSED,
    GroupResult,
    recalibrate_grids,
)
from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.audit_sizing import first_run_design

GROUPS = loop.GROUPS
CLASSIFIERS = loop.CLASSIFIERS

#: ``recalibrate(config, grids, in_force) -> results``: the optimiser call; the default is the
#: pipeline's (:func:`pipeline_recalibrate`); a caller may pass another (e.g. to record the grids).
Recalibrate = Callable[[RunConfig, dict[str, ThresholdGrid], dict[str, Any]],
                       Mapping[str, GroupResult]]


def pipeline_recalibrate(config: RunConfig, grids: dict[str, ThresholdGrid],
                         in_force: dict[str, Any]) -> Mapping[str, GroupResult]:
    """What ``costlib recalibrate`` computes per group (``optimizing.optimize_one`` on every
    group's grid and the all-groups sum, then ``apply_fallback``), without a bootstrap."""
    return recalibrate_grids(
        grids, config.decision, methods=config.methods,
        min_positives=config.min_positives, min_negatives=config.min_negatives,
        fallback=config.fallback, in_force=in_force,
        policy=replace(config.policy, min_gain_z=None))


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
        if config.grid.auto_edges_from != "previous_run" or carried is None:
            assert window is not None, "a first pass needs the window's rows"
            carried = window_sketches(window)
        edges = [decision_edges_from_sketch(sketch, config.n_edges) for sketch in carried]
    if not config.policy.add_to_edges:
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
    if config.audit.design != "auto":
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
    strata = config.audit.strata
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
    floor_design = AuditDesign(edges=(), weights=(1.0,), floor=float(config.audit.floor),
                               budget_share=float(config.audit.floor))
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
                if depths_now is not None and config.audit.strata.get("shares"):
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
        results = recalibrate(config, grids, in_force)
        statuses = {}
        for res in results.values():
            statuses[res.status] = statuses.get(res.status, 0) + 1
        decide_lattice = edges  # the lattice of the points published today
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
