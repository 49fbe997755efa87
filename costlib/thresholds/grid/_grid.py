"""Threshold grids: the mergeable sufficient statistic for ensembles of k classifiers.

Rated rows carry scores ``s_1..s_k``, a label and a weight. With candidate thresholds
``e_j[0] < ... < e_j[B_j - 1]`` per classifier (plus "off" = ``+inf``), every row falls in one cell
``b = (b_1, ..., b_k)`` of the bin lattice (see
:func:`costlib.thresholds.binning._edges.bin_indices`). The
weighted histograms ``H_pos[b]`` and ``H_neg[b]`` of rated positives and negatives are all that is
needed: they add across bundles, files, workers and windows.

At a threshold tuple ``t = (t_1, ..., t_k)`` (lattice indices, ``t_j = B_j`` meaning "off"),
classifier ``j`` fires iff ``b_j > t_j``, so

- rule ``"all"`` (AND): ``TP(t) = sum_{b > t} H_pos[b]`` (a k-dimensional suffix sum),
- rule ``"any"`` (OR, the paper's union): ``TP(t) = P - sum_{b <= t} H_pos[b]`` (total minus a
  k-dimensional inclusive prefix sum),

and ``FP`` likewise from ``H_neg``. Raising any threshold never increases TP or FP, and the
all-off cell has ``TP = FP = 0`` for both rules.

Selective labels (coverage). Humans rate only what the thresholds in force flagged, so next to
``H_pos``/``H_neg`` a grid keeps ``H_unr[b]``, the weight of *unrated* scored rows per cell (a row
whose label is null/NaN/``pd.NA``). ``U(t)`` is the same prefix/suffix sum over ``H_unr``, the
flagged volume is ``V(t) = TP(t) + FP(t) + U(t)`` (every scored row the thresholds flag, rated or
not) and the coverage is ``(TP + FP) / V``, defined as 1 when ``V = 0`` (flagging nothing is
trivially covered). A tuple is *covered* at unrated share ``s`` when ``U(t) <= s * V(t)``. With
``s = 0`` the covered tuples form an up-set under both rules: raising a threshold never adds
flagged rows, so it never adds unrated ones. Grids without unrated rows are covered everywhere.

Exactness. Weights are rounded to the nearest multiple of ``2**-weight_bits`` (default 16 bits,
so a weight moves by at most ``2**-17 ~ 7.6e-6``; integer weights and the default weight 1 are
unchanged). Every histogram cell, every merge and every cumulative sum is then a sum of multiples
of ``2**-weight_bits`` below ``2**(53 - weight_bits)``, which float64 represents exactly, so
merging is exactly associative and commutative and TP/FP do not depend on how the rows were
split or ordered. A grid whose total weight would leave that range raises ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib._messages import plain
from costlib.thresholds.binning._bin_locator import locator_for
from costlib.thresholds.binning._cells import histogram_cells
from costlib.thresholds.binning._edges import check_edges
from costlib.thresholds.binning._rows import (
    DEFAULT_WEIGHT_BITS,
    apply_audit,
    as_score_array,
    check_rule,
    design_weights,
    ht_variance_weights,
    quantize_weights,
    split_labels,
    validate_rows,
)
from costlib.thresholds.grid._evidence import evidence_rows, summed_rows

__all__ = ["ThresholdGrid", "lattice_counts"]


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
    rule = check_rule(rule)
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


_T = TypeVar("_T")


def _read_only(array: NDArray[np.float64]) -> NDArray[np.float64]:
    """``array``, flagged read-only (a cached lattice is shared by every caller)."""
    array.flags.writeable = False
    return array


def check_mergeable(a: Any, b: Any, what: str = "threshold grids") -> None:
    """Raise ValueError unless ``a`` and ``b`` (grids of any layout with ``edges``, ``names``
    and ``weight_bits``) count the same lattice: equal edges, weight resolution and
    classifier names (a missing name list matches any)."""
    if len(a.edges) != len(b.edges) or not all(
        np.array_equal(x, y) for x, y in zip(a.edges, b.edges, strict=True)
    ):
        raise ValueError(f"cannot merge {what} with different edges")
    if a.weight_bits != b.weight_bits:
        raise ValueError(f"cannot merge {what} with different weight_bits")
    if a.names != b.names and a.names is not None and b.names is not None:
        raise ValueError(f"cannot merge grids of classifiers {a.names} and {b.names}")


def _census_or_zeros(grid: ThresholdGrid) -> NDArray[np.float64] | None:
    """:attr:`ThresholdGrid.census`, zeros for a grid without rated rows, else None."""
    if grid.census is not None:
        return grid.census
    if not (grid.pos.any() or grid.neg.any()):
        return np.zeros((4, *grid.shape))
    return None


def _same_census(a: NDArray[np.float64] | None, b: NDArray[np.float64] | None) -> bool:
    """Both census channels absent, or equal."""
    if a is None or b is None:
        return a is None and b is None
    return bool(np.array_equal(a, b))


def _sum_census(a: ThresholdGrid, b: ThresholdGrid) -> NDArray[np.float64] | None:
    """The census channels of ``a + b``: None when either holds rated rows of unknown
    inclusion (a grid built without audit probabilities), or neither has any."""
    if a.census is None and b.census is None:
        return None
    first, second = _census_or_zeros(a), _census_or_zeros(b)
    return None if first is None or second is None else first + second


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
    unrated : ndarray of shape (B_1 + 1, ..., B_k + 1)
        Weight of scored but unrated rows per bin cell (``H_unr``, quantised like ``pos``);
        zeros when not given (a grid of rated rows only, covered everywhere).
    audited_rows : int
        Number of rated audit rows (inclusion probability ``π < 1``) in the grid. When
        positive, ``pos``/``neg`` hold Horvitz–Thompson weights ``w / π`` (see
        :mod:`costlib.audit._weights`): every cell estimates the whole scored population, and
        :attr:`total_positives` is the estimate ``P̂`` of all positives.
    variance : ndarray of shape (2, B_1 + 1, ..., B_k + 1) or None
        Horvitz–Thompson variance weights of the rated rows per cell, negatives (0) and
        positives (1): ``sum_i (1 - π_i) (w_i / π_i)**2`` (:func:`ht_variance_weights`;
        flagged rows, ``π = 1``, add nothing). Set by :meth:`from_scores` with audit
        probabilities; None otherwise (no design variance). The variance of the estimated
        difference of TP or FP between two threshold tuples is the sum over the cells one flags
        and the other does not
        (:func:`costlib.thresholds.loop._move_evidence.gain_standard_errors`).
    design : ndarray of shape (2, B_1 + 1, ..., B_k + 1) or None
        What the audit design could have sampled per cell, whatever was rated: channel 0 holds
        ``W = sum_i w_i² (1 - π_i) / π_i`` and channel 1 ``A = sum_i π_i`` (stored times
        :data:`~costlib.thresholds.binning._rows.DESIGN_EXPECTED_SCALE`) over the rows with
        ``0 < π_i < 1`` (audited *and* represented rows, :func:`design_weights`). ``W`` of a
        region is the variance of its estimated count if every row had one label; ``A`` the
        expected number of audited rows in it. Set with :attr:`variance`; None otherwise. A
        region where no row was audited has estimate 0 and :attr:`variance` 0 but ``W > 0``:
        :func:`costlib.thresholds.loop._move_evidence.gain_standard_errors` uses it to treat it as
        unknown.
    positive_rows, negative_rows : int or None
        Rated positive / negative rows with a positive weight, one each (the weights make
        estimates or money): what ``min_positives``/``min_negatives`` count. None: unknown.
    census : ndarray of shape (4, B_1 + 1, ..., B_k + 1) or None
        The rows rated with certainty (``π = 1``: flagged when decided), per cell: ``sum w`` of
        negatives (0) and positives (1) and ``sum w²`` of negatives (2) and positives (3). A
        part of :attr:`pos`/:attr:`neg` that carries no design variance and no selection on
        its labels: in a region the thresholds in force flag, it holds the days since they
        were published (:func:`costlib.thresholds.loop._census_review.census_gains`). Set with
        :attr:`variance`; None otherwise.
    """

    edges: tuple[NDArray[np.float64], ...]
    pos: NDArray[np.float64]
    neg: NDArray[np.float64]
    names: tuple[str, ...] | None = None
    weight_bits: int = DEFAULT_WEIGHT_BITS
    unrated: NDArray[np.float64] | None = None  # None: replaced by zeros in __post_init__
    audited_rows: int = 0
    variance: NDArray[np.float64] | None = None
    design: NDArray[np.float64] | None = None
    census: NDArray[np.float64] | None = None
    positive_rows: int | None = None
    negative_rows: int | None = None
    _cache: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        shape = tuple(e.size + 1 for e in self.edges)
        if self.unrated is None:
            object.__setattr__(self, "unrated", np.zeros(shape))
        assert self.unrated is not None
        if self.variance is not None and self.variance.shape != (2, *shape):
            raise ValueError(f"variance shape {self.variance.shape} does not match edges "
                             f"{(2, *shape)}")
        if self.design is not None and self.design.shape != (2, *shape):
            raise ValueError(f"design shape {self.design.shape} does not match edges "
                             f"{(2, *shape)}")
        if self.census is not None and self.census.shape != (4, *shape):
            raise ValueError(f"census shape {self.census.shape} does not match edges "
                             f"{(4, *shape)}")
        if self.pos.shape != shape or self.neg.shape != shape or self.unrated.shape != shape:
            raise ValueError(
                f"histogram shapes {self.pos.shape}/{self.neg.shape}/{self.unrated.shape} do "
                f"not match edges {shape}"
            )
        limit = 2.0 ** (53 - self.weight_bits)
        if self.pos.sum() + self.neg.sum() + self.unrated.sum() >= limit:
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
        audit_probabilities: ArrayLike | None = None,
    ) -> ThresholdGrid:
        """Histogram rated rows over the bin lattice.

        Parameters
        ----------
        scores : array-like of shape (n, k) or (n,)
            Scores of k classifiers; finite, or ``-inf`` when a classifier did not score the item
            (it never fires). NaN and ``+inf`` raise ``ValueError`` naming the column.
            A pandas DataFrame is accepted too: its columns ``names`` (default: all), by
            name; there NaN/``pd.NA`` means "did not score" (see :func:`as_score_array`).
        labels : array-like of shape (n,)
            True (positive) or False (negative), bool or 0/1; a null label (``None``, ``NaN``,
            ``pd.NA``, pandas nullable boolean) means the row was scored but not rated: its
            weight goes to :attr:`unrated` (see :func:`split_labels`). Labels of unrated rows
            must not be filled with False: that makes them rated negatives.
        edges : sequence of k array-likes
            Strictly ascending candidate thresholds per classifier.
        weights : array-like of shape (n,), optional
            Non-negative row weights (e.g. inverse rating-sample probability); default 1.
        names : sequence of k str, optional
            Classifier names, used in messages and reports.
        weight_bits : int, default 16
            Weights are rounded to multiples of ``2**-weight_bits`` so that all sums are exact.
        audit_probabilities : array-like of shape (n,), optional
            Inclusion probability ``π`` of every row (1 = flagged, ``0 < π < 1`` = unflagged
            and audit-eligible, NaN/0 = not reachable by the audit). Rated rows then weigh
            ``w / π`` (Horvitz–Thompson) and unrated rows with ``0 < π < 1`` are represented
            by the audit sample, not unrated gaps (:func:`costlib.audit.audit_weights`).
        """
        scores, names = as_score_array(scores, names)
        n = np.shape(scores)[0] if np.ndim(scores) else 0
        y, unrated = split_labels(labels, n)
        s, y, w = validate_rows(scores, y, weights, names=names)
        s_all, w_all = s, w
        s, y, w, unrated, audited, keep = apply_audit(s, y, w, unrated, audit_probabilities)
        edge_arrays = cls._check_edge_list(edges, s.shape[1])
        shape = tuple(e.size + 1 for e in edge_arrays)
        wq = None if w is None else quantize_weights(w, weight_bits)
        evidence = evidence_rows(y, w, unrated)  # rated rows with a weight, one each
        locators = [locator_for(e) for e in edge_arrays]
        counts = histogram_cells(s, y, wq, locators, shape, unrated=unrated)
        variance = design = census = None
        if audit_probabilities is not None:
            sampled, worst, expected = design_weights(
                w_all, np.asarray(audit_probabilities, dtype=np.float64), weight_bits)
            rows = s_all[sampled]
            design = histogram_cells(
                np.concatenate([rows, rows]),
                np.repeat([False, True], rows.shape[0]),
                np.concatenate([worst, expected]), locators, shape)
            assert w is not None and keep is not None  # set by apply_audit with probabilities
            p = np.asarray(audit_probabilities, dtype=np.float64)[keep]
            rated = np.ones(s.shape[0], dtype=bool) if unrated is None else ~unrated
            v = ht_variance_weights(w[rated], p[rated], weight_bits)
            variance = histogram_cells(s[rated], y[rated], v, locators, shape)
            certain = rated & (p == 1.0)
            wc = quantize_weights(w[certain], weight_bits)
            census = np.concatenate([
                histogram_cells(s[certain], y[certain], wc, locators, shape),
                histogram_cells(s[certain], y[certain], quantize_weights(wc * wc, weight_bits),
                                locators, shape)])
        return cls(
            edges=edge_arrays,
            pos=counts[1],
            neg=counts[0],
            names=tuple(names) if names is not None else None,
            weight_bits=weight_bits,
            unrated=counts[2] if unrated is not None else None,
            audited_rows=audited,
            variance=variance,
            design=design,
            census=census,
            **evidence,
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
            weight_bits=weight_bits, positive_rows=0, negative_rows=0,
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
        check_mergeable(self, other)

    def __add__(self, other: ThresholdGrid) -> ThresholdGrid:
        """Merge: the grid of the union of both sets of rows (exact; never aliases inputs)."""
        self._check_compatible(other)
        return ThresholdGrid(
            edges=self.edges,
            pos=self.pos + other.pos,
            neg=self.neg + other.neg,
            names=self.names if self.names is not None else other.names,
            weight_bits=self.weight_bits,
            unrated=self._unrated() + other._unrated(),
            audited_rows=self.audited_rows + other.audited_rows,
            variance=(None if self.variance is None and other.variance is None
                      else self._variance() + other._variance()),
            design=(None if self.design is None and other.design is None
                    else self._design() + other._design()),
            census=_sum_census(self, other),
            **summed_rows(self, other),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ThresholdGrid):
            return NotImplemented
        try:
            self._check_compatible(other)
        except ValueError:
            return False
        return bool(
            np.array_equal(self.pos, other.pos)
            and np.array_equal(self.neg, other.neg)
            and np.array_equal(self._unrated(), other._unrated())
            and self.audited_rows == other.audited_rows
            and (self.variance is None) == (other.variance is None)
            and (self.variance is None or np.array_equal(self._variance(), other._variance()))
            and (self.design is None) == (other.design is None)
            and (self.design is None or np.array_equal(self._design(), other._design()))
            and _same_census(self.census, other.census)
        )

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

    def _memo(self, key: tuple[str, str], compute: Callable[[], _T]) -> _T:
        """``compute()`` once per grid and ``key`` (the histograms never change after
        construction)."""
        if key not in self._cache:
            self._cache[key] = compute()
        value: _T = self._cache[key]
        return value

    @property
    def total_positives(self) -> float:
        """Weighted number of rated positives."""
        return self._memo(("sum", "pos"), lambda: float(self.pos.sum()))

    @property
    def has_audit(self) -> bool:
        """Whether the grid holds audit rows, i.e. Horvitz–Thompson estimates of all rows."""
        return self.audited_rows > 0

    @property
    def total_positives_source(self) -> str:
        """``"horvitz_thompson"`` with audit rows (``P̂``), else ``"rated"`` (a lower bound)."""
        return "horvitz_thompson" if self.has_audit else "rated"

    @property
    def total_negatives(self) -> float:
        """Weighted number of rated negatives."""
        return self._memo(("sum", "neg"), lambda: float(self.neg.sum()))

    def _variance(self) -> NDArray[np.float64]:
        """:attr:`variance`, zeros when None."""
        if self.variance is None:
            return np.zeros((2, *self.shape))
        return self.variance

    def _design(self) -> NDArray[np.float64]:
        """:attr:`design`, zeros when None."""
        if self.design is None:
            return np.zeros((2, *self.shape))
        return self.design

    def _unrated(self) -> NDArray[np.float64]:
        """``unrated`` as the array it always is after ``__post_init__`` (for the type checker)."""
        assert self.unrated is not None
        return self.unrated

    @property
    def total_unrated(self) -> float:
        """Weight of scored but unrated rows."""
        return self._memo(("sum", "unrated"), lambda: float(self._unrated().sum()))

    @property
    def has_unrated(self) -> bool:
        """Whether any unrated weight is recorded (otherwise every tuple is covered)."""
        return self._memo(("any", "unrated"), lambda: bool(self._unrated().any()))

    def _lattice(self, name: str, hist: NDArray[np.float64], rule: str) -> NDArray[np.float64]:
        return self._memo((name, rule), lambda: _read_only(lattice_counts(hist, rule)))

    def unrated_counts(self, rule: str = "any") -> NDArray[np.float64]:
        """``U(t)``: unrated weight flagged at every threshold tuple (shape :attr:`shape`).

        The same prefix (``"any"``) or suffix (``"all"``) sum as TP, over :attr:`unrated`.
        """
        return self._lattice("unrated", self._unrated(), check_rule(rule))

    def volume(self, rule: str = "any") -> NDArray[np.float64]:
        """``V(t) = TP(t) + FP(t) + U(t)``: every scored row the tuple flags, rated or not.

        Exact (sums of multiples of the weight resolution); non-increasing along every axis.
        """
        rule = check_rule(rule)

        def compute() -> NDArray[np.float64]:
            tp, fp = self.counts(rule)
            out = tp + fp
            if self.has_unrated:
                out += self.unrated_counts(rule)
            return _read_only(out)

        return self._memo(("volume", rule), compute)

    def coverage(self, rule: str = "any") -> NDArray[np.float64]:
        """``(TP + FP) / V`` at every tuple: the rated share of the flagged volume.

        Convention: 1 where ``V = 0`` (nothing flagged is trivially covered).
        """
        rule = check_rule(rule)
        tp, fp = self.counts(rule)
        vol = self.volume(rule)
        rated = tp + fp
        out = np.ones_like(vol)
        np.divide(rated, vol, out=out, where=vol > 0)
        return out

    def covered(self, rule: str = "any", max_unrated_share: float = 0.0) -> NDArray[np.bool_]:
        """Tuples whose flagged volume holds at most a share ``s`` of unrated weight.

        ``covered[t] = U(t) <= s * V(t)``, evaluated in float64 exactly as written. With
        ``s = 0`` this is ``U(t) == 0``, an up-set under both rules; ``s >= 1`` covers every
        tuple. The all-off tuple (``V = 0``) is always covered.
        """
        rule = check_rule(rule)
        s = float(max_unrated_share)
        if not (0.0 <= s <= 1.0) or math.isnan(s):
            raise ValueError(f"max_unrated_share must be in [0, 1], got {plain(max_unrated_share)}")
        if not self.has_unrated:
            return np.ones(self.shape, dtype=bool)
        unr = self.unrated_counts(rule)
        if s == 0.0:
            return unr == 0
        return unr <= s * self.volume(rule)

    def counts(self, rule: str = "any") -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(tp, fp)`` at every threshold tuple, arrays of shape :attr:`shape`.

        ``tp[t]`` is the weighted number of rated positives flagged when classifier ``j`` uses
        threshold ``thresholds[j][t_j]`` and the classifiers are combined by ``rule``
        (``"any"``: flagged if any fires; ``"all"``: flagged if all fire).
        """
        rule = check_rule(rule)
        return self._memo(("counts", rule),
                          lambda: (_read_only(lattice_counts(self.pos, rule)),
                                   _read_only(lattice_counts(self.neg, rule))))

    def threshold_values(self, index: Sequence[int]) -> tuple[float, ...]:
        """Threshold per classifier at a lattice index (``+inf`` = off)."""
        return tuple(float(t[i]) for t, i in zip(self.thresholds, index, strict=True))
