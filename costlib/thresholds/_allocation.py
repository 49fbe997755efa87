"""One review capacity shared by many groups: thresholds per group under a common volume budget.

Problem
-------
Every group ``g`` (market, surface, policy) has its own
:class:`~costlib.thresholds.ThresholdGrid` on one lattice. Choose one threshold tuple ``t_g``
per group to

.. math:: \\max \\sum_g U_g(t_g) \\quad \\text{s.t.} \\quad \\sum_g V_g(t_g) \\le C,

where ``V_g(t) = a_g (TP + FP + U_unrated)`` is the flagged volume (unrated rows included, as
:meth:`~costlib.thresholds.ThresholdGrid.volume`) and ``U_g`` the utility, ``a_g (TP - r FP)``
(``objective="linear"``, target slope ``r``) or ``a_g TP`` (``objective="true_positives"``).
``a_g`` is the group's ``volume_scale`` (expected next-period rows / window rows, default 1): the
capacity is next period's, so both the group's volumes and what they yield are scaled by it
(scaling only ``V`` would claim the window's true positives for ``a_g`` times the reviews).
A group's *candidates* are its covered cells (``U_unrated(t) <= s V(t)``,
:meth:`~costlib.thresholds.ThresholdGrid.covered`, ``s = max_unrated_share``) whose scaled
volume lies in ``[min_volume[g], max_volume[g]]``; the all-off cell ("flag nothing", ``V = U = 0``)
is one of them unless ``min_volume[g] > 0``.

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
3. *LP optimum and lambda.* Start every group at ``p_0`` (its smallest volume) and take the
   frontier segments of all groups in decreasing slope (ties: group order, then segment order)
   while they fit in ``C``. The first segment that does not fit is split: the fractional
   allocation is the optimum of the LP relaxation (every group may mix two neighbouring
   vertices), and its value equals the Lagrangian dual
   ``L(lambda) = sum_g max_t (U_g - lambda V_g) + lambda C`` at ``lambda`` = the split segment's
   slope, the smallest ``L``: an upper bound on every integral allocation (``upper_bound``).
   ``lambda`` is the marginal utility of one more unit of capacity (0 when every group gets its
   best point). For the linear objective a segment with no unrated rows has
   ``dU/dV = p - r (1 - p)`` at marginal precision ``p``: every group is cut where the
   precision of its next reviews falls to ``(lambda + r) / (1 + r)``
   (``marginal_precision``); for true positives ``lambda`` is that precision itself.
4. *Integral allocation.* The split group keeps its lower vertex (feasible: at most one group is
   between two vertices). The remaining capacity is then filled greedily with the next segments
   that still fit (in slope order, never past a segment a group had to skip). The
   ``integrality_gap`` is ``upper_bound - total_utility``.
5. *Exact optimum* (``exact=True``, or ``"auto"`` within a work budget). The exact optimum over
   the lattice: the largest ``sum_g U_g`` over every combination of one candidate cell per group
   with ``sum_g V_g <= C`` -- *not* restricted to frontier vertices (an optimum may use Pareto
   points below the concave hull), and exact for real-valued volumes (no discretised volume
   axis). It is a dynamic programme over groups on Pareto sets of partial sums (Nemhauser-
   Ullmann): the states after ``g`` groups are the non-dominated ``(sum V, sum U)`` pairs with
   ``sum V <= C``; states whose utility plus the LP bound of the remaining groups (step 3 on
   them) cannot reach the greedy allocation's value (less a relative ``1e-9``) are dropped.
   "Exact" is up to float64 rounding of the utilities ``TP - r FP`` and of the scaled volumes;
   volumes are summed in group order and compared with ``C`` as computed. With ``exact="auto"``
   the programme runs for at most :data:`EXACT_AUTO_GROUPS` groups with a candidate and stops
   (the greedy allocation is kept, ``exact=False``) once it has formed more than
   :data:`EXACT_BUDGET` state-candidate pairs.

Statuses (per group): ``"ok"`` (the group got its best candidate, the one it would choose with
unlimited capacity: the most utility, then the least volume), ``"capacity_bound"`` (the shared
capacity holds it below that) and ``"infeasible"`` (no candidate: no covered cell within its
volume bounds; it is given the all-off cell and no capacity). When even the groups' smallest
candidate volumes exceed ``C`` the allocation is ``feasible=False``: every group gets its
smallest-volume candidate, ``multiplier = inf`` and the bound and gap are NaN.

Ties (deterministic): among cells with equal volume and utility the one with the largest
row-major index (the highest thresholds) represents them; the exact programme prefers the
smaller total volume among equal utilities.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from costlib._messages import plain
from costlib.thresholds._grid import ThresholdGrid, lattice_counts
from costlib.thresholds._rows import check_rule
from costlib.thresholds._target import Target

__all__ = [
    "ALLOCATION_OBJECTIVES",
    "EXACT_AUTO_GROUPS",
    "EXACT_BUDGET",
    "CapacityAllocation",
    "GroupAllocation",
    "GroupFrontier",
    "SplitBaselines",
    "allocate_capacity",
    "allocate_frontiers",
    "grid_rows",
    "group_frontiers",
    "lagrangian_volume",
    "split_baselines",
    "split_shares",
    "utility_within",
    "volume_scales",
]

ALLOCATION_OBJECTIVES = ("linear", "true_positives")

#: ``exact="auto"``: the exact programme gives up after forming this many state-candidate pairs.
EXACT_BUDGET = 4_000_000

#: ``exact="auto"``: the exact programme is tried for at most this many feasible groups.
EXACT_AUTO_GROUPS = 64

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
        :func:`utility_within` need the whole Pareto set.
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


@dataclass(frozen=True)
class GroupAllocation:
    """What one group gets. Counts are scaled by the group's ``volume_scale``.

    ``best_volume``/``best_utility`` describe the group's best candidate (what it would take with
    unlimited capacity); NaN for an infeasible group.
    """

    group: str
    index: tuple[int, ...]
    thresholds: tuple[float, ...]
    volume: float
    utility: float
    true_positives: float
    false_positives: float
    status: str
    best_volume: float
    best_utility: float


@dataclass(frozen=True)
class CapacityAllocation:
    """Result of :func:`allocate_capacity` (see the module docstring for every quantity).

    Attributes
    ----------
    groups : dict of str to GroupAllocation
        In the order of the input mapping.
    capacity : float
    objective, rule : str
    target_slope : float or None
    multiplier : float
        ``lambda``: marginal utility of one more unit of capacity.
    marginal_precision : float
        Precision of the marginal reviews at ``lambda``: ``(lambda + r) / (1 + r)`` (linear) or
        ``lambda`` (true positives); NaN when infeasible.
    total_volume, total_utility : float
        Of the returned (integral) allocation.
    lagrangian_total : float
        ``L(lambda) = sum_g max_t (U_g - lambda V_g) + lambda C``; equals ``upper_bound``.
    upper_bound : float
        The LP relaxation / Lagrangian dual value.
    integrality_gap : float
        ``upper_bound - total_utility`` (>= 0 up to rounding).
    greedy_utility : float
        Utility of the greedy allocation of step 4 (what is returned unless ``exact``).
    exact : bool
        Whether the returned allocation is the exact optimum over the lattice.
    feasible : bool
        Whether the groups' smallest candidate volumes fit in the capacity.
    frontiers : dict of str to GroupFrontier
    """

    groups: dict[str, GroupAllocation]
    capacity: float
    objective: str
    rule: str
    target_slope: float | None
    multiplier: float
    marginal_precision: float
    total_volume: float
    total_utility: float
    lagrangian_total: float
    upper_bound: float
    integrality_gap: float
    greedy_utility: float
    exact: bool
    feasible: bool
    frontiers: dict[str, GroupFrontier] = field(repr=False)

    def to_frame(self) -> pd.DataFrame:
        """One row per group: thresholds, volume, utility, counts, status."""
        rows: list[dict[str, Any]] = []
        for a in self.groups.values():
            row: dict[str, Any] = {"group": a.group, "status": a.status, "volume": a.volume,
                                   "utility": a.utility, "true_positives": a.true_positives,
                                   "false_positives": a.false_positives,
                                   "best_volume": a.best_volume, "best_utility": a.best_utility}
            row.update({f"threshold_{j}": t for j, t in enumerate(a.thresholds)})
            rows.append(row)
        return pd.DataFrame(rows)


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
                             "is shared over grids of one lattice")
    return groups


def _utility_slope(objective: str, target: float | Target | None) -> float | None:
    if objective not in ALLOCATION_OBJECTIVES:
        raise ValueError(f"objective must be one of {ALLOCATION_OBJECTIVES}, got {objective!r}")
    if objective == "true_positives":
        if target is not None:
            raise ValueError("target is the slope r of the linear objective; "
                             "objective='true_positives' takes none")
        return None
    if target is None:
        raise ValueError("the linear objective needs a target (slope r = dTP/dFP)")
    return target.slope if isinstance(target, Target) else Target(float(target)).slope


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
    *,
    rule: str = "any",
    objective: str = "linear",
    target: float | Target | None = None,
    max_unrated_share: float = 0.0,
    min_volume: Mapping[str, float] | None = None,
    max_volume: Mapping[str, float] | None = None,
    volume_scale: Mapping[str, float] | None = None,
) -> dict[str, GroupFrontier]:
    """Every group's Pareto set and concave frontier (steps 1-2 of the module docstring).

    Arguments as for :func:`allocate_capacity`.
    """
    rule = check_rule(rule)
    slope = _utility_slope(objective, target)
    groups = _check_grids(grids)
    share = float(max_unrated_share)
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"max_unrated_share must be in [0, 1], got {plain(max_unrated_share)}")
    scale = _per_group("volume_scale", volume_scale, groups, 1.0, positive=True)
    vmin = _per_group("min_volume", min_volume, groups, 0.0)
    vmax = _per_group("max_volume", max_volume, groups, math.inf)
    shape = grids[groups[0]].shape
    grp, cell, v, u, tp, fp = _pareto(*_candidates([grids[g] for g in groups], rule, slope,
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


# ----------------------------------------------------------------------------- steps 3 and 4
@dataclass(frozen=True)
class _Segments:
    """All groups' frontier segments in the order the greedy takes them."""

    group: _I  # index into the list of feasible frontiers
    upper: _I  # position (into the group's Pareto arrays) of the segment's upper vertex
    dv: _F
    du: _F

    @classmethod
    def of(cls, fronts: list[GroupFrontier]) -> _Segments:
        g, up, dv, du, step = [], [], [], [], []
        for i, f in enumerate(fronts):
            h = f.hull
            if h.size > 1:
                g.append(np.full(h.size - 1, i, dtype=np.intp))
                up.append(h[1:])
                dv.append(np.diff(f.volume[h]))
                du.append(np.diff(f.utility[h]))
                step.append(np.arange(h.size - 1))
        if not g:
            empty = np.zeros(0)
            return cls(np.zeros(0, np.intp), np.zeros(0, np.intp), empty, empty)
        gg: _I = np.concatenate(g)
        uu: _I = np.concatenate(up)
        vv: _F = np.concatenate(dv)
        ww: _F = np.concatenate(du)
        order = np.lexsort((np.concatenate(step), gg, -(ww / vv)))
        return cls(gg[order], uu[order], vv[order], ww[order])


def _lp(fronts: list[GroupFrontier], capacity: float
        ) -> tuple[list[int], float, float, float, bool]:
    """Greedy allocation, LP value, lambda, greedy value, feasible."""
    choice = [int(f.hull[0]) for f in fronts]
    base_v = math.fsum(float(f.volume[f.hull[0]]) for f in fronts)
    base_u = math.fsum(float(f.utility[f.hull[0]]) for f in fronts)
    if base_v > capacity:
        return choice, math.nan, math.inf, base_u, False
    seg = _Segments.of(fronts)
    room = capacity - base_v
    cum = np.cumsum(seg.dv)
    taken = int(np.searchsorted(cum, room, side="right"))
    lp = base_u + float(seg.du[:taken].sum())
    multiplier = 0.0
    if taken < seg.dv.size:
        used = float(cum[taken - 1]) if taken else 0.0
        lp += (room - used) / float(seg.dv[taken]) * float(seg.du[taken])
        multiplier = float(seg.du[taken] / seg.dv[taken])
    for i, up in zip(seg.group[:taken].tolist(), seg.upper[:taken].tolist(), strict=True):
        choice[i] = up
    # Fill: later segments that still fit, never past one a group had to skip.
    left = room - (float(cum[taken - 1]) if taken else 0.0)
    blocked: set[int] = set()
    for i, up, dv in zip(seg.group[taken:].tolist(), seg.upper[taken:].tolist(),
                         seg.dv[taken:].tolist(), strict=True):
        if i in blocked:
            continue
        if dv <= left:
            choice[i], left = up, left - dv
        else:
            blocked.add(i)
    greedy = math.fsum(float(f.utility[c]) for f, c in zip(fronts, choice, strict=True))
    return choice, lp, multiplier, greedy, True


def lagrangian_volume(frontiers: Mapping[str, GroupFrontier], multiplier: float) -> float:
    """Total volume of the groups' Lagrangian choices at ``multiplier`` (non-increasing in it)."""
    return math.fsum(float(f.volume[f.choose(multiplier)])
                     for f in frontiers.values() if f.feasible)


# ----------------------------------------------------------------------------- step 5
def _lp_curve(fronts: list[GroupFrontier]) -> tuple[_F, _F]:
    """Breakpoints ``(volume, utility)`` of the LP value of ``fronts`` as a function of capacity."""
    base_v = sum(float(f.volume[f.hull[0]]) for f in fronts)
    base_u = sum(float(f.utility[f.hull[0]]) for f in fronts)
    seg = _Segments.of(fronts)
    return (np.concatenate(([base_v], base_v + np.cumsum(seg.dv))),
            np.concatenate(([base_u], base_u + np.cumsum(seg.du))))


def _exact(fronts: list[GroupFrontier], capacity: float, incumbent: float,
           budget: float) -> list[int] | None:
    """Exact optimum over the Pareto sets (positions per group), or None past ``budget``."""
    tol = 1e-9 * max(1.0, abs(incumbent))
    states_v = np.zeros(1)
    states_u = np.zeros(1)
    back: list[tuple[_I, _I]] = []
    work = 0
    for i, f in enumerate(fronts):
        work += states_v.size * f.volume.size
        if work > budget:
            return None
        v = (states_v[:, None] + f.volume[None, :]).ravel()
        u = (states_u[:, None] + f.utility[None, :]).ravel()
        rest_v, rest_u = _lp_curve(fronts[i + 1:]) if i + 1 < len(fronts) else (
            np.zeros(1), np.zeros(1))
        room = capacity - v
        bound = np.full(v.size, -math.inf)
        ok = room >= rest_v[0]
        bound[ok] = u[ok] + np.interp(room[ok], rest_v, rest_u)
        keep = np.flatnonzero(ok & (bound >= incumbent - tol))
        order = keep[np.lexsort((keep, -u[keep], v[keep]))]
        w = u[order]
        front = np.ones(order.size, dtype=bool)
        if order.size > 1:
            front[1:] = w[1:] > np.maximum.accumulate(w)[:-1]
        order = order[front]
        if order.size == 0:
            return None
        parent, point = np.divmod(order, f.volume.size)
        back.append((parent.astype(np.intp), point.astype(np.intp)))
        states_v, states_u = v[order], u[order]
    best = int(np.flatnonzero(states_u == states_u.max())[0])  # least volume among the best
    choice = [0] * len(fronts)
    for i in range(len(fronts) - 1, -1, -1):
        parent, point = back[i]
        choice[i] = int(point[best])
        best = int(parent[best])
    return choice


# ----------------------------------------------------------------------------- the entry points
def allocate_capacity(
    grids: Mapping[str, ThresholdGrid],
    capacity: float,
    *,
    rule: str = "any",
    objective: str = "linear",
    target: float | Target | None = None,
    max_unrated_share: float = 0.0,
    min_volume: Mapping[str, float] | None = None,
    max_volume: Mapping[str, float] | None = None,
    volume_scale: Mapping[str, float] | None = None,
    exact: bool | str = "auto",
) -> CapacityAllocation:
    """Thresholds for every group that maximise total utility within one review capacity.

    :func:`group_frontiers` (steps 1-2) followed by :func:`allocate_frontiers` (steps 3-5).

    Parameters
    ----------
    grids : mapping of group name to ThresholdGrid
        All on one lattice (equal edges).
    capacity : float
        ``C >= 0`` (``inf``: unlimited), in scaled volume units (rows next period).
    rule : {"any", "all"}
    objective : {"linear", "true_positives"}
        ``U = TP - r FP`` or ``U = TP`` (scaled by ``volume_scale``).
    target : float or Target
        Slope ``r`` of the linear objective.
    max_unrated_share : float in [0, 1]
        Coverage: only cells with ``U_unrated <= s V`` are candidates.
    min_volume, max_volume : mapping of group to float, optional
        Per-group bounds on the scaled volume ``V_g``.
    volume_scale : mapping of group to float, optional
        ``a_g > 0``: expected next-period rows / window rows (:func:`volume_scales`). Volumes
        and utilities are scaled.
    exact : bool or "auto"
        Compute the exact integral optimum (step 5): always (its time can grow exponentially with
        the number of groups), never, or for at most :data:`EXACT_AUTO_GROUPS` groups within
        :data:`EXACT_BUDGET`.

    Returns
    -------
    CapacityAllocation
    """
    _check_capacity(capacity, exact)
    frontiers = group_frontiers(grids, rule=rule, objective=objective, target=target,
                                max_unrated_share=max_unrated_share, min_volume=min_volume,
                                max_volume=max_volume, volume_scale=volume_scale)
    first = grids[next(iter(grids))]
    return allocate_frontiers(frontiers, capacity, thresholds=first.thresholds, rule=rule,
                              objective=objective, target=target, exact=exact)


def _check_capacity(capacity: float, exact: bool | str) -> float:
    cap = float(capacity)
    if math.isnan(cap) or cap < 0:
        raise ValueError(f"capacity must be >= 0, got {plain(capacity)}")
    if exact not in (True, False, "auto"):
        raise ValueError(f"exact must be True, False or 'auto', got {exact!r}")
    return cap


def allocate_frontiers(
    frontiers: Mapping[str, GroupFrontier],
    capacity: float,
    *,
    thresholds: Sequence[NDArray[np.float64]],
    rule: str = "any",
    objective: str = "linear",
    target: float | Target | None = None,
    exact: bool | str = "auto",
) -> CapacityAllocation:
    """Steps 3-5 of the module docstring on the groups' frontiers (from :func:`group_frontiers`,
    computed for all groups at once or group by group: the frontiers are the same).

    Only a group's frontier enters: where the exact programme (step 5) cannot run (``exact``
    False, or ``"auto"`` with more than :data:`EXACT_AUTO_GROUPS` groups with a candidate) the
    frontiers may be reduced to their hull vertices (:meth:`GroupFrontier.vertices`) with the
    same result, which is how a pipeline gathers many groups on one worker.

    Parameters
    ----------
    frontiers : mapping of group name to GroupFrontier
        In the order ties are broken and volumes summed (a pipeline sorts them by name).
    capacity : float
    thresholds : sequence of ndarray
        Candidate thresholds per classifier
        (:attr:`costlib.thresholds.ThresholdGrid.thresholds`: the edges and ``+inf``), to name
        each group's thresholds.
    rule, objective, target, exact
        As for :func:`allocate_capacity` (``rule`` is only recorded).

    Returns
    -------
    CapacityAllocation
    """
    cap = _check_capacity(capacity, exact)
    slope = _utility_slope(objective, target)
    rule = check_rule(rule)
    fronts = [f for f in frontiers.values() if f.feasible]
    choice, lp, multiplier, greedy, feasible = _lp(fronts, cap)
    solved = False
    if feasible and fronts and (exact is True or (
            exact == "auto" and len(fronts) <= EXACT_AUTO_GROUPS)):
        budget = math.inf if exact is True else EXACT_BUDGET
        found = _exact(fronts, cap, greedy, budget)
        if found is not None:
            value = math.fsum(float(f.utility[c]) for f, c in zip(fronts, found, strict=True))
            solved = True
            if value > greedy:
                choice = found
    picked = {f.group: c for f, c in zip(fronts, choice, strict=True)}

    def named(index: tuple[int, ...]) -> tuple[float, ...]:
        return tuple(float(t[i]) for t, i in zip(thresholds, index, strict=True))

    groups: dict[str, GroupAllocation] = {}
    for g, f in frontiers.items():
        if not f.feasible:
            off = tuple(n - 1 for n in f.shape)
            groups[g] = GroupAllocation(g, off, named(off), 0.0, 0.0, 0.0, 0.0,
                                        "infeasible", math.nan, math.nan)
            continue
        c = picked[g]
        index = tuple(int(i) for i in np.unravel_index(int(f.cells[c]), f.shape))
        last = f.cells.size - 1
        groups[g] = GroupAllocation(
            g, index, named(index), float(f.volume[c]), float(f.utility[c]),
            float(f.true_positives[c]), float(f.false_positives[c]),
            "ok" if c == last else "capacity_bound", float(f.volume[last]),
            float(f.utility[last]))
    total_u = math.fsum(a.utility for a in groups.values())
    total_v = math.fsum(a.volume for a in groups.values())
    if feasible:
        at = [f.choose(multiplier) for f in fronts]
        lagrangian = math.fsum(float(f.utility[c] - multiplier * f.volume[c])
                               for f, c in zip(fronts, at, strict=True)
                               ) + (multiplier * cap if multiplier else 0.0)
        precision = multiplier if slope is None else (multiplier + slope) / (1.0 + slope)
    else:
        lagrangian, precision = math.nan, math.nan
    return CapacityAllocation(
        groups=groups, capacity=cap, objective=objective, rule=rule,
        target_slope=slope, multiplier=multiplier, marginal_precision=precision,
        total_volume=total_v, total_utility=total_u, lagrangian_total=lagrangian,
        upper_bound=lp, integrality_gap=lp - total_u if feasible else math.nan,
        greedy_utility=greedy, exact=solved, feasible=feasible, frontiers=dict(frontiers))


# ----------------------------------------------------------------------------- next period
def volume_scales(
    rows: Mapping[str, float],
    *,
    period_share: float = 1.0,
    expected_rows: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Each group's ``volume_scale`` ``a_g``: its expected rows next period over its rows now.

    The capacity is for the *next* period, the grids count the period read. A group's flagged
    volume and utility next period are taken as ``a_g`` times those of the grid (its score
    distribution and prevalence stay, its traffic changes):

    .. math:: a_g = \\frac{\\hat n_g}{n_g}, \\qquad
              \\hat n_g = \\text{expected\\_rows}[g] \\text{ if given, else }
              \\text{period\\_share} \\cdot n_g,

    with ``n_g`` the group's rows in the grid (weighted; rated and unrated, scored or not:
    :func:`grid_rows`). ``period_share`` is next period's length over the period read (e.g.
    ``1/7``: capacity per day, a week of data), the same for every group without a forecast.

    Parameters
    ----------
    rows : mapping of group to float
        ``n_g > 0``.
    period_share : float
        ``> 0``.
    expected_rows : mapping of group to float, optional
        ``n̂_g > 0`` per group (a forecast); groups not in ``rows`` are refused.

    Returns
    -------
    dict of str to float
    """
    share = float(period_share)
    if not (math.isfinite(share) and share > 0):
        raise ValueError(f"period_share must be finite and > 0, got {plain(period_share)}")
    groups = list(rows)
    expected = _per_group("expected_rows", expected_rows, groups, math.nan, positive=True)
    out = {}
    for g, n_hat in zip(groups, expected.tolist(), strict=True):
        n = float(rows[g])
        if not (math.isfinite(n) and n > 0):
            raise ValueError(f"rows[{g!r}] must be finite and > 0, got {plain(rows[g])}")
        out[g] = share if math.isnan(n_hat) else n_hat / n
    return out


def grid_rows(grid: ThresholdGrid) -> float:
    """Weighted rows of a grid: rated positives and negatives and unrated rows, every cell
    (the underflow cell of rows no classifier scored included)."""
    total = math.fsum((float(grid.pos.sum()), float(grid.neg.sum())))
    return total + (float(grid._unrated().sum()) if grid.has_unrated else 0.0)


# ----------------------------------------------------------------------------- baselines
def utility_within(frontier: GroupFrontier, volume: float) -> tuple[float, float, float]:
    """The group's best candidate with scaled volume ``<= volume`` (its own choice had it
    ``volume`` reviews to itself): ``(utility, true positives, volume)``; zeros when no
    candidate fits (then it flags nothing; a ``min_volume`` above ``volume``, or no
    candidate at all)."""
    i = int(np.searchsorted(frontier.volume, volume, side="right")) - 1
    if i < 0:
        return 0.0, 0.0, 0.0
    return (float(frontier.utility[i]), float(frontier.true_positives[i]),
            float(frontier.volume[i]))


@dataclass(frozen=True)
class SplitBaselines:
    """What fixed splits of the same capacity give (sums over groups, exact ``fsum``).

    ``equal_*``: every group of the allocation gets ``C / G``; ``proportional_*``: group ``g``
    gets ``C n̂_g / sum n̂`` (``traffic``: its expected rows). Each group then takes its best
    candidate within its share (:func:`utility_within`).
    """

    equal_utility: float
    equal_true_positives: float
    equal_volume: float
    proportional_utility: float
    proportional_true_positives: float
    proportional_volume: float


def split_shares(traffic: Mapping[str, float], capacity: float) -> dict[str, tuple[float, float]]:
    """Per group its ``(equal, proportional)`` share of ``capacity``: ``C / G`` and
    ``C n̂_g / sum n̂`` (``sum`` exact)."""
    total = math.fsum(float(v) for v in traffic.values())
    n = len(traffic)
    return {g: (capacity / n, capacity * float(v) / total if total > 0 else capacity / n)
            for g, v in traffic.items()}


def split_baselines(frontiers: Mapping[str, GroupFrontier], traffic: Mapping[str, float],
                    capacity: float) -> SplitBaselines:
    """The equal and the traffic-proportional split of ``capacity`` (:class:`SplitBaselines`).

    ``frontiers`` must hold each group's whole Pareto set (not only its hull vertices)."""
    shares = split_shares({g: traffic[g] for g in frontiers}, capacity)
    equal = [utility_within(f, shares[g][0]) for g, f in frontiers.items()]
    prop = [utility_within(f, shares[g][1]) for g, f in frontiers.items()]
    return SplitBaselines(*(math.fsum(v[i] for v in equal) for i in range(3)),
                          *(math.fsum(v[i] for v in prop) for i in range(3)))
