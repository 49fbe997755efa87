"""Per-group frontiers of one shared review capacity: each group's Pareto set and concave hull.

Steps 1 and 2 of the allocation in :mod:`costlib.thresholds.capacity._allocation` (the problem and
its
notation -- volumes ``V_g``, utilities ``U_g``, scales ``a_g``, a group's candidates -- are stated
there; steps 3-5 allocate the capacity on the frontiers computed here).

Method
------
1. *Pareto set.* Per group the candidates that no other candidate dominates (no more volume and
   at least the utility, one of them strictly), sorted by volume: volume and utility both rise
   along it. Only these can be in an optimal allocation. Computed for all groups together from
   their non-zero cells: each axis is compressed to the slices a group occupies (thresholds
   between two occupied slices give equal counts; rule ``any`` with ``s = 0`` also drops the
   thresholds below the covered box), groups of similar compressed size are stacked for the
   cumulative sums, a lattice-neighbour dominance filter follows (raising one threshold never
   adds volume, so a neighbour with at least the utility dominates), then one sort.
2. *Concave frontier.* The upper concave hull of each Pareto set (its vertices ``p_0, ..., p_m``,
   slopes ``(U_{i+1} - U_i) / (V_{i+1} - V_i)`` strictly decreasing and positive). The
   Lagrangian ``max_t U_g(t) - lambda V_g(t)`` is attained at the vertex where the slope crosses
   ``lambda``; each group's chosen volume, hence the total, is non-increasing in ``lambda``.

Ties (deterministic): among cells with equal volume and utility the one with the largest
row-major index (the highest thresholds) represents them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib._messages import plain
from costlib.thresholds.binning._rows import check_rule
from costlib.thresholds.grid._grid import ThresholdGrid, lattice_counts
from costlib.thresholds.point._decision_spec import DecisionSpec
from costlib.thresholds.point._objective_registry import (
    capacity_objective,
    capacity_objective_names,
)
from costlib.thresholds.point._target import Target

__all__ = [
    "ALLOCATION_OBJECTIVES",
    "GroupFrontier",
    "as_capacity_spec",
    "capacity_spec",
    "group_frontiers",
]

#: The capacity objectives built in (:func:`capacity_objective_names` lists those registered
#: since too).
ALLOCATION_OBJECTIVES = capacity_objective_names()

#: Lattice cells per batch of stacked groups (bounds the temporaries of step 1).
BATCH_CELLS = 1 << 21

#: Vectorised hull passes before the groups still changing are finished one by one.
_HULL_PASSES = 12

_F = NDArray[np.float64]
_I = NDArray[np.intp]


@dataclass(frozen=True, eq=False)
class GroupFrontier:
    """A group's candidates that matter: its Pareto set and the concave frontier on it.

    Attributes
    ----------
    group : str
    shape : tuple of int
        Lattice shape.
    cells : ndarray of int, shape (n,)
        Row-major flat cell index of each Pareto point, by increasing volume (and utility).
    volume, utility, true_positives, false_positives : ndarray of float, shape (n,)
        Scaled by the group's ``volume_scale``.
    hull : ndarray of int, shape (m,)
        Positions (into the arrays above) of the upper concave frontier's vertices, increasing.
        Empty for a group without candidates.
    """

    group: str
    shape: tuple[int, ...]
    cells: _I
    volume: _F
    utility: _F
    true_positives: _F
    false_positives: _F
    hull: _I

    @property
    def feasible(self) -> bool:
        """Whether the group has a candidate."""
        return bool(self.cells.size)

    def slopes(self) -> _F:
        """Slopes ``dU/dV`` of the frontier's segments, strictly decreasing (computed once:
        the multiplier search asks every group for them many times)."""
        cached: _F | None = self.__dict__.get("_slopes")
        if cached is None:
            h = self.hull
            cached = np.diff(self.utility[h]) / np.diff(self.volume[h])
            cached.setflags(write=False)
            self.__dict__["_slopes"] = cached
        return cached

    def vertices(self) -> GroupFrontier:
        """The frontier reduced to its hull vertices (``hull`` = every position).

        Steps 3-4 (the LP, ``lambda`` and the greedy allocation) read only the vertices, and
        the group's best candidate (its last Pareto point) is the last vertex, so they give
        the same allocation on the reduced frontier; the exact programme (step 5) and
        :func:`~costlib.thresholds.capacity._split_baselines.utility_within` need the whole Pareto
        set.
        """
        h = self.hull
        return GroupFrontier(group=self.group, shape=self.shape, cells=self.cells[h],
                             volume=self.volume[h], utility=self.utility[h],
                             true_positives=self.true_positives[h],
                             false_positives=self.false_positives[h],
                             hull=np.arange(h.size, dtype=np.intp))

    def choose(self, multiplier: float) -> int:
        """Position of the hull vertex maximising ``U - multiplier * V`` (ties: less volume):
        the vertex after the segments whose slope exceeds ``multiplier``."""
        if not self.feasible:
            raise ValueError(f"group {self.group!r} has no candidate cell")
        return int(self.hull[int(np.count_nonzero(self.slopes() > multiplier))])


# ----------------------------------------------------------------------------- validation
def _per_group(name: str, values: Mapping[str, float] | None, groups: list[str],
               default: float, *, positive: bool = False) -> _F:
    out = np.full(len(groups), default, dtype=np.float64)
    if values is None:
        return out
    position = {g: i for i, g in enumerate(groups)}
    unknown = [g for g in values if g not in position]
    if unknown:
        raise ValueError(f"{name} names groups that have no grid: {unknown[:5]}")
    for g, v in values.items():
        x = float(v)
        ok = math.isfinite(x) and (x > 0 if positive else x >= 0)
        if not ok:
            bound = "> 0" if positive else ">= 0"
            raise ValueError(f"{name}[{g!r}] must be finite and {bound}, got {plain(v)}")
        out[position[g]] = x
    return out


def _check_grids(grids: Mapping[str, ThresholdGrid]) -> list[str]:
    groups = list(grids)
    if not groups:
        raise ValueError("allocate_capacity needs at least one group")
    first = grids[groups[0]]
    for g in groups:
        grid = grids[g]
        if not isinstance(grid, ThresholdGrid):
            raise ValueError(f"group {g!r}: expected a ThresholdGrid, got {type(grid).__name__}")
        if len(grid.edges) != len(first.edges) or not all(
                np.array_equal(a, b) for a, b in zip(grid.edges, first.edges, strict=True)):
            raise ValueError(f"groups {groups[0]!r} and {g!r} have different edges: one capacity "
                             "is shared over grids of one lattice; place the edges once over "
                             "every group's rows (edges = decision_edges(all_scores, "
                             "all_labels)) and build each group's grid with them "
                             "(ThresholdGrid.from_scores(group_scores, group_labels, edges))")
    return groups


def capacity_spec(*, rule: str = "any", objective: str = "linear", target: Target | None = None,
                  max_unrated_share: float = 0.0) -> DecisionSpec:
    """The :class:`~costlib.thresholds.DecisionSpec` of a shared capacity: ``rule``, the
    capacity ``objective`` (a registered one,
    :func:`~costlib.thresholds.point._objective_registry.capacity_objective_names`: built in
    ``"linear"``, ``U = TP - r FP`` with ``target``'s slope ``r``, and ``"true_positives"``,
    ``U = TP``, which takes no target) and the coverage ``max_unrated_share``."""
    rule = check_rule(rule)
    made = capacity_objective(objective).for_allocation(target)
    return DecisionSpec(target, made, rule, max_unrated_share=max_unrated_share)


def as_capacity_spec(spec: DecisionSpec | None, decision: Mapping[str, Any]) -> DecisionSpec:
    """``spec`` (its objective one a capacity may be allocated by), or :func:`capacity_spec` of
    the keyword arguments ``decision``; both at once are refused."""
    if spec is None:
        return capacity_spec(**decision)
    if decision:
        raise TypeError(f"give a DecisionSpec or its keyword arguments, not both (got "
                        f"{', '.join(sorted(decision))} too)")
    if not spec.objective.for_capacity:
        raise ValueError(f"objective must be one of {capacity_objective_names()}, got "
                         f"{spec.objective.name!r}")
    return spec


# ----------------------------------------------------------------------------- step 1 and 2
@dataclass(frozen=True)
class _Sparse:
    """Non-zero cells of every group's histograms, and each axis' compressed coordinates.

    Along axis ``j`` the counts of a group change only where ``t_j`` passes an occupied slice
    ``c >= 1`` (slice 0, scores below the first edge, never fires), so with the occupied slices
    ``c_1 < ... < c_m`` the thresholds ``t_j`` in ``[c_i, c_{i+1} - 1]`` (``c_0 = 0``,
    ``c_{m+1} = B_j + 1``) all give the same counts: compressed index ``i``, represented by the
    largest of them, ``c_{i+1} - 1``. Compressed indices past ``m`` (padding of a batch) flag
    nothing along ``j`` and are represented by ``B_j`` ("off").
    """

    group: _I
    coords: tuple[_I, ...]  # compressed coordinate per axis of every entry
    values: _F  # (3, n): negatives, positives, unrated
    sizes: _I  # (G, k): compressed lattice shape per group, m_j + 1
    reps: tuple[_I, ...]  # per axis (G, B_j + 2): original index of each compressed index

    @classmethod
    def of(cls, grids: list[ThresholdGrid], box: bool) -> _Sparse:
        """With ``box`` (rule any, unrated share 0) the covered tuples of a group are exactly
        ``t >= f`` with ``f_j`` the largest coordinate of an unrated cell along axis ``j``
        (``U(t) = 0`` iff every unrated cell lies at or below ``t``): slices ``c <= f_j`` are
        merged into compressed index 0 and the compressed lattice holds covered tuples only."""
        shape = grids[0].shape
        group, cells, neg, pos, unr = [], [], [], [], []
        for i, grid in enumerate(grids):
            total = grid.pos + grid.neg
            unrated_cells = grid._unrated() if grid.has_unrated else None
            if unrated_cells is not None:
                total += unrated_cells
            nz = np.flatnonzero(total != 0)  # on a mask: ~4x faster than on floats
            group.append(np.full(nz.size, i, dtype=np.intp))
            cells.append(nz)
            neg.append(grid.neg.ravel()[nz])
            pos.append(grid.pos.ravel()[nz])
            unr.append(np.zeros(nz.size) if unrated_cells is None else unrated_cells.ravel()[nz])
        grp: _I = np.concatenate(group)
        values = np.stack([np.concatenate(neg), np.concatenate(pos), np.concatenate(unr)])
        coords = np.unravel_index(np.concatenate(cells), shape)
        compressed, sizes, reps = [], [], []
        unrated = values[2] != 0
        for axis, n in enumerate(shape):
            occupied = np.zeros((len(grids), n), dtype=bool)
            occupied[grp, coords[axis]] = True
            floor = np.zeros(len(grids), dtype=np.intp)
            if box:
                np.maximum.at(floor, grp[unrated], coords[axis][unrated])
            occupied &= np.arange(n)[None, :] > floor[:, None]
            compressed.append(np.cumsum(occupied, axis=1)[grp, coords[axis]].astype(np.intp))
            sizes.append(occupied.sum(axis=1) + 1)
            rep = np.full((len(grids), n + 1), n - 1, dtype=np.intp)
            gi, ci = np.nonzero(occupied)
            starts = np.searchsorted(gi, np.arange(len(grids)))
            rep[gi, np.arange(gi.size) - starts[gi]] = ci - 1
            reps.append(rep)
        return cls(grp, tuple(compressed), values,
                   np.stack(sizes, axis=1).astype(np.intp), tuple(reps))


def _candidates(grids: list[ThresholdGrid], rule: str, slope: float | None, share: float,
                scale: _F, vmin: _F, vmax: _F) -> tuple[_I, _I, _F, _F, _F, _F]:
    """Candidates no lattice neighbour dominates: ``(group, cell, V, U, TP, FP)``, unsorted.

    Groups are taken in batches of similar compressed lattice size (:class:`_Sparse`), each
    batch as one stacked array of compressed histograms.
    """
    box = rule == "any" and share == 0.0
    sparse = _Sparse.of(grids, box)
    k = grids[0].k
    shape = grids[0].shape
    order = np.lexsort((np.arange(len(grids)), np.prod(sparse.sizes, axis=1)))
    position = np.argsort(sparse.group, kind="stable")
    entry_bounds = np.searchsorted(sparse.group[position], np.arange(len(grids) + 1))
    out = []
    start = 0
    sizes = sparse.sizes[order].tolist()
    while start < order.size:
        stop, dims = start + 1, sizes[start]
        while stop < order.size:
            grown = [max(a, b) for a, b in zip(dims, sizes[stop], strict=True)]
            if math.prod(grown) * (stop + 1 - start) > BATCH_CELLS:
                break
            stop, dims = stop + 1, grown
        batch = order[start:stop]
        start = stop
        out.append(_candidates_batch(sparse, batch, entry_bounds, position, rule, slope, share,
                                     scale, vmin, vmax, k, shape, box))
    return tuple(np.concatenate([o[i] for o in out]) for i in range(6))  # type: ignore[return-value]


def _candidates_batch(sparse: _Sparse, batch: _I, entry_bounds: _I, position: _I, rule: str,
                      slope: float | None, share: float, scale: _F, vmin: _F, vmax: _F, k: int,
                      shape: tuple[int, ...], box: bool) -> tuple[_I, _I, _F, _F, _F, _F]:
    b = batch.size
    dims = tuple(int(x) for x in sparse.sizes[batch].max(axis=0))
    entries = np.concatenate([position[entry_bounds[g]:entry_bounds[g + 1]] for g in batch])
    local = np.repeat(np.arange(b), entry_bounds[batch + 1] - entry_bounds[batch])
    flat = np.ravel_multi_index(tuple(c[entries] for c in sparse.coords), dims)
    size = int(np.prod(dims))
    channels = 2 if box else 3  # in a box every compressed tuple is covered
    hist = np.empty((channels, b * size))
    for channel in range(channels):
        hist[channel] = np.bincount(local * size + flat, weights=sparse.values[channel, entries],
                                    minlength=b * size)
    counts = lattice_counts(hist.reshape(channels, b, *dims), rule, k).reshape(channels, b, size)
    fp, tp = counts[0], counts[1]
    vol = tp + fp
    covered: NDArray[np.bool_] | bool = True
    if not box:
        unr = counts[2]
        vol += unr
        covered = unr == 0 if share == 0.0 else unr <= share * vol
    sc = scale[batch][:, None]
    vol *= sc
    util = tp.copy() if slope is None else tp - slope * fp
    util *= sc
    cand = (vol >= vmin[batch][:, None]) & (vol <= vmax[batch][:, None]) & covered
    # A candidate with a candidate neighbour of a higher threshold (never more volume) that has
    # at least its utility is dominated (or equal, and the neighbour represents it).
    c = cand.reshape(b, *dims)
    u = util.reshape(b, *dims)
    dominated = np.zeros_like(c)
    for axis in range(1, k + 1):
        lo = [slice(None)] * (k + 1)
        hi = [slice(None)] * (k + 1)
        lo[axis] = slice(0, -1)
        hi[axis] = slice(1, None)
        dominated[tuple(lo)] |= c[tuple(hi)] & (u[tuple(hi)] >= u[tuple(lo)])
    keep = cand & ~dominated.reshape(b, -1)
    # Where "flag nothing" (V = U = 0) is a candidate, it dominates every cell with U <= 0.
    off = cand[:, -1]
    keep &= ~(off[:, None] & (util <= 0))
    keep[:, -1] = off
    grp, cell = np.nonzero(keep)
    g = batch[grp]
    compressed = np.unravel_index(cell, dims)
    original = np.ravel_multi_index(
        tuple(rep[g, ci] for rep, ci in zip(sparse.reps, compressed, strict=True)), shape)
    return (g.astype(np.intp), original.astype(np.intp), vol[grp, cell], util[grp, cell],
            tp[grp, cell] * scale[g], fp[grp, cell] * scale[g])


def _pareto(grp: _I, cell: _I, v: _F, w: _F, tp: _F, fp: _F
            ) -> tuple[_I, _I, _F, _F, _F, _F]:
    """Every group's Pareto points, sorted by group, then increasing volume."""
    order = np.lexsort((-cell, -w, v, grp))
    grp, cell, v, w = grp[order], cell[order], v[order], w[order]
    # Pareto: utility strictly above every point of the same group with less (or equal) volume.
    # Exact ranks of the utilities, offset by group, make one running maximum reset per group.
    _, rank = np.unique(w, return_inverse=True)
    key = grp.astype(np.int64) * (int(rank.max(initial=0)) + 1) + rank.ravel()
    running = np.maximum.accumulate(key)
    front = np.ones(key.size, dtype=bool)
    front[1:] = key[1:] > running[:-1]
    keep = order[front]
    return grp[front], cell[front], v[front], w[front], tp[keep], fp[keep]


def _hull_python(v: list[float], u: list[float]) -> list[int]:
    """Upper concave hull (monotone chain) of points sorted by increasing v and u."""
    out: list[int] = []
    for i in range(len(v)):
        while len(out) >= 2:
            a, b = out[-2], out[-1]
            if (u[b] - u[a]) * (v[i] - v[a]) <= (u[i] - u[a]) * (v[b] - v[a]):
                out.pop()
            else:
                break
        out.append(i)
    return out


def _hulls(grp: _I, v: _F, u: _F) -> NDArray[np.bool_]:
    """Mask of the upper concave hull vertices of every group's Pareto chain.

    Each pass drops, in every group at once, the points on or below the chord of their two
    neighbours (a hull vertex never is); a chain where no point is dropped is the hull. Groups
    still changing after a few passes are finished with a monotone chain one by one.
    """
    alive = np.arange(grp.size)
    for _ in range(_HULL_PASSES):
        g, x, y = grp[alive], v[alive], u[alive]
        inner = (g[1:-1] == g[:-2]) & (g[1:-1] == g[2:])
        drop = inner & ((y[1:-1] - y[:-2]) * (x[2:] - x[:-2])
                        <= (y[2:] - y[:-2]) * (x[1:-1] - x[:-2]))
        if not drop.any():
            break
        kept = np.ones(alive.size, dtype=bool)
        kept[1:-1] = ~drop
        alive = alive[kept]
    else:
        g = grp[alive]
        bounds = np.flatnonzero(np.diff(g)) + 1
        pieces = []
        for part in np.split(alive, bounds):
            idx = _hull_python(v[part].tolist(), u[part].tolist())
            pieces.append(part[idx])
        alive = np.concatenate(pieces) if pieces else alive
    mask = np.zeros(grp.size, dtype=bool)
    mask[alive] = True
    return mask


def group_frontiers(
    grids: Mapping[str, ThresholdGrid],
    spec: DecisionSpec | None = None,
    *,
    min_volume: Mapping[str, float] | None = None,
    max_volume: Mapping[str, float] | None = None,
    volume_scale: Mapping[str, float] | None = None,
    **decision: Any,
) -> dict[str, GroupFrontier]:
    """Every group's Pareto set and concave frontier (steps 1-2 of the module docstring).

    ``spec`` (:func:`capacity_spec`; or its keyword arguments ``rule``, ``objective``,
    ``target``, ``max_unrated_share``) and the per-group bounds as for
    :func:`~costlib.thresholds.allocate_capacity`.
    """
    spec = as_capacity_spec(spec, decision)
    slope = spec.objective.linear_slope
    groups = _check_grids(grids)
    share = spec.max_unrated_share
    scale = _per_group("volume_scale", volume_scale, groups, 1.0, positive=True)
    vmin = _per_group("min_volume", min_volume, groups, 0.0)
    vmax = _per_group("max_volume", max_volume, groups, math.inf)
    shape = grids[groups[0]].shape
    grp, cell, v, u, tp, fp = _pareto(*_candidates([grids[g] for g in groups], spec.rule, slope,
                                                   share, scale, vmin, vmax))
    on_hull = _hulls(grp, v, u)
    bounds = np.searchsorted(grp, np.arange(len(groups) + 1))
    out = {}
    for i, g in enumerate(groups):
        a, b = int(bounds[i]), int(bounds[i + 1])
        out[g] = GroupFrontier(group=g, shape=shape, cells=cell[a:b], volume=v[a:b],
                               utility=u[a:b], true_positives=tp[a:b],
                               false_positives=fp[a:b],
                               hull=np.flatnonzero(on_hull[a:b]).astype(np.intp))
    return out
