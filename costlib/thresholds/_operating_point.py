"""Choosing the operating point of an ensemble: thresholds that meet a business trade-off.

Given a :class:`~costlib.thresholds.ThresholdGrid`, a combination rule and a target (see
:mod:`costlib.thresholds._target`), :func:`optimize` picks thresholds with one of four methods:

``"graph"``
    The max-area monotone path through the lattice (:mod:`costlib.thresholds._lattice_path`; exact
    dynamic programming, same optimum as the paper's Bellman-Ford), then the point on that path
    maximising ``TP - r FP``.
``"analytic"``
    The paper's parametric-path method (:mod:`costlib.thresholds._analytic`).
``"hull"``
    The exact empirical optimum ``argmax TP - r FP`` over every cell, reported with the upper
    concave hull of all cells as its frontier (:mod:`costlib.thresholds._frontier`). No path
    restriction, so its ``TP - r FP`` is an upper bound for every other method on the same grid.
``"bucket"``
    The manual baseline: highest-TP cell per FP bucket, then ``argmax TP - r FP`` on those.

On a concave PN curve, maximising ``TP - r FP`` is the paper's "derivative equals target" rule;
on the empirical, stepwise curves it is its exact discrete counterpart.

Coverage (selective labels). A grid built from the ratings of the thresholds in force knows
nothing about the unrated rows a lower threshold would flag. With ``max_unrated_share = s``
(default 0) every method returns only *covered* tuples, ``U(t) <= s V(t)``
(:meth:`~costlib.thresholds.ThresholdGrid.covered`):

- ``hull``: the exact argmax over the covered cells meeting every constraint; its frontier is
  the upper concave hull of the covered cells (a chosen point that is not a hull vertex, under
  constraints or a non-linear objective, is inserted into it at its FP rank);
- ``graph``: the max-area path of the whole lattice is kept (the paper's method; the path does
  not depend on the objective); the point is the best covered, feasible point on it. With
  ``s = 0`` the covered part of a monotone path is a suffix of it (covered tuples are an up-set);
- ``bucket``: the buckets are formed over the covered cells only, then the best feasible point;
- ``analytic``: the fitted path is the paper's; its snapped root is kept when it is covered and
  the objective is linear and unconstrained, otherwise the best covered feasible cell of the
  snapped path.

When a strictly better candidate of the same method exists outside coverage, the point's
``status`` is ``"coverage_limited"`` and ``unrestricted`` describes that point. Objectives other
than ``TP - r FP`` and constraints are in :mod:`costlib.thresholds._objectives`; infeasible
constraints give ``status="infeasible"`` with the nearest point defined there. Grids without unrated
weight, the linear objective and no constraints give exactly the results of the plain methods.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from costlib.thresholds._analytic import fit_analytic_path
from costlib.thresholds._frontier import (
    best_cell,
    bucket_frontier,
    choose_on_curve,
    hull_neighbours,
    marginal_precisions,
    upper_hull,
)
from costlib.thresholds._grid import ThresholdGrid
from costlib.thresholds._lattice_path import max_area_path, max_area_paths
from costlib.thresholds._objectives import Constraints, Objective, Selection, select
from costlib.thresholds._resolution import lattice_resolution
from costlib.thresholds._rows import as_score_array, check_rule, split_labels
from costlib.thresholds._target import Target, resolve_target

__all__ = [
    "METHODS",
    "RECALL_NEEDS_AUDIT",
    "OperatingPoint",
    "estimated_recall",
    "optimize",
    "optimize_each",
    "point_at",
    "prepare_graph_paths",
]

METHODS = ("graph", "analytic", "hull", "bucket")


def _precision(tp: float, fp: float) -> float:
    return tp / (tp + fp) if tp + fp > 0 else float("nan")


@dataclass(frozen=True, eq=False)
class OperatingPoint:
    """Thresholds chosen for an ensemble, with what they achieve on the rated data.

    Attributes
    ----------
    method, rule : str
    target : Target
        The trade-off (``target.slope`` = r, ``target.marginal_precision`` = m).
    thresholds : tuple of float
        One per classifier; ``+inf`` means the classifier is off.
    index : tuple of int
        Lattice index of the point.
    tp, fp : float
        Weighted rated true / false positives flagged at the point.
    precision : float
        ``tp / (tp + fp)`` among rated items (NaN when nothing is flagged).
    marginal_precision_left, marginal_precision_right : float
        Precision of the items between the point and its neighbour on the curve with fewer /
        more flagged items (see :func:`costlib.thresholds._frontier.marginal_precisions`).
    objective : float
        ``tp - r * fp``.
    path : ndarray of shape (m, k)
        Lattice indices of the curve the point was chosen on, from most to least flagged: the
        monotone path for ``graph`` and ``analytic``, the frontier cells for ``hull`` and
        ``bucket`` (see ``curve_kind``).
    curve_tp, curve_fp : ndarray of shape (m,)
        The PN curve along ``path``.
    curve_kind : {"path", "frontier"}
    area : float
        Trapezoid area under the PN curve (NaN for frontiers).
    rated_positives, rated_negatives : float
        Totals of the grid the point was chosen on.
    names : tuple of str or None
        Classifier names.
    details : dict
        Method-specific extras (analytic: fitted exponents, energy, root status, fitted curve).
    volume, unrated : float
        ``V = TP + FP + U`` and ``U`` at the point: every scored row it flags, and the unrated
        weight among them.
    coverage : float
        ``(TP + FP) / V`` (1 when nothing is flagged).
    status : {"ok", "coverage_limited", "infeasible", "resolution_limited"}
        ``coverage_limited``: a strictly better candidate flags more unrated weight than
        allowed (see ``unrestricted``); ``infeasible``: no covered point flagging anything meets
        the constraints, the point is the nearest one (see :mod:`costlib.thresholds._objectives`);
        ``resolution_limited``: the point is the lattice's best, but a coarse stretch of the
        lattice could hide a better one (see ``resolution``).
    reason : str
        One line explaining a status other than ``"ok"`` (empty otherwise).
    objective_name : str
        ``"linear"``, ``"fbeta"`` or ``"precision_at_volume"``; ``objective`` is its value.
    objective_params : dict
        Its parameters (slope, beta, volume).
    constraints : dict
        ``min_precision``, ``max_volume``, ``max_false_positives``, ``min_recall`` (None = not
        set).
    max_unrated_share : float
        The allowed unrated share ``s`` of the flagged volume.
    total_positives_source : str
        Where ``P`` (for F-beta and recall) comes from: ``"rated"`` = rated positives only (a
        lower bound of all positives); ``"horvitz_thompson"`` = the grid holds audit rows and
        ``P̂ = sum_i y_i w_i / π_i`` estimates every positive of the scored population
        (:mod:`costlib.audit._weights`).
    estimated_total_positives : float or None
        ``P̂`` with audit data (the grid's weighted positives), else None.
    estimated_recall : float or None
        ``TP / P̂`` with audit data (NaN when ``P̂ = 0``), else None: the share of all
        positives the point flags. A ratio of two unbiased estimates (consistent, not exactly
        unbiased); unrated gaps (flagged rows not rated yet) are in neither.
    unrestricted : dict or None
        For ``coverage_limited``: ``index``, ``thresholds``, ``tp``, ``fp``, ``unrated``,
        ``volume``, ``objective`` of the better, uncovered point.
    resolution : dict or None
        :meth:`costlib.thresholds.Resolution.summary`: ``limited``, ``finer_bound`` (no
        finer lattice of the same rows exceeds it), ``coarse_bound``, the coarse box's corners and
        volume jump. None when not checked.
    """

    method: str
    rule: str
    target: Target | None
    thresholds: tuple[float, ...]
    index: tuple[int, ...]
    tp: float
    fp: float
    precision: float
    marginal_precision_left: float
    marginal_precision_right: float
    objective: float
    path: NDArray[np.intp]
    curve_tp: NDArray[np.float64]
    curve_fp: NDArray[np.float64]
    curve_kind: str
    area: float
    rated_positives: float
    rated_negatives: float
    names: tuple[str, ...] | None = None
    details: dict[str, Any] = field(default_factory=dict)
    volume: float = float("nan")
    unrated: float = 0.0
    coverage: float = 1.0
    status: str = "ok"
    reason: str = ""
    objective_name: str = "linear"
    objective_params: dict[str, float] = field(default_factory=dict)
    constraints: dict[str, float | None] = field(default_factory=dict)
    max_unrated_share: float = 0.0
    total_positives_source: str = "rated"
    unrestricted: dict[str, Any] | None = None
    estimated_total_positives: float | None = None
    estimated_recall: float | None = None
    resolution: dict[str, Any] | None = None

    @property
    def position(self) -> int:
        """Position of the point on its curve."""
        matches = np.flatnonzero((self.path == np.asarray(self.index)).all(axis=1))
        return int(matches[0])

    def apply(self, scores: ArrayLike | pd.DataFrame) -> NDArray[np.bool_]:
        """Decisions for new rows: True where the point flags the row.

        Classifier ``j`` fires iff ``s_j >= thresholds[j]`` (an "off" threshold, ``+inf``, never
        fires); rows are flagged when any (``rule="any"``) / all (``"all"``) classifiers fire.
        A missing score (``-inf``, NaN, or a null in a DataFrame) means the classifier did not
        score the row: it never fires.

        Parameters
        ----------
        scores : array-like of shape (n, k) or (n,), or pandas DataFrame
            A DataFrame is read by the point's classifier names (:attr:`names`).

        Returns
        -------
        ndarray of bool, shape (n,)
        """
        s, _ = as_score_array(scores, self.names if isinstance(scores, pd.DataFrame) else None)
        s = np.asarray(s, dtype=np.float64)
        if s.ndim == 1:
            s = s[:, None]
        k = len(self.thresholds)
        if s.ndim != 2 or s.shape[1] != k:
            raise ValueError(f"scores must have shape (n, {k}) for {k} classifiers, got {s.shape}")
        if np.isposinf(s).any():
            j = int(np.flatnonzero(np.isposinf(s).any(axis=0))[0])
            raise ValueError(f"score column {j} has +inf; scores must be finite, -inf or NaN")
        with np.errstate(invalid="ignore"):
            fires = s >= np.asarray(self.thresholds)[None, :]  # NaN compares False
        return np.asarray(fires.any(axis=1) if self.rule == "any" else fires.all(axis=1))

    def evaluate(
        self,
        scores: ArrayLike | pd.DataFrame,
        labels: ArrayLike,
        weights: ArrayLike | None = None,
        *,
        beta: float = 1.0,
    ) -> dict[str, float]:
        """What the point achieves on a labelled hold-out set.

        Returns weighted ``tp``, ``fp``, ``fn``, ``precision = tp / (tp + fp)`` (NaN when nothing
        is flagged), ``recall = tp / (tp + fn)`` (NaN without positives), ``fbeta`` (1 when
        ``tp = fp = fn = 0``, as in :mod:`costlib.decoding._losses`), ``flagged`` (weight flagged,
        rated or not) and ``unrated_flagged`` (flagged rows with a null label, left out of the
        counts).
        """
        flags = self.apply(scores)
        y, unrated = split_labels(labels, flags.size)
        w = np.ones(flags.size) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape != flags.shape:
            raise ValueError(f"weights must have shape {flags.shape}, got {w.shape}")
        rated = np.ones(flags.size, dtype=bool) if unrated is None else ~unrated
        tp = float(w[flags & rated & y].sum())
        fp = float(w[flags & rated & ~y].sum())
        fn = float(w[~flags & rated & y].sum())
        b2 = float(beta) ** 2
        den = (1 + b2) * tp + b2 * fn + fp
        return {
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "precision": _precision(tp, fp),
            "recall": tp / (tp + fn) if tp + fn > 0 else float("nan"),
            "fbeta": (1 + b2) * tp / den if den > 0 else 1.0,
            "beta": float(beta),
            "flagged": float(w[flags].sum()),
            "unrated_flagged": float(w[flags & ~rated].sum()),
        }

    def summary(self) -> dict[str, Any]:
        """Flat, JSON-friendly record of the point (no curves)."""
        names = self.names or tuple(f"s{j + 1}" for j in range(len(self.thresholds)))
        return {
            "method": self.method,
            "rule": self.rule,
            "target_marginal_precision": None if self.target is None
            else self.target.marginal_precision,
            "classifiers": list(names),
            "thresholds": list(self.thresholds),
            "index": list(self.index),
            "tp": self.tp,
            "fp": self.fp,
            "precision": self.precision,
            "marginal_precision_left": self.marginal_precision_left,
            "marginal_precision_right": self.marginal_precision_right,
            "objective": self.objective,
            "rated_positives": self.rated_positives,
            "rated_negatives": self.rated_negatives,
            "volume": self.volume,
            "unrated": self.unrated,
            "coverage": self.coverage,
            "status": self.status,
            "reason": self.reason,
            "objective_name": self.objective_name,
            "objective_params": dict(self.objective_params),
            "constraints": dict(self.constraints),
            "max_unrated_share": self.max_unrated_share,
            "total_positives_source": self.total_positives_source,
            "estimated_total_positives": self.estimated_total_positives,
            "estimated_recall": self.estimated_recall,
            "unrestricted": None if self.unrestricted is None else dict(self.unrestricted),
        }


@dataclass(frozen=True)
class _Context:
    """What every method needs besides its curve."""

    grid: ThresholdGrid
    rule: str
    method: str
    target: Target | None
    objective: Objective
    constraints: Constraints
    max_unrated_share: float
    covered: NDArray[np.bool_] | None  # None: every tuple is covered


def _cell_record(ctx: _Context, flat: int) -> dict[str, Any]:
    tp_all, fp_all = ctx.grid.counts(ctx.rule)
    index = tuple(int(i) for i in np.unravel_index(flat, tp_all.shape))
    tp, fp = float(tp_all[index]), float(fp_all[index])
    unrated = float(ctx.grid.unrated_counts(ctx.rule)[index]) if ctx.grid.has_unrated else 0.0
    value = ctx.objective.values(np.array([tp]), np.array([fp]), ctx.grid.total_positives)
    return {
        "index": list(index),
        "thresholds": list(ctx.grid.threshold_values(index)),
        "tp": tp,
        "fp": fp,
        "unrated": unrated,
        "volume": tp + fp + unrated,
        "objective": float(value[0]),
    }


def _reason(ctx: _Context, selection: Selection, chosen: dict[str, Any],
            free: dict[str, Any] | None) -> str:
    if selection.status == "coverage_limited":
        assert free is not None  # a coverage-limited selection has an unrestricted point
        share = free["unrated"] / free["volume"]
        return (
            f"the best {ctx.method} point (thresholds {tuple(free['thresholds'])}, "
            f"{ctx.objective.name} {free['objective']:.6g}) flags {free['unrated']:g} unrated of "
            f"{free['volume']:g} ({share:.1%} > allowed {ctx.max_unrated_share:g}); held back "
            f"to the best covered point ({ctx.objective.name} {chosen['objective']:.6g})"
        )
    if selection.status == "infeasible":
        limits = {k: v for k, v in ctx.constraints.as_dict().items() if v is not None}
        if ctx.objective.name == "precision_at_volume" and ctx.objective.volume is not None:
            limits["volume"] = ctx.objective.volume
        recall = ""
        if ctx.constraints.min_recall is not None:
            recall = (f" (recall of P̂ = {ctx.constraints.total_positives:g} estimated "
                      f"positives; the point's recall is {_share(chosen['tp'], ctx)})")
        return (
            f"no covered {ctx.method} point that flags anything meets {limits}{recall}; nearest "
            f"point (smallest largest relative violation) violates "
            f"{', '.join(selection.violated)}"
        )
    return ""


def _share(tp: float, ctx: _Context) -> str:
    total = ctx.constraints.total_positives
    return f"{tp / total:.4g}" if total else "undefined"


def _on_curve(
    ctx: _Context,
    path: NDArray[np.intp],
    position: int,
    curve_kind: str,
    area: float,
    details: dict[str, Any] | None = None,
    selection: Selection | None = None,
    unrestricted_flat: int | None = None,
) -> OperatingPoint:
    grid, rule = ctx.grid, ctx.rule
    tp_all, fp_all = grid.counts(rule)
    idx = tuple(path.T)
    curve_tp = np.asarray(tp_all[idx], dtype=np.float64)
    curve_fp = np.asarray(fp_all[idx], dtype=np.float64)
    index = tuple(int(i) for i in path[position])
    tp, fp = float(curve_tp[position]), float(curve_fp[position])
    left, right = marginal_precisions(curve_tp, curve_fp, position)
    chosen = _cell_record(ctx, int(np.ravel_multi_index(index, tp_all.shape)))
    if ctx.objective.name == "linear":
        assert ctx.objective.slope is not None
        value = tp - ctx.objective.slope * fp  # exactly today's expression
    else:
        value = chosen["objective"]
    status = "ok" if selection is None else selection.status
    free = None if unrestricted_flat is None else _cell_record(ctx, unrestricted_flat)
    reason = "" if selection is None else _reason(ctx, selection, chosen, free)
    volume = chosen["volume"]
    recall = estimated_recall(grid, tp)
    return OperatingPoint(
        method=ctx.method,
        rule=rule,
        target=ctx.target,
        thresholds=grid.threshold_values(index),
        index=index,
        tp=tp,
        fp=fp,
        precision=_precision(tp, fp),
        marginal_precision_left=left,
        marginal_precision_right=right,
        objective=value,
        path=path,
        curve_tp=curve_tp,
        curve_fp=curve_fp,
        curve_kind=curve_kind,
        area=area,
        rated_positives=grid.total_positives,
        rated_negatives=grid.total_negatives,
        names=grid.names,
        details=details or {},
        volume=volume,
        unrated=chosen["unrated"],
        coverage=(tp + fp) / volume if volume > 0 else 1.0,
        status=status,
        reason=reason,
        objective_name=ctx.objective.name,
        objective_params=ctx.objective.params,
        constraints=ctx.constraints.as_dict(),
        max_unrated_share=ctx.max_unrated_share,
        total_positives_source=grid.total_positives_source,
        unrestricted=free,
        estimated_total_positives=recall["estimated_total_positives"],
        estimated_recall=recall["estimated_recall"],
    )


def estimated_recall(grid: ThresholdGrid, tp: float) -> dict[str, float | None]:
    """``estimated_total_positives = P̂`` and ``estimated_recall = TP / P̂`` (None without audit).

    With audit rows the grid's positives are Horvitz–Thompson weighted, so ``P̂`` is the
    grid's total positive weight (:mod:`costlib.audit._weights`); recall is NaN when ``P̂ = 0``.
    """
    if not grid.has_audit:
        return {"estimated_total_positives": None, "estimated_recall": None}
    total = grid.total_positives
    return {"estimated_total_positives": total,
            "estimated_recall": tp / total if total > 0 else float("nan")}


def _select_among(ctx: _Context, flat: NDArray[np.intp] | None) -> tuple[Selection, int | None]:
    """Best covered feasible cell among flat candidates (``None`` = every cell).

    Returns the selection (positions into ``flat``) and the unrestricted cell's flat index.
    """
    tp_all, fp_all = ctx.grid.counts(ctx.rule)
    vol_all = ctx.grid.volume(ctx.rule)
    if flat is None:
        tp, fp, vol = tp_all.ravel(), fp_all.ravel(), vol_all.ravel()
        cov = None if ctx.covered is None else ctx.covered.ravel()
    else:
        tp, fp, vol = tp_all.ravel()[flat], fp_all.ravel()[flat], vol_all.ravel()[flat]
        cov = None if ctx.covered is None else ctx.covered.ravel()[flat]
    sel = select(tp, fp, vol, cov, ctx.objective, ctx.constraints, ctx.grid.total_positives)
    free = None
    if sel.unrestricted is not None:
        free = int(sel.unrestricted if flat is None else flat[sel.unrestricted])
    return sel, free


def _cells(flat: NDArray[np.intp], shape: tuple[int, ...]) -> NDArray[np.intp]:
    return np.column_stack(np.unravel_index(flat, shape)).astype(np.intp)


def optimize(
    grid: ThresholdGrid,
    *,
    target_marginal_precision: float | None = None,
    target_slope: float | None = None,
    benefit_matrix: ArrayLike | None = None,
    target: Target | None = None,
    rule: str = "any",
    method: str = "graph",
    n_buckets: int = 50,
    granularity: int = 512,
    frontier: bool = True,
    max_unrated_share: float = 0.0,
    objective: str = "linear",
    beta: float = 1.0,
    volume: float | None = None,
    min_precision: float | None = None,
    max_volume: float | None = None,
    max_false_positives: float | None = None,
    min_recall: float | None = None,
    check_resolution: bool = True,
) -> OperatingPoint:
    """Choose an operating point on a threshold grid.

    Give the trade-off exactly one way: ``target_marginal_precision`` m in (0, 1),
    ``target_slope`` r = dTP/dFP = m / (1 - m), a 2x2 ``benefit_matrix`` (rows = true class,
    r = (b00 - b01) / (b11 - b10)), or a :class:`~costlib.thresholds.Target`. It is required
    for the linear objective; for other objectives it is optional (it then only steers the analytic
    method's root finding, r = 1 when absent).

    Parameters
    ----------
    grid : ThresholdGrid
    rule : {"any", "all"} (aliases "or", "and"), default "any"
        Flag an item when any (OR) / all (AND) classifiers fire.
    method : {"graph", "analytic", "hull", "bucket"}, default "graph"
        See the module docstring.
    n_buckets : int, default 50
        FP buckets for ``method="bucket"``.
    granularity : int, default 512
        Path samples for ``method="analytic"``.
    frontier : bool, default True
        For ``method="hull"``: compute the whole upper concave hull as the reported curve. With
        ``False`` only the optimum and its two hull neighbours are found (two vectorised passes
        instead of quickhull; the point and its marginal precisions are identical).
    max_unrated_share : float in [0, 1], default 0
        Only tuples whose flagged volume ``V`` holds at most ``max_unrated_share * V`` unrated
        weight are returned (see the module docstring). Irrelevant for grids without unrated.
    objective : {"linear", "fbeta", "f1", "precision_at_volume"}, default "linear"
        ``TP - r FP``; F-beta with ``beta``; precision at review volume ``volume``
        (:mod:`costlib.thresholds._objectives`).
    beta : float, default 1
    volume : float, optional
        Review volume ``k`` for ``objective="precision_at_volume"``.
    min_precision, max_volume, max_false_positives : float, optional
        Constraints: ``TP / (TP + FP) >= min_precision``, ``V <= max_volume`` (review capacity,
        unrated rows included), ``FP <= max_false_positives``.
    min_recall : float in (0, 1], optional
        Constraint ``TP >= min_recall * P̂``: the point flags at least this share of all
        positives, with ``P̂`` the Horvitz–Thompson estimate of the total positives (the grid's
        positive weight). Needs a grid with audit rows (``grid.has_audit``); otherwise a
        ValueError (without an audit sample the total number of positives is unknown; see
        docs/audit.md).

    check_resolution : bool, default True
        Bound what finer candidate thresholds could reach
        (:func:`costlib.thresholds.lattice_resolution`, stored in ``resolution``); a
        point that a coarse stretch of the lattice could beat by more than 2% gets
        ``status="resolution_limited"`` when it is otherwise ``"ok"`` (the reason says where,
        and by how much at most).

    Returns
    -------
    OperatingPoint
    """
    ctx = _make_context(grid, rule, method, (target_marginal_precision, target_slope,
                                             benefit_matrix, target),
                        objective, beta, volume,
                        _constraints(grid, min_precision, max_volume, max_false_positives,
                                     min_recall, refuse=True),
                        max_unrated_share)
    point = _choose(ctx, n_buckets, granularity, frontier)
    return _with_resolution(ctx, point) if check_resolution else point


def _with_resolution(ctx: _Context, point: OperatingPoint) -> OperatingPoint:
    """``point`` with its lattice resolution and, when a coarse box could beat it and its
    status is ``"ok"``, ``status="resolution_limited"``."""
    res = lattice_resolution(ctx.grid, point.objective, rule=ctx.rule, objective=ctx.objective,
                             constraints=ctx.constraints,
                             max_unrated_share=ctx.max_unrated_share, point_tp=point.tp)
    changes: dict[str, Any] = {"resolution": res.summary()}
    if res.limited and point.status == "ok":
        changes["status"] = "resolution_limited"
        changes["reason"] = res.reason(ctx.objective.name)
    return dataclasses.replace(point, **changes)


def _choose(ctx: _Context, n_buckets: int, granularity: int, frontier: bool) -> OperatingPoint:
    """The point of ``ctx.method`` (see :func:`optimize`)."""
    grid, method = ctx.grid, ctx.method
    rule, tgt, obj, cons = ctx.rule, ctx.target, ctx.objective, ctx.constraints
    covered = ctx.covered
    # Today's methods, untouched, whenever coverage, objective and constraints cannot matter.
    plain = covered is None and obj.name == "linear" and not cons.active
    tp, fp = grid.counts(rule)
    r = 1.0 if tgt is None else tgt.slope

    if method == "graph":
        path, area = _graph_path(grid, rule)
        if plain:
            position = choose_on_curve(tp[tuple(path.T)], fp[tuple(path.T)], r)
            return _on_curve(ctx, path, position, "path", area)
        flat = np.ravel_multi_index(tuple(path.T), tp.shape)
        sel, free = _select_among(ctx, flat)
        return _on_curve(ctx, path, sel.position, "path", area, selection=sel,
                         unrestricted_flat=free)

    if method == "hull":
        return _hull(ctx, plain, frontier)

    if method == "bucket":
        details: dict[str, Any] = {"n_buckets": int(n_buckets)}
        if plain:
            flat = bucket_frontier(tp, fp, n_buckets)
            path = _cells(flat, tp.shape)
            position = choose_on_curve(tp.ravel()[flat], fp.ravel()[flat], r)
            return _on_curve(ctx, path, position, "frontier", float("nan"), details)
        flat = bucket_frontier(tp, fp, n_buckets, mask=covered)
        sel, _ = _select_among(ctx, flat)
        free = None
        if covered is not None and sel.status == "ok":
            # The unrestricted baseline: buckets over every cell.
            all_flat = bucket_frontier(tp, fp, n_buckets)
            unres = _Context(grid, rule, method, tgt, obj, cons, ctx.max_unrated_share, None)
            free_sel, _ = _select_among(unres, all_flat)
            cand = int(all_flat[free_sel.position])
            values = obj.values(tp.ravel()[[cand, flat[sel.position]]],
                                fp.ravel()[[cand, flat[sel.position]]], grid.total_positives)
            if free_sel.status == "ok" and values[0] > values[1]:
                sel = Selection(sel.position, "coverage_limited", None)
                free = cand
        return _on_curve(ctx, _cells(flat, tp.shape), sel.position, "frontier", float("nan"),
                         details, selection=sel, unrestricted_flat=free)

    fit = fit_analytic_path(tp, fp, r, granularity=granularity)
    path = fit.path_cells
    idx = tuple(path.T)
    area = float(np.sum(0.5 * (fp[idx][:-1] - fp[idx][1:]) * (tp[idx][:-1] + tp[idx][1:])))
    details = {
        "exponents": fit.exponents.tolist(),
        "energy": fit.energy,
        "x_star": fit.x_star,
        "root_found": fit.root_found,
        "fitted_tp": fit.fitted_tp,
        "fitted_fp": fit.fitted_fp,
        "fitted_curve_tp": fit.samples_tp,
        "fitted_curve_fp": fit.samples_fp,
        "optimizer_iterations": fit.optimizer_iterations,
    }
    root = int(np.flatnonzero((path == np.asarray(fit.cell)).all(axis=1))[0])
    if obj.name == "linear" and not cons.active and (covered is None or covered[fit.cell]):
        return _on_curve(ctx, path, root, "path", area, details)
    flat = np.ravel_multi_index(idx, tp.shape)
    sel, free = _select_among(ctx, flat)
    return _on_curve(ctx, path, sel.position, "path", area, details, selection=sel,
                     unrestricted_flat=free)


#: Lattice cells solved together by :func:`prepare_graph_paths` (a stack of this many float64
#: cells is 8 MiB; about 4 such arrays are alive while a batch is solved).
GRAPH_BATCH_CELLS = 1 << 20


def _graph_path(grid: ThresholdGrid, rule: str) -> tuple[NDArray[np.intp], float]:
    """The graph method's max-area path of ``grid`` under ``rule``, once per grid."""
    return grid._memo(("graph_path", rule), lambda: max_area_path(*grid.counts(rule)))


def graph_batch_size(shape: tuple[int, ...]) -> int:
    """How many grids of lattice ``shape`` :func:`prepare_graph_paths` solves together."""
    return max(1, GRAPH_BATCH_CELLS // int(np.prod(shape)))


def prepare_graph_paths(grids: Sequence[ThresholdGrid], rule: str = "any") -> None:
    """Solve the graph method's max-area paths of many grids together, ahead of :func:`optimize`.

    Grids of one lattice shape are stacked, :data:`GRAPH_BATCH_CELLS` cells at a time, and their
    paths solved side by side (:func:`costlib.thresholds.max_area_paths`); each grid
    keeps its path, which ``optimize(grid, method="graph", rule=rule)`` then uses instead of solving
    it alone. Paths are identical either way: only the time differs (for many small lattices,
    several times less). Grids whose path is known already are left as they are.
    """
    rule = check_rule(rule)
    pending: dict[tuple[int, ...], list[ThresholdGrid]] = {}
    for grid in grids:
        if not isinstance(grid, ThresholdGrid):
            raise TypeError(f"grids must be ThresholdGrids, got {type(grid).__name__}")
        if ("graph_path", rule) not in grid._cache:  # not solved yet
            pending.setdefault(grid.shape, []).append(grid)
    for shape, same_shape in pending.items():
        size = graph_batch_size(shape)
        for start in range(0, len(same_shape), size):
            batch = same_shape[start : start + size]
            counts = [grid.counts(rule) for grid in batch]
            paths = max_area_paths(np.stack([tp for tp, _ in counts]),
                                   np.stack([fp for _, fp in counts]))
            for grid, solved in zip(batch, paths, strict=True):
                grid._cache[("graph_path", rule)] = solved  # what _graph_path would solve


def optimize_each(grids: Iterable[ThresholdGrid], **optimize_kwargs: Any
                  ) -> Iterator[OperatingPoint]:
    """``optimize(grid, **optimize_kwargs)`` for every grid, in order, lazily.

    With the graph method (the default), consecutive grids of one lattice shape are taken
    :func:`graph_batch_size` at a time and their paths solved together
    (:func:`prepare_graph_paths`); a grid of another shape starts the next batch. The points
    are those of :func:`optimize` called on each grid alone. At most one batch of grids is
    held, plus the grid that starts the next.
    """
    method = optimize_kwargs.get("method", "graph")
    rule = optimize_kwargs.get("rule", "any")
    if method != "graph":
        for grid in grids:
            yield optimize(grid, **optimize_kwargs)
        return
    iterator = iter(grids)
    batch: list[Any] = list(itertools.islice(iterator, 1))
    while batch:
        first, following = batch[0], []
        if isinstance(first, ThresholdGrid):
            size = graph_batch_size(first.shape)
            while len(batch) < size:
                following = list(itertools.islice(iterator, 1))
                if not following:
                    break
                grid = following[0]
                if not isinstance(grid, ThresholdGrid) or grid.shape != first.shape:
                    break  # it starts the next batch
                batch.append(grid)
                following = []
        prepare_graph_paths(batch, rule)  # refuses what is not a grid
        for grid in batch:
            yield optimize(grid, **optimize_kwargs)
        batch = following or list(itertools.islice(iterator, 1))


def _make_context(
    grid: ThresholdGrid, rule: str, method: str, given: tuple[Any, ...], objective: str,
    beta: float,
    volume: float | None, constraints: Constraints, max_unrated_share: float,
) -> _Context:
    """Validate the common arguments of :func:`optimize` and :func:`point_at`."""
    if not isinstance(grid, ThresholdGrid):
        raise TypeError(f"grid must be a ThresholdGrid, got {type(grid).__name__}")
    rule = check_rule(rule)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if objective == "linear" or any(v is not None for v in given):
        tgt = resolve_target(*given)
    else:
        tgt = None
    obj = Objective.make(objective, slope=None if tgt is None else tgt.slope, beta=beta,
                         volume=volume)
    covered = grid.covered(rule, max_unrated_share)  # validates the share
    return _Context(grid, rule, method, tgt, obj, constraints, float(max_unrated_share),
                    None if covered.all() else covered)


#: Why :func:`optimize` refuses ``min_recall`` on a grid without audit rows.
RECALL_NEEDS_AUDIT = (
    "min_recall needs audit data: without an audit sample the total number of positives P is "
    "unknown (rated positives are only those the thresholds in force flagged), so no recall "
    "can be computed. Rate an audit sample of the unflagged rows (costlib decide with the "
    "config's audit section enabled) and build the grid with their inclusion probabilities "
    "(ThresholdGrid.from_scores(..., audit_probabilities=pi); in the pipelines "
    "columns.audit_probability); see docs/audit.md"
)


def _constraints(grid: ThresholdGrid, min_precision: float | None, max_volume: float | None,
                 max_false_positives: float | None, min_recall: float | None, *,
                 refuse: bool) -> Constraints:
    """The constraints, with ``P = P̂`` for ``min_recall`` when the grid holds audit rows.

    ``refuse``: a ValueError (:data:`RECALL_NEEDS_AUDIT`) for ``min_recall`` without audit rows
    (what :func:`optimize` does); otherwise the floor is only recorded (:func:`point_at`
    chooses nothing).
    """
    if min_recall is not None and not grid.has_audit and refuse:
        Constraints(min_recall=min_recall)  # a bad value is reported as such first
        raise ValueError(RECALL_NEEDS_AUDIT)
    total = grid.total_positives if min_recall is not None and grid.has_audit else None
    return Constraints(min_precision, max_volume, max_false_positives, min_recall, total)


def point_at(
    grid: ThresholdGrid,
    thresholds: ArrayLike,
    *,
    target_marginal_precision: float | None = None,
    target_slope: float | None = None,
    benefit_matrix: ArrayLike | None = None,
    target: Target | None = None,
    rule: str = "any",
    method: str = "hull",
    max_unrated_share: float = 0.0,
    objective: str = "linear",
    beta: float = 1.0,
    volume: float | None = None,
    min_precision: float | None = None,
    max_volume: float | None = None,
    max_false_positives: float | None = None,
    min_recall: float | None = None,
) -> OperatingPoint:
    """What given thresholds achieve on a grid: an :class:`OperatingPoint` at a fixed place.

    For each classifier ``j`` the lattice index is the first candidate threshold
    ``t_j' >= t_j`` (``+inf`` = off), so the point flags exactly the rows ``thresholds`` flag
    when every finite threshold is a candidate (see
    :func:`costlib.thresholds.with_thresholds`) and a subset otherwise; ``details["exact"]``
    says which. TP, FP, volume, unrated, objective and estimated recall are read off the grid as for
    an optimised point; the "curve" is the single point (marginal precisions NaN). Arguments are
    those of :func:`optimize` (``method`` is only recorded). Nothing is chosen, so ``status`` is
    ``"ok"``.

    Parameters
    ----------
    grid : ThresholdGrid
    thresholds : array_like of shape (k,)
        One per classifier, finite or ``+inf``.

    Returns
    -------
    OperatingPoint
    """
    ctx = _make_context(grid, rule, method, (target_marginal_precision, target_slope,
                                             benefit_matrix, target),
                        objective, beta, volume,
                        _constraints(grid, min_precision, max_volume, max_false_positives,
                                     min_recall, refuse=False),
                        max_unrated_share)
    values = np.asarray(thresholds, dtype=np.float64).ravel()
    if values.shape != (grid.k,):
        raise ValueError(f"thresholds must have one value per classifier ({grid.k}), got "
                         f"{values.size}")
    if np.isnan(values).any() or (values == -np.inf).any():
        raise ValueError(f"thresholds must be finite or +inf, got {[float(v) for v in values]}")
    index = [int(np.searchsorted(candidates, value, side="left"))
             for candidates, value in zip(grid.thresholds, values, strict=True)]
    exact = all(float(c[i]) == float(v)
                for c, i, v in zip(grid.thresholds, index, values, strict=True))
    path = np.asarray([index], dtype=np.intp)
    return _on_curve(ctx, path, 0, "path", float("nan"), {"exact": exact})


def _hull(ctx: _Context, plain: bool, frontier: bool) -> OperatingPoint:
    """The hull method: exact optimum over (covered, feasible) cells, hull of covered cells."""
    tp, fp = ctx.grid.counts(ctx.rule)
    details = {"full_frontier": bool(frontier)}
    if plain:
        assert ctx.objective.slope is not None  # plain: the linear objective
        cell = best_cell(tp, fp, ctx.objective.slope)
        sel, free = None, None
    else:
        sel, free = _select_among(ctx, None)
        cell = tuple(int(i) for i in np.unravel_index(sel.position, tp.shape))
    # The frontier: the upper hull of the covered cells (all cells when all are covered),
    # computed on the compressed covered cells; the all-off cell is always covered and last.
    sub = None if ctx.covered is None else np.flatnonzero(ctx.covered)
    sub_tp = tp.ravel() if sub is None else tp.ravel()[sub]
    sub_fp = fp.ravel() if sub is None else fp.ravel()[sub]
    cell_flat = int(np.ravel_multi_index(cell, tp.shape))
    cell_sub = cell_flat if sub is None else int(np.searchsorted(sub, cell_flat))
    if frontier:
        hull = upper_hull(sub_tp, sub_fp)
    else:  # the optimum with its two hull neighbours: enough for the marginal precisions
        left, right = hull_neighbours(sub_tp, sub_fp, (cell_sub,))
        hull = np.array([i for i in (right, cell_sub, left) if i is not None], dtype=np.intp)
    flat = hull if sub is None else sub[hull]
    curve_tp, curve_fp = tp.ravel()[flat], fp.ravel()[flat]
    same = np.flatnonzero((curve_tp == tp[cell]) & (curve_fp == fp[cell]))
    if same.size:
        position = int(same[0])
    elif plain:  # cannot happen for slope > 0; a guard with a clear message
        raise RuntimeError("hull optimum is not a hull vertex; please report this grid")
    else:  # constraints or a non-linear objective: insert the point at its FP rank
        position = int(np.sum((curve_fp > fp[cell]) | ((curve_fp == fp[cell])
                                                       & (curve_tp > tp[cell]))))
        flat = np.insert(flat, position, cell_flat)
    path = _cells(flat, tp.shape)
    path[position] = cell  # report the optimum itself (a hull vertex may have duplicates)
    return _on_curve(ctx, path, position, "frontier", float("nan"), details, selection=sel,
                     unrestricted_flat=free)
