"""Choosing the operating point of an ensemble: thresholds that meet a business trade-off.

Given a :class:`~costlib.grid.ThresholdGrid`, a combination rule and a target (see
:mod:`costlib.target`), :func:`optimize` picks thresholds with one of four methods:

``"graph"``
    The max-area monotone path through the lattice (:mod:`costlib.lattice_path`; exact dynamic
    programming, same optimum as the paper's Bellman-Ford), then the point on that path
    maximising ``TP - r FP``.
``"analytic"``
    The paper's parametric-path method (:mod:`costlib.analytic`).
``"hull"``
    The exact empirical optimum ``argmax TP - r FP`` over every cell, reported with the upper
    concave hull of all cells as its frontier (:mod:`costlib.frontier`). No path restriction, so
    its ``TP - r FP`` is an upper bound for every other method on the same grid.
``"bucket"``
    The manual baseline: highest-TP cell per FP bucket, then ``argmax TP - r FP`` on those.

On a concave PN curve, maximising ``TP - r FP`` is the paper's "derivative equals target" rule;
on the empirical, stepwise curves it is its exact discrete counterpart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib.analytic import fit_analytic_path
from costlib.frontier import (
    best_cell,
    bucket_frontier,
    choose_on_curve,
    hull_neighbours,
    marginal_precisions,
    upper_hull,
)
from costlib.grid import RULES, ThresholdGrid
from costlib.lattice_path import max_area_path
from costlib.target import Target, resolve_target

__all__ = ["METHODS", "OperatingPoint", "optimize"]

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
        more flagged items (see :func:`costlib.frontier.marginal_precisions`).
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
    """

    method: str
    rule: str
    target: Target
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

    @property
    def position(self) -> int:
        """Position of the point on its curve."""
        matches = np.flatnonzero((self.path == np.asarray(self.index)).all(axis=1))
        return int(matches[0])

    def summary(self) -> dict[str, Any]:
        """Flat, JSON-friendly record of the point (no curves)."""
        names = self.names or tuple(f"s{j + 1}" for j in range(len(self.thresholds)))
        return {
            "method": self.method,
            "rule": self.rule,
            "target_marginal_precision": self.target.marginal_precision,
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
        }


def _on_curve(
    grid: ThresholdGrid,
    rule: str,
    method: str,
    target: Target,
    path: NDArray[np.intp],
    position: int,
    curve_kind: str,
    area: float,
    details: dict[str, Any] | None = None,
) -> OperatingPoint:
    tp_all, fp_all = grid.counts(rule)
    idx = tuple(path.T)
    curve_tp = np.asarray(tp_all[idx], dtype=np.float64)
    curve_fp = np.asarray(fp_all[idx], dtype=np.float64)
    index = tuple(int(i) for i in path[position])
    tp, fp = float(curve_tp[position]), float(curve_fp[position])
    left, right = marginal_precisions(curve_tp, curve_fp, position)
    return OperatingPoint(
        method=method,
        rule=rule,
        target=target,
        thresholds=grid.threshold_values(index),
        index=index,
        tp=tp,
        fp=fp,
        precision=_precision(tp, fp),
        marginal_precision_left=left,
        marginal_precision_right=right,
        objective=tp - target.slope * fp,
        path=path,
        curve_tp=curve_tp,
        curve_fp=curve_fp,
        curve_kind=curve_kind,
        area=area,
        rated_positives=grid.total_positives,
        rated_negatives=grid.total_negatives,
        names=grid.names,
        details=details or {},
    )


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
) -> OperatingPoint:
    """Choose an operating point on a threshold grid.

    Give the trade-off exactly one way: ``target_marginal_precision`` m in (0, 1),
    ``target_slope`` r = dTP/dFP = m / (1 - m), a 2x2 ``benefit_matrix`` (rows = true class,
    r = (b00 - b01) / (b11 - b10)), or a :class:`~costlib.target.Target`.

    Parameters
    ----------
    grid : ThresholdGrid
    rule : {"any", "all"}, default "any"
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

    Returns
    -------
    OperatingPoint
    """
    if not isinstance(grid, ThresholdGrid):
        raise TypeError(f"grid must be a ThresholdGrid, got {type(grid).__name__}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    tgt = resolve_target(target_marginal_precision, target_slope, benefit_matrix, target)
    tp, fp = grid.counts(rule)
    r = tgt.slope

    if method == "graph":
        path, area = max_area_path(tp, fp)
        position = choose_on_curve(tp[tuple(path.T)], fp[tuple(path.T)], r)
        return _on_curve(grid, rule, method, tgt, path, position, "path", area)

    if method == "hull":
        cell = best_cell(tp, fp, r)
        if frontier:
            flat = upper_hull(tp, fp)
        else:  # the optimum with its two hull neighbours: enough for the marginal precisions
            left, right = hull_neighbours(tp, fp, cell)
            flat = np.array(
                [i for i in (right, np.ravel_multi_index(cell, tp.shape), left) if i is not None],
                dtype=np.intp,
            )
        path = np.column_stack(np.unravel_index(flat, tp.shape)).astype(np.intp)
        curve_tp, curve_fp = tp.ravel()[flat], fp.ravel()[flat]
        same = np.flatnonzero((curve_tp == tp[cell]) & (curve_fp == fp[cell]))
        if same.size == 0:  # cannot happen for slope > 0; a guard with a clear message
            raise RuntimeError("hull optimum is not a hull vertex; please report this grid")
        position = int(same[0])
        path[position] = cell  # report the optimum itself (a hull vertex may have duplicates)
        details = {"full_frontier": bool(frontier)}
        return _on_curve(grid, rule, method, tgt, path, position, "frontier", float("nan"), details)

    if method == "bucket":
        flat = bucket_frontier(tp, fp, n_buckets)
        path = np.column_stack(np.unravel_index(flat, tp.shape)).astype(np.intp)
        position = choose_on_curve(tp.ravel()[flat], fp.ravel()[flat], r)
        details = {"n_buckets": int(n_buckets)}
        return _on_curve(grid, rule, method, tgt, path, position, "frontier", float("nan"), details)

    fit = fit_analytic_path(tp, fp, r, granularity=granularity)
    path = fit.path_cells
    position = int(np.flatnonzero((path == np.asarray(fit.cell)).all(axis=1))[0])
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
    return _on_curve(grid, rule, method, tgt, path, position, "path", area, details)
