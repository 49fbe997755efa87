"""Audit strata relative to the point in force: bands of lattice steps below the thresholds.

Absolute strata (:class:`costlib.audit.AuditDesign` on the highest score) are in
score units: they cannot be a default, and after a drift they no longer sit just below the
thresholds where the next move is decided. Relative strata band an unflagged row by how far
the thresholds in force would have to move *on the lattice* before they flag it.

Depth
-----
Classifier ``j`` has candidate thresholds (lattice edges) ``e_j[0] < ... < e_j[B-1]`` and its
threshold in force ``t_j`` (``+inf``: off). Lowering ``t_j`` by ``k`` steps puts it on the
``k``-th largest edge below ``t_j``; a row with score ``s_j < t_j`` fires from step

    d_j = #{e in e_j : s_j < e < t_j} + 1      if s_j >= e_j[0],   else  inf

(``inf`` also for a null / NaN score: it never fires). ``d_j = 0`` when ``s_j >= t_j``. The
*depth* of a row is the L1 lattice distance from the point in force to the nearest tuple that
flags it:

- rule ``any`` (flagged iff some ``s_j >= t_j``): ``d = min_j d_j``;
- rule ``all`` (flagged iff every ``s_j >= t_j``): ``d = sum_j d_j``.

``d = 0`` exactly for flagged rows; ``d = inf`` for rows no tuple of the lattice flags (below
every edge, or not scored), or of a group without thresholds in force.

Strata
------
Cutoffs ``k_1 <= k_2 <= ... <= k_{m-1}`` (depths) split the unflagged rows into ``m`` strata,
ordered as score strata are (far to near): stratum ``m-1`` holds ``d <= k_1``, stratum
``m-1-i`` holds ``k_i < d <= k_{i+1}``, stratum 0 holds ``d > k_{m-1}`` (including ``inf``)
(:func:`cutoff_strata`). The cutoffs are either

- **steps**: the same lattice depths for every group (``audit.strata.steps``), or
- **shares** (``audit.strata.shares`` ``q_1 < ... < q_{m-1}``): per group, the smallest depth
  ``k_i`` with at least a share ``q_i`` of the group's unflagged rows at depth ``<= k_i``,
  from the unflagged rows per depth a *previous* run counted (:func:`share_cutoffs`). Known
  before any score of this run is read, so every row's probability is fixed in advance.

The stratum index itself is the band score of :func:`relative_design` (edges ``h + 1/2``), so
:func:`costlib.audit.audit_sample`, the budget scale and the Neyman sizing of
:mod:`costlib.audit._neyman` apply unchanged, and the design stays a stratified Poisson design
with known ``pi`` per row (unbiased Horvitz-Thompson estimates).

Proposal band
-------------
When the evidence rule of recalibration publishes other thresholds than the method's own point
``t*`` (it kept the point in force, or moved part way: the move was not supported yet), the
unflagged rows that ``t*`` would flag are where the next run's evidence must come from; their
depth can be anything (from a classifier switched off, the whole region is deep). With a
*proposal stratum* ``b``, such a row is audited in stratum ``max(h, b)`` instead of its own
``h`` (:func:`promote_proposed`): still a stratified Poisson design with known ``π``, the
strata being a function of the row's scores, its group's point in force and proposal, the
cutoffs and the lattice. The counts an auto design is sized on move the same way
(:func:`proposal_recount`: :func:`split_cells`, then :func:`promote_counts`).

Whatever the score scale, the strata follow the thresholds: after a drift they are again the
rows just below the point in force. Share cutoffs are quantile positions (scale-free); step
cutoffs are scale-free when the lattice edges are (auto edges are placed at tail quantiles).
A row's stratum depends on its scores, its group's thresholds and cutoffs and the lattice only:
the same in any shard.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib.audit._sampling import AuditDesign

__all__ = [
    "cell_corners",
    "check_shares",
    "check_steps",
    "cutoff_strata",
    "depth_counts_from_cells",
    "flagged_rows",
    "lattice_cells",
    "lattice_depths",
    "promote_counts",
    "promote_proposed",
    "proposal_recount",
    "relative_design",
    "share_cutoffs",
    "split_cells",
    "stratum_counts",
]


def lattice_depths(
    scores: ArrayLike,
    thresholds: ArrayLike,
    edges: Sequence[ArrayLike],
    rule: str = "any",
) -> NDArray[np.float64]:
    """Depth of every row below its thresholds in force, in lattice steps (module docstring).

    Parameters
    ----------
    scores : array-like, shape (n, k)
        Scores; NaN / ``-inf`` = not scored (never fires).
    thresholds : array-like, shape (n, k)
        Each row's thresholds in force (its group's); ``+inf`` = off. A row whose thresholds
        are all NaN (no usable point) gets depth ``inf``.
    edges : sequence of k array-likes
        Strictly increasing lattice edges per classifier.
    rule : {"any", "all"}

    Returns
    -------
    ndarray of float64, shape (n,)
        ``0`` for flagged rows, a positive integer, or ``inf``.
    """
    s = np.asarray(scores, dtype=np.float64)
    t = np.asarray(thresholds, dtype=np.float64)
    if s.ndim != 2 or t.shape != s.shape:
        raise ValueError(f"scores {s.shape} and thresholds {t.shape} need the same (n, k) shape")
    if len(edges) != s.shape[1]:
        raise ValueError(f"edges: need one array per classifier ({s.shape[1]}), got {len(edges)}")
    if rule not in ("any", "all"):
        raise ValueError(f"rule: need 'any' or 'all', got {rule!r}")
    per = np.empty_like(s)
    for j in range(s.shape[1]):
        e = np.asarray(edges[j], dtype=np.float64).reshape(-1)
        if e.size == 0 or not np.isfinite(e).all() or (np.diff(e) <= 0).any():
            raise ValueError(f"edges[{j}]: need strictly increasing finite numbers")
        sj, tj = s[:, j], t[:, j]
        below_t = np.searchsorted(e, tj, side="left")  # edges < t (t = inf: all)
        le_s = np.searchsorted(e, np.nan_to_num(sj, nan=-np.inf), side="right")  # edges <= s
        d = (below_t - le_s + 1).astype(np.float64)
        d[le_s == 0] = np.inf  # below every edge, or not scored
        fires = sj >= tj  # False for NaN
        d[fires] = 0.0
        d[np.isnan(tj)] = np.inf
        per[:, j] = d
    if rule == "any":
        depth = per.min(axis=1)
    else:
        depth = per.sum(axis=1)
    no_point = np.isnan(t).all(axis=1)
    depth[no_point] = np.inf
    return depth


def check_steps(steps: Sequence[int]) -> list[int]:
    """``steps`` as a list, or ``ValueError`` naming ``strata.steps`` unless they are strictly
    increasing integers ``>= 1``."""
    st = [int(v) for v in steps]
    if any(v != w for v, w in zip(st, steps, strict=True)) or any(v < 1 for v in st) or \
            any(b <= a for a, b in itertools.pairwise(st)):
        raise ValueError(f"strata.steps: need strictly increasing integers >= 1, got "
                         f"{list(steps)}")
    return st


def check_shares(shares: Sequence[float]) -> list[float]:
    """``shares`` as a list, or ``ValueError`` naming ``strata.shares`` unless strictly
    increasing in (0, 1)."""
    sh = [float(v) for v in shares]
    if any(not 0.0 < v < 1.0 for v in sh) or any(b <= a for a, b in itertools.pairwise(sh)):
        raise ValueError(f"strata.shares: need strictly increasing numbers in (0, 1), got "
                         f"{list(shares)}")
    return sh


def relative_design(weights: Sequence[float], floor: float,
                    budget_share: float) -> AuditDesign:
    """The :class:`~costlib.audit.AuditDesign` of ``m = len(weights)`` relative strata,
    cut on the stratum index itself (edges ``1/2, 3/2, ..., m - 3/2``): pass
    ``cutoff_strata(...)`` as the band score. ``weights`` run far to near."""
    m = len(weights)
    return AuditDesign(edges=tuple(h + 0.5 for h in range(m - 1)), weights=tuple(weights),
                       floor=floor, budget_share=budget_share)


def share_cutoffs(depth_counts: ArrayLike, shares: Sequence[float]) -> NDArray[np.float64]:
    """Depth cutoffs that put given shares of a group's unflagged rows nearest the point.

    ``depth_counts[d - 1]`` is the number of unflagged rows at depth ``d = 1..D`` and
    ``depth_counts[D]`` those at depth ``inf`` (counted by a previous run). Cutoff ``k_i`` is
    the smallest depth with ``sum_{d <= k_i} c_d >= shares[i] * sum(c)``; ``D`` when the finite
    depths hold less than that share; ``inf`` for every cutoff when nothing was counted (then
    all unflagged rows fall in the nearest stratum: a uniform audit).
    """
    c = np.asarray(depth_counts, dtype=np.float64).reshape(-1)
    q = np.asarray(shares, dtype=np.float64)
    total = float(c.sum())
    if c.size < 1 or total <= 0:
        return np.full(q.size, np.inf)
    cumulative = np.cumsum(c[:-1])
    k = np.searchsorted(cumulative, q * total * (1 - 1e-12), side="left") + 1
    return np.minimum(k, max(c.size - 1, 1)).astype(np.float64)


def cutoff_strata(depths: ArrayLike, cutoffs: ArrayLike) -> NDArray[np.intp]:
    """Stratum of every row from its depth and its (group's) cutoffs ``k_1 <= ... <= k_{m-1}``
    (shape (n, m-1) or (m-1,)): ``m - 1 - #{i : depth > k_i}`` (``m - 1``: nearest)."""
    d = np.asarray(depths, dtype=np.float64)
    k = np.asarray(cutoffs, dtype=np.float64)
    if k.ndim == 1:
        k = np.broadcast_to(k, (d.size, k.size))
    return (k.shape[1] - np.count_nonzero(d[:, None] > k, axis=1)).astype(np.intp)


def stratum_counts(depth_counts: ArrayLike, cutoffs: ArrayLike, n_strata: int
                   ) -> NDArray[np.float64]:
    """Rows per stratum of ``depth_counts`` (as in :func:`share_cutoffs`: depths ``1..D``,
    then ``inf``) under ``cutoffs``: a previous run's counts re-cut by this run's strata (the
    counts an auto-sized design is solved on)."""
    c = np.asarray(depth_counts, dtype=np.float64).reshape(-1)
    out = np.zeros(n_strata)
    if c.size == 0:
        return out
    depths = np.append(np.arange(1, c.size, dtype=np.float64), np.inf)
    np.add.at(out, cutoff_strata(depths, cutoffs), c)
    return out


def lattice_cells(scores: ArrayLike, lattice: Sequence[ArrayLike]) -> NDArray[np.intp]:
    """Cell of every row on the lattice, per classifier: ``#{e <= s}`` (0: below every edge or
    not scored). Rows of one cell have the same depth below any point on that lattice."""
    s = np.asarray(scores, dtype=np.float64)
    out = np.empty(s.shape, dtype=np.intp)
    for j, e in enumerate(lattice):
        out[:, j] = np.searchsorted(np.asarray(e, dtype=np.float64),
                                    np.nan_to_num(s[:, j], nan=-np.inf), side="right")
    return out


def cell_corners(cells: ArrayLike, lattice: Sequence[ArrayLike]) -> NDArray[np.float64]:
    """Lower corner of each cell (``cells`` as from :func:`lattice_cells`): ``e[c - 1]``, NaN
    (not scored: never fires) for cell 0."""
    c = np.asarray(cells, dtype=np.intp)
    out = np.full(c.shape, np.nan)
    for j, e in enumerate(lattice):
        edges = np.asarray(e, dtype=np.float64)
        inside = c[:, j] > 0
        out[inside, j] = edges[c[inside, j] - 1]
    return out


def split_cells(cells: ArrayLike, counts: ArrayLike, lattice_then: Sequence[ArrayLike],
                lattice_now: Sequence[ArrayLike]
                ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A previous run's rows per lattice cell, spread over the cells of another lattice.

    Cell ``c`` of classifier ``j`` on ``lattice_then`` (edges ``e``) is the score interval
    ``[e[c - 1], e[c])``. The edges of ``lattice_now`` strictly inside it cut it into pieces
    ``[a_0, a_1), ..., [a_{p-1}, a_p)``; piece ``i`` gets the share ``(a_{i+1} - a_i) /
    (e[c] - e[c - 1])`` of the cell's rows (rows spread evenly in score within a cell, the
    histogram's own assumption) and is represented by its lower end ``a_i``, which lies in
    exactly one cell of ``lattice_now``. A cell of several classifiers is cut in each, the
    shares multiplied. The top cell ``[e[-1], inf)`` has no width: it stays whole at ``e[-1]``;
    cell 0 (below every edge, or not scored) stays at NaN (never fires).

    On the same lattice nothing is cut (the lower corners of :func:`cell_corners`). When the
    lattice moves between runs (auto edges are placed anew by every run), representing a cell
    by its lower corner alone would count all of its rows as deep as its deepest part: the
    strata nearest the point would be under-counted, and a design sized on those counts would
    audit more than its budget.

    Parameters
    ----------
    cells : array-like of int, shape (n, k)
        Cells as from :func:`lattice_cells` on ``lattice_then``.
    counts : array-like, shape (n,)
        Rows per cell.
    lattice_then, lattice_now : sequence of k array-likes
        Strictly increasing edges per classifier.

    Returns
    -------
    (corners, shares) : ndarray (p, k), ndarray (p,)
        The pieces' lower corners (scores; NaN: never fires) and their rows (summing to
        ``counts.sum()``).
    """
    c = np.asarray(cells, dtype=np.intp).reshape(-1, len(lattice_then))
    n = np.asarray(counts, dtype=np.float64).reshape(-1)
    if n.size != c.shape[0]:
        raise ValueError(f"counts: need one per cell ({c.shape[0]}), got {n.size}")
    if len(lattice_now) != len(lattice_then):
        raise ValueError(f"lattice_now has {len(lattice_now)} classifiers, lattice_then "
                         f"{len(lattice_then)}")
    corners = np.zeros((c.shape[0], 0))
    source = np.arange(c.shape[0])  # the cell each piece comes from
    for j, (then_j, now_j) in enumerate(zip(lattice_then, lattice_now, strict=True)):
        e = np.asarray(then_j, dtype=np.float64)
        now = np.asarray(now_j, dtype=np.float64)
        cj = c[source, j]
        bounded = (cj > 0) & (cj < e.size)
        low = np.where(cj > 0, e[np.clip(cj - 1, 0, e.size - 1)], np.nan)
        high = np.where(bounded, e[np.clip(cj, 0, e.size - 1)], np.nan)
        first = np.searchsorted(now, low, side="right")  # now-edges > low
        stop = np.searchsorted(now, high, side="left")  # now-edges < high
        inner = np.where(bounded, np.maximum(stop - first, 0), 0)
        pieces = inner + 1
        parent = np.repeat(np.arange(cj.size), pieces)
        rank = np.arange(parent.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        lo = low[parent]
        cut = rank > 0
        lo[cut] = now[first[parent[cut]] + rank[cut] - 1]
        hi = high[parent].copy()
        more = rank < pieces[parent] - 1
        hi[more] = now[first[parent[more]] + rank[more]]
        width = np.where(bounded, high - low, 1.0)[parent]
        share = np.where(bounded[parent], (hi - lo) / width, 1.0)
        n = n[parent] * share
        corners = np.column_stack([corners[parent], lo])
        source = source[parent]
    return corners, n


def depth_counts_from_cells(cells: ArrayLike, counts: ArrayLike, lattice_then: Sequence[ArrayLike],
                            thresholds: ArrayLike, lattice_now: Sequence[ArrayLike],
                            rule: str = "any") -> NDArray[np.float64]:
    """Rows per depth (``1..D``, then ``inf``; flagged rows left out) that a previous run's
    rows per lattice cell would have below *this* run's thresholds and lattice.

    The cells are spread over this run's lattice (:func:`split_cells`: rows evenly in score
    within a cell, the pieces at their lower corners); on the same lattice that is exact. So
    neither a move of the point between runs nor new edges shift the strata: the cutoffs are
    placed on this run's depths. Counts may be fractional.
    """
    corners, n = split_cells(cells, counts, lattice_then, lattice_now)
    return _depth_counts(corners, n, thresholds, lattice_now, rule)


def _depth_counts(corners: NDArray[np.float64], n: NDArray[np.float64], thresholds: ArrayLike,
                  lattice_now: Sequence[ArrayLike], rule: str) -> NDArray[np.float64]:
    """Rows ``n`` at scores ``corners`` per depth below ``thresholds`` on ``lattice_now``."""
    t = np.broadcast_to(np.asarray(thresholds, dtype=np.float64), corners.shape)
    depth = lattice_depths(corners, t, lattice_now, rule)
    keep = depth > 0
    finite = np.isfinite(depth) & keep
    top = int(depth[finite].max()) if finite.any() else 1
    out = np.zeros(top + 1)
    np.add.at(out, depth[finite].astype(np.intp) - 1, n[finite])
    out[top] = n[keep & ~np.isfinite(depth)].sum()
    return out


def flagged_rows(scores: ArrayLike, proposed: ArrayLike, rule: str = "any") -> NDArray[np.bool_]:
    """Rows the thresholds ``proposed`` (shape (k,) or one row per score row; ``+inf``: off)
    flag under ``rule``: some (``any``) or every (``all``) ``s_j >= t_j``; a NaN score never
    fires. ``costlib decide``'s threshold decisions and the proposal band both use it."""
    if rule not in ("any", "all"):
        raise ValueError(f"rule must be 'any' or 'all', got {rule!r}")
    s = np.asarray(scores, dtype=np.float64)
    t = np.broadcast_to(np.asarray(proposed, dtype=np.float64), s.shape)
    with np.errstate(invalid="ignore"):
        fired = np.greater_equal(s, t)
    return np.asarray(fired.any(axis=1) if rule == "any" else fired.all(axis=1), dtype=bool)


def promote_proposed(strata: ArrayLike, proposed: ArrayLike, stratum: int) -> NDArray[np.intp]:
    """Strata with every row of the mask ``proposed`` raised to at least ``stratum`` (module
    docstring, "Proposal band")."""
    h = np.asarray(strata, dtype=np.intp)
    return np.where(np.asarray(proposed, dtype=bool), np.maximum(h, int(stratum)), h)


def promote_counts(counts: ArrayLike, stratum: int) -> NDArray[np.float64]:
    """Rows per stratum of a set of proposed rows after :func:`promote_proposed`: the rows of
    strata below ``stratum`` counted in ``stratum``."""
    c = np.asarray(counts, dtype=np.float64).copy()
    c[int(stratum)] += c[: int(stratum)].sum()
    c[: int(stratum)] = 0.0
    return c


def proposal_recount(cells: ArrayLike, counts: ArrayLike, lattice_then: Sequence[ArrayLike],
                     thresholds: ArrayLike, lattice_now: Sequence[ArrayLike],
                     proposed: ArrayLike, cutoffs: ArrayLike, n_strata: int, stratum: int,
                     rule: str = "any") -> tuple[NDArray[np.float64], float]:
    """How a previous run's rows per stratum change when the rows the proposed point flags
    are audited in at least ``stratum``, and how many rows that is.

    The cells (and their row ``counts``, on ``lattice_then``) are spread over this run's
    ``lattice_now`` (:func:`split_cells`); the pieces that ``proposed`` flags at their lower
    corner (exact when ``proposed`` lies on ``lattice_now``, as a point published on that
    lattice does) are re-cut below this run's ``thresholds`` and ``cutoffs``
    (:func:`stratum_counts`) into ``own``; the change is ``promote_counts(own, stratum) - own``
    (sums to 0), added to the counts an auto design is sized on. Returns ``(change,
    own.sum())``; zeros and 0.0 when no piece is flagged.
    """
    corners, n = split_cells(cells, counts, lattice_then, lattice_now)
    mask = flagged_rows(corners, proposed, rule)
    if not mask.any():
        return np.zeros(int(n_strata)), 0.0
    own = stratum_counts(_depth_counts(corners[mask], n[mask], thresholds, lattice_now, rule),
                         cutoffs, n_strata)
    return promote_counts(own, stratum) - own, float(own.sum())
