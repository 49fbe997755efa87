"""Frontiers over all cells of the threshold lattice, and choosing a point on a PN curve.

Geometry only (kept apart from :mod:`costlib.thresholds.point._optimize`):

- :func:`best_cell` — the exact empirical optimum ``argmax_t TP(t) - r FP(t)`` over every cell;
- :func:`upper_hull` — the upper concave hull of all ``(FP, TP)`` points (the ROC convex hull in
  counts): its vertices are exactly the cells that are optimal for some slope ``r > 0``;
- :func:`bucket_frontier` — the manual baseline of the paper: split the FP axis into equal buckets
  and keep the highest-TP cell of each;
- :func:`choose_on_curve` and :func:`marginal_precisions` — pick the point of a PN curve that
  maximises ``TP - r FP`` and report the precision of the items on either side of it.

Tie rules (deterministic): among cells with the same objective the one with the fewest false
positives wins, then the one with the fewest true positives, then the first in row-major order.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from costlib._messages import plain

__all__ = [
    "best_cell",
    "bucket_frontier",
    "choose_on_curve",
    "hull_neighbours",
    "marginal_precisions",
    "tie_break",
    "upper_hull",
]


_CHUNK = 1 << 15  # cells per pass: keeps every temporary in cache


def tie_break(candidates: NDArray[np.intp], fp: NDArray[np.float64],
              tp: NDArray[np.float64]) -> int:
    """Among equally good cells: fewest FP, then fewest TP, then first in row-major order."""
    if candidates.size == 1:
        return int(candidates[0])
    order = np.lexsort((candidates, tp[candidates], fp[candidates]))
    return int(candidates[order[0]])


_tie_break = tie_break


def _argmax_with_ties(objective: NDArray[np.float64], fp: NDArray[np.float64],
                      tp: NDArray[np.float64]) -> int:
    return _tie_break(np.flatnonzero(objective == objective.max()), fp, tp)


def best_cell(
    tp: NDArray[np.float64], fp: NDArray[np.float64], slope: float
) -> tuple[int, ...]:
    """Lattice index maximising ``TP - slope * FP`` over every cell (ties: see module doc).

    One pass in cache-sized chunks; the objective is evaluated exactly as ``TP - slope * FP``.
    """
    flat_tp = tp.ravel()
    flat_fp = fp.ravel()
    best = -np.inf
    found: list[NDArray[np.intp]] = []
    buffer = np.empty(min(_CHUNK, flat_tp.size))
    for start in range(0, flat_tp.size, _CHUNK):
        t = flat_tp[start : start + _CHUNK]
        obj = buffer[: t.size]
        np.multiply(flat_fp[start : start + _CHUNK], -slope, out=obj)
        obj += t
        top = obj.max()
        if top > best:
            best, found = top, [start + np.flatnonzero(obj == top)]
        elif top == best:
            found.append(start + np.flatnonzero(obj == top))
    flat = _tie_break(np.concatenate(found), flat_fp, flat_tp)
    return tuple(int(i) for i in np.unravel_index(flat, tp.shape))


def upper_hull(tp: NDArray[np.float64], fp: NDArray[np.float64]) -> NDArray[np.intp]:
    """Cells on the upper concave hull of all ``(FP, TP)`` points, by decreasing FP.

    The hull runs from the cell with the most true positives (and, among those, the fewest
    false positives) to the all-off cell ``(0, 0)``; every vertex is the optimum for some
    slope > 0. Quickhull: the farthest point above a chord is a vertex; recurse on the points
    above each of the two new chords (carried along with their coordinates).

    Returns
    -------
    ndarray of shape (m,)
        Row-major flat cell indices of the hull vertices, ordered by decreasing FP.
    """
    flat_tp = tp.ravel()
    flat_fp = fp.ravel()
    at_max = np.flatnonzero(flat_tp == flat_tp.max())
    right = int(at_max[np.argmin(flat_fp[at_max])])
    left = flat_tp.size - 1  # the all-off cell, (FP, TP) = (0, 0)
    if flat_fp[right] == flat_fp[left] and flat_tp[right] == flat_tp[left]:
        return np.array([left], dtype=np.intp)

    def above(a: int, b: int, idx: NDArray[np.intp], f: NDArray[np.float64],
              t: NDArray[np.float64]) -> tuple[NDArray[np.intp], NDArray[np.float64],
                                               NDArray[np.float64], NDArray[np.float64]]:
        """Points strictly above the chord from a (higher FP) to b, with their heights."""
        height = (flat_fp[a] - flat_fp[b]) * (t - flat_tp[b]) - (flat_tp[a] - flat_tp[b]) * (
            f - flat_fp[b]
        )
        keep = height > 0
        return idx[keep], f[keep], t[keep], height[keep]

    out = [right]
    stack = [(right, left, *above(right, left, np.arange(flat_tp.size), flat_fp, flat_tp))]
    while stack:
        a, b, idx, f, t, height = stack.pop()
        if idx.size == 0:
            out.append(b)
            continue
        ties = np.flatnonzero(height == height.max())
        # Farthest point; among collinear ties the highest FP, then the first cell.
        c = int(idx[ties[np.lexsort((idx[ties], -t[ties], -f[ties]))[0]]])
        stack.append((c, b, *above(c, b, idx, f, t)))
        stack.append((a, c, *above(a, c, idx, f, t)))
    return np.array(out, dtype=np.intp)


def hull_neighbours(
    tp: NDArray[np.float64], fp: NDArray[np.float64], cell: tuple[int, ...]
) -> tuple[int | None, int | None]:
    """Neighbouring vertices of a hull vertex on the upper concave hull, in one pass.

    For a vertex ``p``, every point lies on or below both hull edges at ``p``, so the edge to the
    left (fewer false positives) has the *smallest* slope ``(TP_p - TP_z) / (FP_p - FP_z)`` over
    points ``z`` with ``FP_z < FP_p``, and the edge to the right the *largest* slope
    ``(TP_z - TP_p) / (FP_z - FP_p)`` over ``FP_z > FP_p``. Among collinear candidates the
    farthest is returned (it is the hull vertex; the nearer ones lie on the edge).

    Returns
    -------
    (left, right) : flat cell indices, ``None`` where there is no point on that side.
    """
    flat_tp = tp.ravel()
    flat_fp = fp.ravel()
    p = int(np.ravel_multi_index(cell, tp.shape))
    fp0, tp0 = flat_fp[p], flat_tp[p]
    # Per side: best slope so far and the farthest cell attaining it.
    best = {"left": np.inf, "right": -np.inf}
    chosen: dict[str, int | None] = {"left": None, "right": None}
    reach = {"left": -1.0, "right": -1.0}
    for start in range(0, flat_tp.size, _CHUNK):
        dfp = flat_fp[start : start + _CHUNK] - fp0
        dtp = flat_tp[start : start + _CHUNK] - tp0
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = dtp / dfp
        # Left: fewer FP, or the same FP and fewer TP (the vertical edge down to the origin at
        # FP = 0, slope +inf). Right: more FP and more TP (the hull has no flat tail).
        vertical = (dfp == 0) & (dtp < 0)
        slope[vertical] = np.inf
        left_mask = (dfp < 0) | vertical
        right_mask = (dfp > 0) & (dtp > 0)
        for side, mask, pick in (("left", left_mask, np.min), ("right", right_mask, np.max)):
            if not mask.any():
                continue
            s = slope[mask]
            value = pick(s)
            improves = value < best[side] if side == "left" else value > best[side]
            if not improves and value != best[side]:
                continue
            where = np.flatnonzero(mask)[s == value]
            reach_of = np.abs(dfp[where]) + np.abs(dtp[where])
            far = int(where[np.argmax(reach_of)])
            distance = float(reach_of.max())
            if improves or distance > reach[side]:
                best[side], chosen[side], reach[side] = value, start + far, distance
    return chosen["left"], chosen["right"]


def bucket_frontier(
    tp: NDArray[np.float64],
    fp: NDArray[np.float64],
    n_buckets: int = 50,
    mask: NDArray[np.bool_] | None = None,
) -> NDArray[np.intp]:
    """The paper's manual baseline: the highest-TP cell in each of ``n_buckets`` FP buckets.

    The FP range ``[0, FP_max]`` is split into equal buckets; in each non-empty bucket the cell
    with the highest TP is kept (ties: fewest FP, then row-major order), and the all-off cell
    (the origin of every PN curve) is added. Points that are
    dominated by a kept point with fewer false positives and at least as many true positives are
    dropped, since no positive trade-off ever selects them.

    With ``mask`` (e.g. the covered cells), only the cells where it is True take part; the
    all-off cell must be among them.

    Returns
    -------
    ndarray
        Flat cell indices ordered by decreasing FP.
    """
    if int(n_buckets) != n_buckets or n_buckets < 1:
        raise ValueError(f"n_buckets must be a positive integer, got {plain(n_buckets)}")
    if mask is not None:
        cells = np.flatnonzero(mask)
        if cells.size == 0 or cells[-1] != mask.size - 1:
            raise ValueError("the mask of bucket_frontier must keep the all-off cell")
        return cells[bucket_frontier(tp.ravel()[cells], fp.ravel()[cells], n_buckets)]
    flat_tp = tp.ravel()
    flat_fp = fp.ravel()
    fp_max = flat_fp.max()
    if fp_max == 0:
        bucket = np.zeros(flat_fp.size, dtype=np.intp)
    else:
        bucket = np.minimum((flat_fp / fp_max * n_buckets).astype(np.intp), n_buckets - 1)
    # Sort by (bucket, -tp, fp, index) and keep the first cell of each bucket.
    order = np.lexsort((np.arange(flat_tp.size), flat_fp, -flat_tp, bucket))
    first = np.ones(order.size, dtype=bool)
    first[1:] = bucket[order[1:]] != bucket[order[:-1]]
    kept = order[first]
    kept = kept[np.lexsort((kept, -flat_fp[kept]))]  # decreasing FP
    # Every PN curve starts at the origin: the all-off cell (the last cell) is always kept.
    origin = flat_tp.size - 1
    if kept[-1] != origin and flat_fp[kept[-1]] == 0 and flat_tp[kept[-1]] == 0:
        kept[-1] = origin
    elif flat_fp[kept[-1]] != 0 or flat_tp[kept[-1]] != 0:
        kept = np.append(kept, origin)
    # Drop dominated points: walking from low FP to high FP, TP must strictly increase.
    rev = kept[::-1]
    best_so_far = np.maximum.accumulate(flat_tp[rev])
    keep = np.ones(rev.size, dtype=bool)
    keep[1:] = flat_tp[rev[1:]] > best_so_far[:-1]
    return rev[keep][::-1].copy()


def choose_on_curve(
    curve_tp: NDArray[np.float64], curve_fp: NDArray[np.float64], slope: float
) -> int:
    """Position on a PN curve maximising ``TP - slope * FP`` (ties: see module doc)."""
    return _argmax_with_ties(curve_tp - slope * curve_fp, curve_fp, curve_tp)


def marginal_precisions(
    curve_tp: NDArray[np.float64], curve_fp: NDArray[np.float64], position: int
) -> tuple[float, float]:
    """Precision of the items between a curve point and its neighbours.

    The curve is ordered from most flagged (highest FP) to least flagged. ``left`` is measured
    towards the neighbour with fewer flagged items (to the left on a PN plot): the precision of
    the last items the chosen point lets in. ``right`` is measured towards the neighbour with
    more flagged items: the precision of the next items it would let in. Neighbours with the
    same (TP, FP) are skipped; NaN where there is no neighbour. At the optimum of a concave
    curve, ``left >= target >= right``.
    """
    t0, f0 = curve_tp[position], curve_fp[position]

    def towards(indices: range) -> float:
        for i in indices:
            dt, df = abs(curve_tp[i] - t0), abs(curve_fp[i] - f0)
            if dt + df > 0:
                return float(dt / (dt + df))
        return float("nan")

    left = towards(range(position + 1, curve_tp.size))
    right = towards(range(position - 1, -1, -1))
    return left, right
