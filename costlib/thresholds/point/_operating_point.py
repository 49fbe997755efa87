"""An operating point, and reading one off a grid.

:class:`OperatingPoint` is what :func:`~costlib.thresholds.optimize` returns (the methods finding
it are in :mod:`costlib.thresholds.point._optimize`). Here a point at a place of a curve of the
grid is read (counts, objective, marginal precisions, volume, coverage,
:func:`estimated_recall`, a status and its reason:
:mod:`costlib.thresholds.point._selection_reason`), :func:`point_at` reads the point of given
thresholds, and the context both read a point in is made from the grid and the
:class:`~costlib.thresholds.DecisionSpec` (``min_recall`` needs audit rows to choose by:
:data:`RECALL_NEEDS_AUDIT`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib.audit._strata import flagged_rows
from costlib.thresholds.binning._rows import as_score_array, is_data_frame, split_labels
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.grid._recall_bounds import RecallBounds, recall_bounds
from costlib.thresholds.point._decision_spec import (
    RECALL_NEEDS_AUDIT,
    DecisionSpec,
    as_decision_spec,
)
from costlib.thresholds.point._frontier import marginal_precisions
from costlib.thresholds.point._objectives import Selection
from costlib.thresholds.point._point_context import PointContext as _Context
from costlib.thresholds.point._selection_reason import selection_reason
from costlib.thresholds.point._target import Target

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "METHODS",
    "RECALL_NEEDS_AUDIT",
    "OperatingPoint",
    "estimated_recall",
    "point_at",
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
        more flagged items (see :func:`costlib.thresholds.point._frontier.marginal_precisions`).
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
        the constraints, the point is the nearest one (see
        :mod:`costlib.thresholds.point._objectives`);
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
    recall_bounds: RecallBounds | None = None

    def __repr__(self) -> str:
        """One line: method, rule, status, the thresholds by classifier and the counts; the
        curve's arrays are attributes (``path``, ``curve_tp``, ``curve_fp``), every field is in
        :meth:`summary`."""
        names = self.names or tuple(f"s{j + 1}" for j in range(len(self.thresholds)))
        thresholds = ", ".join(f"{n}={t:.4g}" for n, t in zip(names, self.thresholds,
                                                             strict=True))
        return (f"OperatingPoint(method={self.method!r}, rule={self.rule!r}, "
                f"status={self.status!r}, thresholds=({thresholds}), tp={self.tp:.6g}, "
                f"fp={self.fp:.6g}, precision={self.precision:.4g}, volume={self.volume:.6g}, "
                f"curve of {len(self.curve_tp)} points: .path, .curve_tp, .curve_fp; "
                f"every field: .summary())")

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
        s, _ = as_score_array(scores, self.names if is_data_frame(scores) else None)
        s = np.asarray(s, dtype=np.float64)
        if s.ndim == 1:
            s = s[:, None]
        k = len(self.thresholds)
        if s.ndim != 2 or s.shape[1] != k:
            raise ValueError(f"scores must have shape (n, {k}) for {k} classifiers, got {s.shape}")
        if np.isposinf(s).any():
            j = int(np.flatnonzero(np.isposinf(s).any(axis=0))[0])
            raise ValueError(f"score column {j} has +inf; scores must be finite, -inf or NaN")
        return flagged_rows(s, self.thresholds, self.rule)  # a NaN score never fires

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
    slope = ctx.objective.linear_slope
    if slope is not None:
        value = tp - slope * fp  # the scalar expression, not the array's
    else:
        value = chosen["objective"]
    status = "ok" if selection is None else selection.status
    free = None if unrestricted_flat is None else _cell_record(ctx, unrestricted_flat)
    reason = "" if selection is None else selection_reason(ctx, selection, chosen, free)
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
        recall_bounds=recall_bounds(grid, index, rule, ctx.recall_level),
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


def _make_context(grid: ThresholdGrid, spec: DecisionSpec, method: str, *,
                  refuse: bool) -> _Context:
    """The context of :func:`~costlib.thresholds.optimize` and :func:`point_at` on ``grid``
    (``refuse``: see :meth:`DecisionSpec.constraints_on`)."""
    if not isinstance(grid, ThresholdGrid):
        raise TypeError(f"grid must be a ThresholdGrid, got {type(grid).__name__}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    constraints = spec.constraints_on(grid, refuse=refuse)
    covered = grid.covered(spec.rule, spec.max_unrated_share)
    return _Context(grid, spec, method, constraints, None if covered.all() else covered)


def point_at(
    grid: ThresholdGrid,
    thresholds: ArrayLike,
    spec: DecisionSpec | None = None,
    *,
    method: str = "hull",
    **decision: Any,
) -> OperatingPoint:
    """What given thresholds achieve on a grid: an :class:`OperatingPoint` at a fixed place.

    For each classifier ``j`` the lattice index is the first candidate threshold
    ``t_j' >= t_j`` (``+inf`` = off), so the point flags exactly the rows ``thresholds`` flag
    when every finite threshold is a candidate (see
    :func:`costlib.thresholds.with_thresholds`) and a subset otherwise; ``details["exact"]``
    says which. TP, FP, volume, unrated, objective and estimated recall are read off the grid as for
    an optimised point; the "curve" is the single point (marginal precisions NaN). Arguments are
    those of :func:`~costlib.thresholds.optimize` (``method`` is only recorded). Nothing is
    chosen, so ``status`` is ``"ok"``.

    Parameters
    ----------
    grid : ThresholdGrid
    thresholds : array_like of shape (k,)
        One per classifier, finite or ``+inf``.
    spec : DecisionSpec, optional
        The decision; without it, ``**decision`` are :meth:`DecisionSpec.of`'s arguments.

    Returns
    -------
    OperatingPoint
    """
    ctx = _make_context(grid, as_decision_spec(spec, decision), method, refuse=False)
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
