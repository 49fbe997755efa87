"""Threshold grids: the mergeable sufficient statistic for ensembles of k classifiers.

Rated rows carry scores ``s_1..s_k``, a label and a weight. With candidate thresholds
``e_j[0] < ... < e_j[B_j - 1]`` per classifier (plus "off" = ``+inf``), every row falls in one cell
``b = (b_1, ..., b_k)`` of the bin lattice (see :func:`costlib.edges.bin_indices`). The weighted
histograms ``H_pos[b]`` and ``H_neg[b]`` of rated positives and negatives are all that is needed:
they add across bundles, files, workers and windows.

At a threshold tuple ``t = (t_1, ..., t_k)`` (lattice indices, ``t_j = B_j`` meaning "off"),
classifier ``j`` fires iff ``b_j > t_j``, so

- rule ``"all"`` (AND): ``TP(t) = sum_{b > t} H_pos[b]`` (a k-dimensional suffix sum),
- rule ``"any"`` (OR, the paper's union): ``TP(t) = P - sum_{b <= t} H_pos[b]`` (total minus a
  k-dimensional inclusive prefix sum),

and ``FP`` likewise from ``H_neg``. Raising any threshold never increases TP or FP, and the
all-off cell has ``TP = FP = 0`` for both rules.

Exactness. Weights are rounded to the nearest multiple of ``2**-weight_bits`` (default 16 bits,
so a weight moves by at most ``2**-17 ~ 7.6e-6``; integer weights and the default weight 1 are
unchanged). Every histogram cell, every merge and every cumulative sum is then a sum of multiples
of ``2**-weight_bits`` below ``2**(53 - weight_bits)``, which float64 represents exactly, so
merging is exactly associative and commutative and TP/FP do not depend on how the rows were
split or ordered. A grid whose total weight would leave that range raises ``ValueError``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib.edges import BinLocator, check_edges

__all__ = [
    "RULES",
    "SparseCounts",
    "ThresholdGrid",
    "cell_codes",
    "grouped_histograms",
    "histogram_cells",
    "lattice_counts",
    "quantize_weights",
    "sum_sparse",
    "validate_rows",
]

RULES = ("any", "all")
DEFAULT_WEIGHT_BITS = 16


def quantize_weights(weights: NDArray[np.float64], weight_bits: int) -> NDArray[np.float64]:
    """Round weights to the nearest multiple of ``2**-weight_bits`` (ties to even)."""
    scale = float(2**weight_bits)
    return np.rint(weights * scale) / scale


def _column_name(names: Sequence[str] | None, j: int) -> str:
    return f"score column {j} ({names[j]!r})" if names is not None else f"score column {j}"


def validate_rows(
    scores: ArrayLike,
    labels: ArrayLike,
    weights: ArrayLike | None,
    *,
    names: Sequence[str] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64] | None]:
    """Check rated rows and return them as ``(scores (n, k) float64, labels bool, weights)``.

    Scores must be finite or ``-inf`` ("did not score"); NaN and ``+inf`` raise ``ValueError``
    naming the column and the first offending row. Labels must be bool or 0/1. Weights must be
    finite and non-negative.
    """
    s = np.asarray(scores)
    if s.ndim == 1:
        s = s[:, None]
    if s.ndim != 2:
        raise ValueError(f"scores must have shape (n, k), got shape {s.shape}")
    if not np.issubdtype(s.dtype, np.number) or np.issubdtype(s.dtype, np.complexfloating):
        raise ValueError(f"scores must be real numbers, got dtype {s.dtype}")
    s = s.astype(np.float64, copy=False)
    n, k = s.shape
    if k == 0:
        raise ValueError("scores must have at least one column (one classifier)")
    if names is not None and len(names) != k:
        raise ValueError(f"got {len(names)} classifier names for {k} score columns")
    # One reduction detects both NaN (max propagates it) and +inf without temporaries.
    top = s.max() if s.size else 0.0
    if np.isnan(top) or np.isposinf(top):
        _raise_bad_score(s, names)
    return s, _check_labels(labels, n), _check_weights(weights, n)


def _raise_bad_score(s: NDArray[np.float64], names: Sequence[str] | None) -> None:
    nan_rows = np.isnan(s)
    if nan_rows.any():
        j = int(np.flatnonzero(nan_rows.any(axis=0))[0])
        i = int(np.flatnonzero(nan_rows[:, j])[0])
        raise ValueError(
            f"{_column_name(names, j)} has NaN at row {i}; "
            "use -inf for 'this classifier did not score the item'"
        )
    pos_inf = np.isposinf(s)
    if pos_inf.any():
        j = int(np.flatnonzero(pos_inf.any(axis=0))[0])
        i = int(np.flatnonzero(pos_inf[:, j])[0])
        raise ValueError(f"{_column_name(names, j)} has +inf at row {i}; scores must be finite")


def _check_labels(labels: ArrayLike, n: int) -> NDArray[np.bool_]:
    y = np.asarray(labels)
    if y.shape != (n,):
        raise ValueError(f"labels must have shape ({n},) to match scores, got {y.shape}")
    if y.dtype != np.bool_:
        if not np.issubdtype(y.dtype, np.number):
            raise ValueError(f"labels must be bool or 0/1, got dtype {y.dtype}")
        bad = ~np.isin(y, (0, 1))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"labels must be bool or 0/1; labels[{i}] = {y[i].item()!r}")
        y = y.astype(np.bool_)
    return y


def _check_weights(weights: ArrayLike | None, n: int) -> NDArray[np.float64] | None:
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (n,):
            raise ValueError(f"weights must have shape ({n},) to match scores, got {w.shape}")
        bad = ~np.isfinite(w) | (w < 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"weights must be finite and >= 0; weights[{i}] = {w[i].item()!r}")
    return w


def lattice_counts(
    hist: NDArray[np.float64], rule: str, lattice_ndim: int | None = None
) -> NDArray[np.float64]:
    """Counts at every threshold tuple from a bin histogram (see the module docstring).

    Parameters
    ----------
    hist : ndarray of shape (..., B_1 + 1, ..., B_k + 1)
        Histogram over the bin lattice. Leading axes (e.g. bootstrap replicates) are kept.
    rule : {"any", "all"}
    lattice_ndim : int, optional
        Number of trailing lattice axes ``k``; default all axes.

    Returns
    -------
    ndarray of the same shape as ``hist``
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    k = hist.ndim if lattice_ndim is None else lattice_ndim
    axes = range(hist.ndim - k, hist.ndim)
    out = hist
    if rule == "any":
        for axis in axes:
            out = np.cumsum(out, axis=axis)
        total = out[(Ellipsis,) + (slice(-1, None),) * k]
        return total - out
    # rule "all": suffix sum over b > t, i.e. inclusive suffix sums shifted by one cell.
    for axis in axes:
        suffix = np.flip(np.cumsum(np.flip(out, axis=axis), axis=axis), axis=axis)
        out = np.zeros_like(suffix)
        src = [slice(None)] * out.ndim
        dst = [slice(None)] * out.ndim
        src[axis] = slice(1, None)
        dst[axis] = slice(0, -1)
        out[tuple(dst)] = suffix[tuple(src)]
    return out


@dataclass(frozen=True, eq=False)
class ThresholdGrid:
    """Weighted histograms of rated positives and negatives over a k-dimensional bin lattice.

    Build one with :meth:`from_scores`; combine grids with ``+``.

    Attributes
    ----------
    edges : tuple of ndarray
        Candidate thresholds per classifier (strictly ascending, finite).
    pos, neg : ndarray of shape (B_1 + 1, ..., B_k + 1)
        Weighted counts of rated positives / negatives per bin cell (float64, exact multiples of
        ``2**-weight_bits``). Bin 0 of each axis holds scores below the first edge and ``-inf``.
    names : tuple of str or None
        Classifier names, in axis order.
    weight_bits : int
        Weight resolution: weights are rounded to multiples of ``2**-weight_bits``.
    """

    edges: tuple[NDArray[np.float64], ...]
    pos: NDArray[np.float64]
    neg: NDArray[np.float64]
    names: tuple[str, ...] | None = None
    weight_bits: int = DEFAULT_WEIGHT_BITS
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        shape = tuple(e.size + 1 for e in self.edges)
        if self.pos.shape != shape or self.neg.shape != shape:
            raise ValueError(
                f"histogram shapes {self.pos.shape}/{self.neg.shape} do not match edges {shape}"
            )
        limit = 2.0 ** (53 - self.weight_bits)
        if self.pos.sum() + self.neg.sum() >= limit:
            raise ValueError(
                f"total weight exceeds 2**{53 - self.weight_bits}, beyond which float64 sums are "
                "not exact; use a smaller weight_bits"
            )

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_scores(
        cls,
        scores: ArrayLike,
        labels: ArrayLike,
        edges: Sequence[ArrayLike],
        weights: ArrayLike | None = None,
        *,
        names: Sequence[str] | None = None,
        weight_bits: int = DEFAULT_WEIGHT_BITS,
    ) -> ThresholdGrid:
        """Histogram rated rows over the bin lattice.

        Parameters
        ----------
        scores : array-like of shape (n, k) or (n,)
            Scores of k classifiers; finite, or ``-inf`` when a classifier did not score the item
            (it never fires). NaN and ``+inf`` raise ``ValueError`` naming the column.
        labels : array-like of shape (n,)
            True (positive) or False; bool or 0/1.
        edges : sequence of k array-likes
            Strictly ascending candidate thresholds per classifier.
        weights : array-like of shape (n,), optional
            Non-negative row weights (e.g. inverse rating-sample probability); default 1.
        names : sequence of k str, optional
            Classifier names, used in messages and reports.
        weight_bits : int, default 16
            Weights are rounded to multiples of ``2**-weight_bits`` so that all sums are exact.
        """
        s, y, w = validate_rows(scores, labels, weights, names=names)
        edge_arrays = cls._check_edge_list(edges, s.shape[1])
        shape = tuple(e.size + 1 for e in edge_arrays)
        wq = None if w is None else quantize_weights(w, weight_bits)
        counts = histogram_cells(s, y, wq, [BinLocator(e) for e in edge_arrays], shape)
        return cls(
            edges=edge_arrays,
            pos=counts[1],
            neg=counts[0],
            names=tuple(names) if names is not None else None,
            weight_bits=weight_bits,
        )

    @classmethod
    def empty(
        cls,
        edges: Sequence[ArrayLike],
        *,
        names: Sequence[str] | None = None,
        weight_bits: int = DEFAULT_WEIGHT_BITS,
    ) -> ThresholdGrid:
        """A grid with no rows: the identity of ``+``."""
        edge_arrays = cls._check_edge_list(edges, len(edges))
        shape = tuple(e.size + 1 for e in edge_arrays)
        return cls(
            edges=edge_arrays,
            pos=np.zeros(shape),
            neg=np.zeros(shape),
            names=tuple(names) if names is not None else None,
            weight_bits=weight_bits,
        )

    @staticmethod
    def _check_edge_list(edges: Sequence[ArrayLike], k: int) -> tuple[NDArray[np.float64], ...]:
        if isinstance(edges, np.ndarray) and edges.ndim == 1 and k == 1:
            edges = [edges]
        if len(edges) != k:
            raise ValueError(f"got {len(edges)} edge arrays for {k} classifiers (score columns)")
        return tuple(check_edges(e, name=f"edges[{j}]") for j, e in enumerate(edges))

    # ----------------------------------------------------------------- algebra
    def _check_compatible(self, other: ThresholdGrid) -> None:
        if not isinstance(other, ThresholdGrid):
            raise TypeError(f"cannot combine ThresholdGrid with {type(other).__name__}")
        if len(self.edges) != len(other.edges) or not all(
            np.array_equal(a, b) for a, b in zip(self.edges, other.edges, strict=True)
        ):
            raise ValueError("cannot merge threshold grids with different edges")
        if self.weight_bits != other.weight_bits:
            raise ValueError("cannot merge threshold grids with different weight_bits")
        if self.names != other.names and self.names is not None and other.names is not None:
            raise ValueError(f"cannot merge grids of classifiers {self.names} and {other.names}")

    def __add__(self, other: ThresholdGrid) -> ThresholdGrid:
        """Merge: the grid of the union of both sets of rows (exact; never aliases inputs)."""
        self._check_compatible(other)
        return ThresholdGrid(
            edges=self.edges,
            pos=self.pos + other.pos,
            neg=self.neg + other.neg,
            names=self.names if self.names is not None else other.names,
            weight_bits=self.weight_bits,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ThresholdGrid):
            return NotImplemented
        try:
            self._check_compatible(other)
        except ValueError:
            return False
        return bool(np.array_equal(self.pos, other.pos) and np.array_equal(self.neg, other.neg))

    __hash__ = None  # type: ignore[assignment]

    # ----------------------------------------------------------------- queries
    @property
    def k(self) -> int:
        """Number of classifiers."""
        return len(self.edges)

    @property
    def shape(self) -> tuple[int, ...]:
        """Lattice shape ``(B_1 + 1, ..., B_k + 1)``; the last index per axis is "off"."""
        return self.pos.shape

    @property
    def thresholds(self) -> tuple[NDArray[np.float64], ...]:
        """Threshold value at every lattice index per axis: the edges, then ``+inf`` (off)."""
        return tuple(np.append(e, np.inf) for e in self.edges)

    @property
    def total_positives(self) -> float:
        """Weighted number of rated positives."""
        return float(self.pos.sum())

    @property
    def total_negatives(self) -> float:
        """Weighted number of rated negatives."""
        return float(self.neg.sum())

    def counts(self, rule: str = "any") -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(tp, fp)`` at every threshold tuple, arrays of shape :attr:`shape`.

        ``tp[t]`` is the weighted number of rated positives flagged when classifier ``j`` uses
        threshold ``thresholds[j][t_j]`` and the classifiers are combined by ``rule``
        (``"any"``: flagged if any fires; ``"all"``: flagged if all fire).
        """
        key = ("counts", rule)
        if key not in self._cache:
            tp = lattice_counts(self.pos, rule)
            fp = lattice_counts(self.neg, rule)
            tp.flags.writeable = False
            fp.flags.writeable = False
            self._cache[key] = (tp, fp)
        return self._cache[key]

    def threshold_values(self, index: Sequence[int]) -> tuple[float, ...]:
        """Threshold per classifier at a lattice index (``+inf`` = off)."""
        return tuple(float(t[i]) for t, i in zip(self.thresholds, index, strict=True))


ROW_CHUNK = 1 << 16  # rows per pass: every temporary of a chunk stays in cache


def cell_codes(
    scores: NDArray[np.float64], locators: Sequence[BinLocator], shape: tuple[int, ...]
) -> NDArray[np.intp]:
    """Row-major flat index of each row's bin cell."""
    flat = locators[0](scores[:, 0])
    for j in range(1, len(locators)):
        flat *= shape[j]
        flat += locators[j](scores[:, j])
    return flat


def histogram_cells(
    scores: NDArray[np.float64],
    labels: NDArray[np.bool_],
    weights: NDArray[np.float64] | None,
    locators: Sequence[BinLocator],
    shape: tuple[int, ...],
) -> NDArray[np.float64]:
    """Weighted counts per (label, cell): an array of shape ``(2, *shape)``, [0] = negatives.

    Rows are processed in chunks of :data:`ROW_CHUNK`; the label is folded into the cell code so
    that one ``bincount`` per chunk histograms both classes.
    """
    size = int(np.prod(shape))
    total = np.zeros(2 * size, dtype=np.int64 if weights is None else np.float64)
    for start in range(0, scores.shape[0], ROW_CHUNK):
        stop = start + ROW_CHUNK
        code = cell_codes(scores[start:stop], locators, shape)
        code += labels[start:stop] * size
        if weights is None:
            total += np.bincount(code, minlength=2 * size)
        else:
            total += np.bincount(code, weights=weights[start:stop], minlength=2 * size)
    return total.astype(np.float64, copy=False).reshape((2, *shape))


@dataclass(frozen=True)
class SparseCounts:
    """Non-zero cells of a ``(2, *shape)`` label-by-cell histogram: a compact partial grid.

    ``cells`` are flat indices into the ``(2, *shape)`` array (label 0 = negatives first),
    strictly increasing; ``counts`` their weighted counts. Partials of a batch are this small
    (at most one entry per row) where a dense histogram would be ``2 * prod(shape)`` cells.
    """

    cells: NDArray[np.int64]
    counts: NDArray[np.float64]

    def add_to(self, dense: NDArray[np.float64]) -> None:
        """Add into a dense ``(2, *shape)`` accumulator in place (cells are unique)."""
        flat = dense.reshape(-1)
        flat[self.cells] += self.counts

    def to_grid(
        self,
        edges: Sequence[NDArray[np.float64]],
        *,
        names: Sequence[str] | None = None,
        weight_bits: int = DEFAULT_WEIGHT_BITS,
    ) -> ThresholdGrid:
        shape = tuple(e.size + 1 for e in edges)
        dense = np.zeros((2, *shape))
        self.add_to(dense)
        return ThresholdGrid(
            edges=tuple(edges), pos=dense[1], neg=dense[0],
            names=tuple(names) if names is not None else None, weight_bits=weight_bits,
        )


def grouped_histograms(
    group_codes: NDArray[np.intp],
    scores: NDArray[np.float64],
    labels: NDArray[np.bool_],
    weights: NDArray[np.float64] | None,
    edges: Sequence[NDArray[np.float64]],
    *,
    weight_bits: int = DEFAULT_WEIGHT_BITS,
) -> dict[int, SparseCounts]:
    """Histograms of already validated rows per group, as sparse partials.

    Exactly the counts :meth:`ThresholdGrid.from_scores` computes for each group's rows (same
    binning, same weight rounding): ``partials[g].to_grid(edges)`` equals the grid of group
    ``g``'s rows. Rows are coded once by (group, label, cell) and sorted; each run of equal codes
    is one non-zero cell.
    """
    locators = [BinLocator(e) for e in edges]
    shape = tuple(e.size + 1 for e in edges)
    size = int(np.prod(shape))
    n = scores.shape[0]
    keys = np.empty(n, dtype=np.int64)
    for start in range(0, n, ROW_CHUNK):
        stop = start + ROW_CHUNK
        block = cell_codes(scores[start:stop], locators, shape)
        block += labels[start:stop] * size
        keys[start:stop] = block
    keys += np.asarray(group_codes, dtype=np.int64) * (2 * size)
    if weights is None:
        keys.sort()
        run_weights = None
    else:
        order = np.argsort(keys)
        keys = keys[order]
        run_weights = quantize_weights(weights, weight_bits)[order]
    if n == 0:
        return {}
    starts = np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1))
    unique = keys[starts]
    if run_weights is None:
        counts = np.diff(np.append(starts, n)).astype(np.float64)
    else:
        counts = np.add.reduceat(run_weights, starts)
    groups = unique // (2 * size)
    cells = unique - groups * (2 * size)
    bounds = np.concatenate(([0], np.flatnonzero(groups[1:] != groups[:-1]) + 1, [groups.size]))
    return {
        int(groups[a]): SparseCounts(cells=cells[a:b], counts=counts[a:b])
        for a, b in itertools.pairwise(bounds.tolist())
    }


def sum_sparse(partials: Sequence[SparseCounts], n_cells: int) -> SparseCounts:
    """The sum of sparse partials over the same lattice (``n_cells = 2 * prod(shape)``).

    Exact: counts are multiples of the weight resolution, so float64 sums do not round.
    """
    if not partials:
        return SparseCounts(cells=np.zeros(0, dtype=np.int64), counts=np.zeros(0))
    dense = np.bincount(
        np.concatenate([p.cells for p in partials]),
        weights=np.concatenate([p.counts for p in partials]),
        minlength=n_cells,
    )
    cells = np.flatnonzero(dense)
    return SparseCounts(cells=cells.astype(np.int64), counts=dense[cells])
