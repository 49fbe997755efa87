"""Choosing the operating point of an ensemble: thresholds that meet a business trade-off.

Given a :class:`~costlib.thresholds.ThresholdGrid`, a combination rule and a target (see
:mod:`costlib.thresholds.point._target`), :func:`optimize` picks thresholds with one of four
methods:

``"graph"``
    The max-area monotone path through the lattice (:mod:`costlib.thresholds.point._lattice_path`;
    exact
    dynamic programming, same optimum as the paper's Bellman-Ford), then the point on that path
    maximising ``TP - r FP``.
``"analytic"``
    The paper's parametric-path method (:mod:`costlib.thresholds.point._analytic`).
``"hull"``
    The exact empirical optimum ``argmax TP - r FP`` over every cell, reported with the upper
    concave hull of all cells as its frontier (:mod:`costlib.thresholds.point._frontier`). No path
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
than ``TP - r FP`` and constraints are in :mod:`costlib.thresholds.point._objectives`; infeasible
constraints give ``status="infeasible"`` with the nearest point defined there. Grids without unrated
weight, the linear objective and no constraints give exactly the results of the plain methods.

The point is an :class:`~costlib.thresholds.OperatingPoint`
(:mod:`costlib.thresholds.point._operating_point`, which reads it off the grid).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.binning._rows import check_rule
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._analytic import fit_analytic_path
from costlib.thresholds.point._decision_spec import DecisionSpec, as_decision_spec
from costlib.thresholds.point._frontier import (
    best_cell,
    bucket_frontier,
    choose_on_curve,
    hull_neighbours,
    upper_hull,
)
from costlib.thresholds.point._lattice_path import max_area_path, max_area_paths
from costlib.thresholds.point._objectives import Selection, select
from costlib.thresholds.point._operating_point import OperatingPoint, _make_context, _on_curve
from costlib.thresholds.point._point_context import PointContext as _Context
from costlib.thresholds.point._resolution import lattice_resolution

__all__ = [
    "optimize",
    "optimize_each",
    "prepare_graph_paths",
]


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
    spec: DecisionSpec | None = None,
    *,
    method: str = "graph",
    n_buckets: int = 50,
    granularity: int = 512,
    frontier: bool = True,
    check_resolution: bool = True,
    **decision: Any,
) -> OperatingPoint:
    """Choose an operating point on a threshold grid.

    What the point must achieve is a :class:`~costlib.thresholds.DecisionSpec` (target, rule,
    objective, constraints, coverage, recall bound and level), or its keyword arguments
    (``**decision``, :meth:`DecisionSpec.of`: e.g. ``optimize(grid,
    target_marginal_precision=0.3, rule="any", method="hull")``).

    Parameters
    ----------
    grid : ThresholdGrid
    spec : DecisionSpec, optional
        The decision; without it, ``**decision`` builds one.
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
    **decision
        :meth:`DecisionSpec.of`'s keyword arguments (when ``spec`` is not given):

        - the trade-off, exactly one way: ``target_marginal_precision`` m in (0, 1),
          ``target_slope`` r = dTP/dFP = m / (1 - m), a 2x2 ``benefit_matrix`` (rows = true
          class, r = (b00 - b01) / (b11 - b10)), or a :class:`~costlib.thresholds.Target`.
          Required for the linear objective; for other objectives optional (it then only
          steers the analytic method's root finding, r = 1 when absent);
        - ``rule`` {"any", "all"} (aliases "or", "and"), default "any": flag an item when any
          (OR) / all (AND) classifiers fire;
        - ``max_unrated_share`` in [0, 1], default 0: only tuples whose flagged volume ``V``
          holds at most ``max_unrated_share * V`` unrated weight are returned (see the module
          docstring); irrelevant for grids without unrated;
        - ``objective`` (a registered objective:
          :func:`~costlib.thresholds.point._objective_registry.objective_names`; built in
          "linear", "fbeta", "f1", "precision_at_volume"), default "linear": ``TP - r FP``;
          F-beta with ``beta`` (default 1); precision at review volume ``volume``
          (:mod:`costlib.thresholds.point._objectives`);
        - constraints ``min_precision``, ``max_volume``, ``max_false_positives``:
          ``TP / (TP + FP) >= min_precision``, ``V <= max_volume`` (review capacity, unrated
          rows included), ``FP <= max_false_positives``;
        - ``min_recall`` in (0, 1]: ``TP >= min_recall * P``, the point flags at least this
          share of all positives. Needs a grid with audit rows (``grid.has_audit``); otherwise
          a ValueError (without an audit sample the total number of positives is unknown; see
          docs/audit.md);
        - ``recall_bound`` {"lower", "point"}, default "lower": ``P`` of ``min_recall``:
          ``"lower"`` takes the upper bound ``P_U`` of the total positives at
          ``recall_level`` (:func:`costlib.thresholds.total_positives_bounds`), so the floor
          holds on the lower bound of recall and is never met by an estimate the audit cannot
          support; ``"point"`` the Horvitz–Thompson estimate ``P̂`` (the grid's positive
          weight). Grids without an audit design use ``P̂``;
        - ``recall_level``, default 0.9: two-sided level of the recall interval of the point
          (``OperatingPoint.recall_bounds``, :func:`costlib.thresholds.recall_bounds`) and of
          ``P_U``.
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
    ctx = _make_context(grid, as_decision_spec(spec, decision), method, refuse=True)
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
    plain = covered is None and obj.linear_slope is not None and not cons.active
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
            unres = dataclasses.replace(ctx, covered=None)
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
    if obj.linear_slope is not None and not cons.active and (covered is None
                                                             or covered[fit.cell]):
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


#: The arguments of :func:`optimize` that say how, not what (the rest are the decision's).
_METHOD_ARGUMENTS = ("method", "n_buckets", "granularity", "frontier", "check_resolution")


def optimize_each(grids: Iterable[ThresholdGrid], spec: DecisionSpec | None = None,
                  **optimize_kwargs: Any) -> Iterator[OperatingPoint]:
    """``optimize(grid, spec, **optimize_kwargs)`` for every grid, in order, lazily.

    With the graph method (the default), consecutive grids of one lattice shape are taken
    :func:`graph_batch_size` at a time and their paths solved together
    (:func:`prepare_graph_paths`); a grid of another shape starts the next batch. The points
    are those of :func:`optimize` called on each grid alone. At most one batch of grids is
    held, plus the grid that starts the next.
    """
    how = {k: v for k, v in optimize_kwargs.items() if k in _METHOD_ARGUMENTS}
    spec = as_decision_spec(spec, {k: v for k, v in optimize_kwargs.items()
                                   if k not in _METHOD_ARGUMENTS})
    if how.get("method", "graph") != "graph":
        for grid in grids:
            yield optimize(grid, spec, **how)
        return
    rule = spec.rule
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
            yield optimize(grid, spec, **how)
        batch = following or list(itertools.islice(iterator, 1))


def _hull(ctx: _Context, plain: bool, frontier: bool) -> OperatingPoint:
    """The hull method: exact optimum over (covered, feasible) cells, hull of covered cells."""
    tp, fp = ctx.grid.counts(ctx.rule)
    details = {"full_frontier": bool(frontier)}
    if plain:
        slope = ctx.objective.linear_slope
        assert slope is not None  # plain: the linear objective
        cell = best_cell(tp, fp, slope)
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
