"""Threshold grids: the mergeable sufficient statistic for ensembles of k classifiers.

Rated rows carry scores ``s_1..s_k``, a label and a weight. With candidate thresholds
``e_j[0] < ... < e_j[B_j - 1]`` per classifier (plus "off" = ``+inf``), every row falls in one cell
``b = (b_1, ..., b_k)`` of the bin lattice (see :func:`costlib.thresholds._edges.bin_indices`). The
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

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from costlib._messages import plain
from costlib.audit._weights import audit_weights
from costlib.thresholds._bin_locator import BinLocator, locator_for
from costlib.thresholds._edges import check_edges

__all__ = [
    "DESIGN_EXPECTED_SCALE",
    "RULES",
    "SparseCounts",
    "SparseGrid",
    "ThresholdGrid",
    "apply_audit",
    "as_score_array",
    "cell_codes",
    "design_weights",
    "grouped_histograms",
    "histogram_cells",
    "ht_variance_weights",
    "lattice_counts",
    "merge_sparse",
    "quantize_weights",
    "split_labels",
    "sum_sparse",
    "validate_rows",
]

RULES = ("any", "all")
RULE_ALIASES = {"or": "any", "and": "all"}
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


def check_rule(rule: str) -> str:
    """The canonical rule name: ``"any"``/``"all"``, or their aliases ``"or"``/``"and"``."""
    canonical = RULE_ALIASES.get(rule, rule) if isinstance(rule, str) else rule
    if canonical not in RULES:
        raise ValueError(
            f"rule must be one of {RULES} (or their aliases 'or', 'and'), got {rule!r}"
        )
    return canonical


def as_score_array(
    scores: ArrayLike | pd.DataFrame, names: Sequence[str] | None = None
) -> tuple[ArrayLike, tuple[str, ...] | None]:
    """Scores as an array, accepting a pandas DataFrame of classifier columns by name.

    For a DataFrame, ``names`` selects and orders the columns (default: every column, in frame
    order), and a missing value (``NaN``, ``pd.NA``) means the classifier did not score the row:
    it becomes ``-inf`` (never fires), pandas' own convention for missing data. Arrays are
    returned unchanged (there NaN stays invalid input; ``-inf`` means "did not score").

    Returns
    -------
    (scores, names) : the array and the classifier names (``None`` if none were known).
    """
    if isinstance(scores, pd.DataFrame):
        columns = list(scores.columns) if names is None else list(names)
        missing = [c for c in columns if c not in scores.columns]
        if missing:
            raise ValueError(
                f"score columns {missing} not in the DataFrame (columns: {list(scores.columns)})"
            )
        frame = scores[columns]
        bad = [c for c in columns if not pd.api.types.is_numeric_dtype(frame[c])
               or pd.api.types.is_bool_dtype(frame[c])]
        if bad:
            raise ValueError(f"score columns {bad} are not numeric")
        values = frame.to_numpy(dtype=np.float64, na_value=-np.inf)
        values[np.isnan(values)] = -np.inf
        return values, tuple(str(c) for c in columns)
    return scores, None if names is None else tuple(names)


def split_labels(labels: ArrayLike, n: int) -> tuple[NDArray[np.bool_], NDArray[np.bool_] | None]:
    """Labels of possibly unrated rows: ``(positive, unrated)``.

    A null label (``None``, ``NaN``, ``pd.NA``, in an object or float array or a pandas
    nullable boolean column) means *unrated*: the row was scored but nobody rated it. Rated
    labels must be bool or 0/1. ``positive`` is False on unrated rows; ``unrated`` is ``None``
    when every row is rated (then the result is exactly :func:`validate_rows`' labels).

    A label filled with ``False`` is a rated negative: ``fillna(False)`` on the labels of
    unrated rows turns them into negatives and cannot be detected here, so do not do it.
    """
    if isinstance(labels, (pd.Series, pd.Index, pd.api.extensions.ExtensionArray)):
        missing = np.asarray(pd.isna(labels), dtype=bool)
        y = np.asarray(labels, dtype=object) if missing.any() else labels.to_numpy()
    else:
        y = np.asarray(labels)
        if y.dtype == object:
            missing = np.asarray(pd.isna(y), dtype=bool)
        elif np.issubdtype(y.dtype, np.floating):
            missing = np.isnan(y)
        else:
            missing = None
    if missing is None or missing.shape != (n,) or not missing.any():
        if y.dtype == object and y.shape == (n,):
            y = np.array(y.tolist()) if n else np.zeros(0, dtype=bool)
        return _check_labels(y, n), None
    rated = y[~missing]
    rated = np.array(rated.tolist()) if rated.dtype == object else rated
    if rated.size == 0:
        rated = np.zeros(0, dtype=bool)
    out = np.zeros(n, dtype=bool)
    out[~missing] = _check_labels(rated, rated.shape[0])
    return out, missing


def ht_variance_weights(weights: NDArray[np.float64], probabilities: NDArray[np.float64],
                        weight_bits: int = DEFAULT_WEIGHT_BITS) -> NDArray[np.float64]:
    """Per-row terms of the Horvitz–Thompson variance estimate, quantised like weights.

    Under independent (Poisson) inclusion with probabilities ``π_i``, the total
    ``T̂ = sum_{i rated} x_i / π_i`` has the unbiased variance estimate
    ``sum_{i rated} (1 - π_i) (x_i / π_i)**2``; ``weights`` are the grid weights ``x_i / π_i``
    of rated rows. Rows rated with certainty (``π = 1``) contribute 0.
    """
    g = np.asarray(weights, dtype=np.float64)
    p = np.asarray(probabilities, dtype=np.float64)
    return quantize_weights((1.0 - p) * g * g, weight_bits)


#: The design channel of expected audited rows holds ``π * DESIGN_EXPECTED_SCALE`` per row, so
#: that quantising to the weight resolution keeps small ``π`` precise (``π = 1e-4`` is 6.55
#: units of ``2**-16`` unscaled, ~1700 scaled).
DESIGN_EXPECTED_SCALE = 256.0


def design_weights(weights: NDArray[np.float64] | None, probabilities: NDArray[np.float64],
                   weight_bits: int = DEFAULT_WEIGHT_BITS
                   ) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64]]:
    """Per-row design terms of the rows an audit could have sampled (``0 < π < 1``).

    Returns ``(sampled_by_design, worst, expected)``: the mask of rows with ``0 < π_i < 1``
    (audited rated rows and represented unrated rows alike, whatever their label), and for
    those rows ``worst_i = w_i² (1 - π_i) / π_i`` (the Horvitz–Thompson variance row ``i``
    adds to a count of its label: summed over a region it is the variance of the region's
    estimated count *if every row had that label*) and ``expected_i = π_i`` times
    :data:`DESIGN_EXPECTED_SCALE` (summed and divided by it: the expected number of audited
    rows in the region). Both quantised like weights. Rows with
    ``π = 1`` (flagged: a census), ``π = 0`` or missing are not part of the design.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    sampled = (p > 0) & (p < 1)
    w = np.ones(p.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    ps, ws = p[sampled], w[sampled]
    return (sampled, quantize_weights(ws * ws * (1.0 - ps) / ps, weight_bits),
            quantize_weights(ps * DESIGN_EXPECTED_SCALE, weight_bits))


def apply_audit(
    scores: NDArray[np.float64],
    labels: NDArray[np.bool_],
    weights: NDArray[np.float64] | None,
    unrated: NDArray[np.bool_] | None,
    audit_probabilities: ArrayLike | None,
) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64] | None,
           NDArray[np.bool_] | None, int, NDArray[np.bool_] | None]:
    """Validated rows as they enter a grid under an audit design (:mod:`costlib.audit._weights`).

    Returns ``(scores, labels, weights, unrated, audited_rows, keep)``: without probabilities
    the inputs unchanged, 0 and ``keep = None``; with them the rows that enter the grid
    (``keep``: represented rows dropped), Horvitz–Thompson weights ``w / π`` on rated rows, and
    the unrated-gap mask (``None`` when there is no gap).
    """
    if audit_probabilities is None:
        return scores, labels, weights, unrated, 0, None
    design = audit_weights(unrated, audit_probabilities, weights)
    keep = design.keep
    gaps = design.unrated[keep]
    return (scores[keep], labels[keep], design.weights[keep], gaps if gaps.any() else None,
            design.audited_rows, keep)


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
        and the other does not (:func:`costlib.thresholds._move_evidence.gain_standard_errors`).
    design : ndarray of shape (2, B_1 + 1, ..., B_k + 1) or None
        What the audit design could have sampled per cell, whatever was rated: channel 0 holds
        ``W = sum_i w_i² (1 - π_i) / π_i`` and channel 1 ``A = sum_i π_i`` (stored times
        :data:`DESIGN_EXPECTED_SCALE`) over the rows with
        ``0 < π_i < 1`` (audited *and* represented rows, :func:`design_weights`). ``W`` of a
        region is the variance of its estimated count if every row had one label; ``A`` the
        expected number of audited rows in it. Set with :attr:`variance`; None otherwise. A
        region where no row was audited has estimate 0 and :attr:`variance` 0 but ``W > 0``:
        :func:`costlib.thresholds._move_evidence.gain_standard_errors` uses it to treat it as
        unknown.
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
        locators = [locator_for(e) for e in edge_arrays]
        counts = histogram_cells(s, y, wq, locators, shape, unrated=unrated)
        variance = design = None
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
    *,
    unrated: NDArray[np.bool_] | None = None,
) -> NDArray[np.float64]:
    """Weighted counts per (label, cell): an array of shape ``(2, *shape)``, [0] = negatives.

    With ``unrated`` (a row mask) the array has shape ``(3, *shape)`` and channel 2 holds the
    unrated rows (their ``labels`` entries are ignored). Rows are processed in chunks of
    :data:`ROW_CHUNK`; the channel is folded into the cell code so that one ``bincount`` per
    chunk histograms every channel.
    """
    size = int(np.prod(shape))
    channels = 2 if unrated is None else 3
    total = np.zeros(channels * size, dtype=np.int64 if weights is None else np.float64)
    for start in range(0, scores.shape[0], ROW_CHUNK):
        stop = start + ROW_CHUNK
        code = _channel_codes(scores[start:stop], labels[start:stop],
                              None if unrated is None else unrated[start:stop],
                              locators, shape)
        if weights is None:
            total += np.bincount(code, minlength=channels * size)
        else:
            total += np.bincount(code, weights=weights[start:stop], minlength=channels * size)
    return total.astype(np.float64, copy=False).reshape((channels, *shape))


def _channel_codes(
    scores: NDArray[np.float64],
    labels: NDArray[Any],
    unrated: NDArray[np.bool_] | None,
    locators: Sequence[BinLocator],
    shape: tuple[int, ...],
    bins: Sequence[NDArray[np.intp]] | None = None,
) -> NDArray[np.intp]:
    """Flat index into the ``(channels, *shape)`` array: channel * size + cell.

    The channel is the label (0, 1), or 2 for ``unrated`` rows. ``bins``: each classifier's
    bin per row, already located (else the ``locators`` locate them)."""
    size = int(np.prod(shape))
    if bins is None:
        code = cell_codes(scores, locators, shape)
    else:
        code = bins[0].astype(np.intp, copy=True)
        for j in range(1, len(bins)):
            code *= shape[j]
            code += bins[j]
    if unrated is None:
        code += labels * size
    else:
        channel = labels.astype(np.intp)
        channel[unrated] = 2
        channel *= size
        code += channel
    return code


def _narrowest(values: NDArray[Any]) -> NDArray[Any]:
    """Non-negative integers in the narrowest unsigned dtype that holds them."""
    top = int(values.max()) if values.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values


def _whole_or_float(counts: NDArray[np.float64]) -> NDArray[Any]:
    """Counts as the narrowest unsigned integers when that is exact, else as they are."""
    if counts.size == 0 or not (counts.min() >= 0 and counts.max() < 2**32):
        return counts
    if np.signbit(counts).any():  # -0.0 would come back as 0.0
        return counts
    whole = counts.astype(np.uint32)
    if not np.array_equal(whole, counts):
        return counts
    return _narrowest(whole)


def _unpack_counts(gaps: NDArray[Any], counts: NDArray[Any], channels: int) -> SparseCounts:
    """The inverse of :meth:`SparseCounts.__reduce__`."""
    return SparseCounts(cells=np.cumsum(gaps, dtype=np.int64),
                        counts=counts.astype(np.float64), channels=channels)


@dataclass(frozen=True)
class SparseCounts:
    """Non-zero cells of a ``(channels, *shape)`` label-by-cell histogram: a compact partial grid.

    ``cells`` are flat indices into the ``(channels, *shape)`` array (channel 0 = negatives,
    1 = positives, 2 = unrated when ``channels == 3``), strictly increasing; ``counts`` their
    weighted counts. Partials of a batch are this small (at most one entry per row) where a
    dense histogram would be ``channels * prod(shape)`` cells. ``channels`` defaults to 2, the
    rated-only layout.
    """

    cells: NDArray[np.int64]
    counts: NDArray[np.float64]
    channels: int = 2

    def add_to(self, dense: NDArray[np.float64]) -> None:
        """Add into a dense ``(channels, *shape)`` accumulator in place (cells are unique).

        A 2-channel partial may be added into a 3-channel accumulator (its cells are the first
        two channels); a 3-channel partial needs a 3-channel accumulator.
        """
        if dense.shape[0] < self.channels:
            raise ValueError(
                f"cannot add {self.channels}-channel counts into a {dense.shape[0]}-channel "
                "accumulator"
            )
        flat = dense.reshape(-1)
        flat[self.cells] += self.counts

    @property
    def nnz(self) -> int:
        """Number of stored (non-zero) cells."""
        return int(self.cells.size)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle packed (what crosses a shuffle): the increasing cells as the first cell and
        the gaps, and the counts, each in the narrowest dtype that holds them exactly (counts
        as unsigned integers when every count is a whole number below 2**32, else float64).
        Unpickling restores the same arrays exactly; a partial of 1M cells takes about 3-6
        bytes a cell instead of 16."""
        gaps = np.diff(self.cells, prepend=np.int64(0))
        return (_unpack_counts, (_narrowest(gaps), _whole_or_float(self.counts), self.channels))

    def with_channels(self, channels: int) -> SparseCounts:
        """The same counts in a layout of at least ``channels`` channels (no copy).

        Flat cell indices of channel ``c`` are ``c * size + cell`` in every layout, so widening
        a 2-channel partial to the 3-channel layout (an empty unrated channel) keeps its cells.
        """
        if channels <= self.channels:
            return self
        return SparseCounts(cells=self.cells, counts=self.counts, channels=channels)

    def to_grid(
        self,
        edges: Sequence[NDArray[np.float64]],
        *,
        names: Sequence[str] | None = None,
        weight_bits: int = DEFAULT_WEIGHT_BITS,
        audited_rows: int = 0,
    ) -> ThresholdGrid:
        shape = tuple(e.size + 1 for e in edges)
        dense = np.zeros((self.channels, *shape))
        self.add_to(dense)
        return ThresholdGrid(
            edges=tuple(edges), pos=dense[1], neg=dense[0],
            names=tuple(names) if names is not None else None, weight_bits=weight_bits,
            unrated=dense[2] if self.channels >= 3 else None, audited_rows=audited_rows,
            variance=dense[3:5] if self.channels >= 5 else None,
            design=dense[5:7] if self.channels == 7 else None,
        )


def grouped_histograms(
    group_codes: NDArray[np.intp],
    scores: NDArray[np.float64],
    labels: NDArray[np.bool_],
    weights: NDArray[np.float64] | None,
    edges: Sequence[NDArray[np.float64]],
    *,
    weight_bits: int = DEFAULT_WEIGHT_BITS,
    unrated: NDArray[np.bool_] | None = None,
    variances: NDArray[np.float64] | None = None,
    bins: Sequence[NDArray[np.intp]] | None = None,
) -> dict[int, SparseCounts]:
    """Histograms of already validated rows per group, as sparse partials.

    Exactly the counts :meth:`ThresholdGrid.from_scores` computes for each group's rows (same
    binning, same weight rounding): ``partials[g].to_grid(edges)`` equals the grid of group
    ``g``'s rows. Rows are coded once by (group, channel, cell) and sorted; each run of equal
    codes is one non-zero cell. Without ``unrated`` the partials have the 2-channel layout (as
    before); with an ``unrated`` row mask they have 3 channels, channel 2 = unrated weight.
    With ``variances`` (per row, :func:`ht_variance_weights`; rated rows with a positive value
    count) they have 5: channels 3 and 4 hold the Horvitz–Thompson variance weights of the
    rated negatives and positives (:attr:`ThresholdGrid.variance`). ``bins``: each classifier's
    bin per row (:func:`costlib.thresholds._binned_sketch.bin_and_sketch` locates them while it
    sketches the rows), else located here.
    """
    locators = [locator_for(e) for e in edges]
    shape = tuple(e.size + 1 for e in edges)
    size = int(np.prod(shape))
    channels = 5 if variances is not None else (2 if unrated is None else 3)
    n = scores.shape[0]
    keys = np.empty(n, dtype=np.int64)
    for start in range(0, n, ROW_CHUNK):
        stop = start + ROW_CHUNK
        keys[start:stop] = _channel_codes(
            scores[start:stop], labels[start:stop],
            None if unrated is None else unrated[start:stop], locators, shape,
            None if bins is None else [b[start:stop] for b in bins],
        )
    keys += np.asarray(group_codes, dtype=np.int64) * (channels * size)
    if variances is not None:
        counted = np.asarray(variances) > 0
        if unrated is not None:
            counted &= ~unrated
        extra = np.flatnonzero(counted)
        keys = np.concatenate([keys, keys[extra] + 3 * size])  # rated channel c -> 3 + c
        base = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
        weights = np.concatenate([base, np.asarray(variances, dtype=np.float64)[extra]])
        n = keys.size
    if n == 0:
        return {}
    quantized = None if weights is None else quantize_weights(weights, weight_bits)
    n_codes = (int(np.max(group_codes)) + 1) * channels * size
    if n_codes <= DENSE_CODES_PER_ROW * n and (quantized is None or (quantized > 0).all()):
        return _dense_partials(keys, quantized, n_codes, channels, size)
    if quantized is None:
        if n_codes <= np.iinfo(np.int32).max:  # int32 keys sort about twice as fast
            keys = keys.astype(np.int32)
        keys.sort()
        run_weights = None
    else:
        order = np.argsort(keys)
        keys = keys[order]
        run_weights = quantized[order]
    starts = np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1))
    unique = keys[starts].astype(np.int64, copy=False)
    if run_weights is None:
        counts = np.diff(np.append(starts, n)).astype(np.float64)
    else:
        counts = np.add.reduceat(run_weights, starts)
    return _per_group(unique, counts, channels, size)


def _per_group(codes: NDArray[np.int64], counts: NDArray[np.float64], channels: int,
               size: int) -> dict[int, SparseCounts]:
    """Ascending (group, channel, cell) codes with their counts, split into each group's
    sparse partial."""
    groups = codes // (channels * size)
    cells = codes - groups * (channels * size)
    bounds = np.concatenate(([0], np.flatnonzero(groups[1:] != groups[:-1]) + 1, [groups.size]))
    return {
        int(groups[a]): SparseCounts(cells=cells[a:b], counts=counts[a:b], channels=channels)
        for a, b in itertools.pairwise(bounds.tolist())
    }


#: :func:`grouped_histograms` counts through one dense ``bincount`` over every (group, channel,
#: cell) code when there are at most this many codes per row (else it sorts the rows' codes).
DENSE_CODES_PER_ROW = 16


def _dense_partials(keys: NDArray[np.int64], weights: NDArray[np.float64] | None, n_codes: int,
                    channels: int, size: int) -> dict[int, SparseCounts]:
    """:func:`grouped_histograms`' partials from one ``bincount`` (no sort): the same arrays.

    Only called when every weight is positive, so a code has rows exactly when its sum is
    non-zero (the sort path keeps every code that has rows). Sums of quantised weights are
    exact in any order, so they equal the sorted runs' sums bit for bit.
    """
    dense: NDArray[np.float64]
    if weights is None:
        dense = np.bincount(keys, minlength=n_codes).astype(np.float64)
    else:
        dense = np.bincount(keys, weights=weights, minlength=n_codes).astype(np.float64, copy=False)
    occupied = np.flatnonzero(dense != 0).astype(np.int64, copy=False)  # (bool mask: fast)
    return _per_group(occupied, dense[occupied], channels, size)


def sum_sparse(partials: Sequence[SparseCounts], n_cells: int) -> SparseCounts:
    """The sum of sparse partials over the same lattice (``n_cells = channels * prod(shape)``).

    Exact: counts are multiples of the weight resolution, so float64 sums do not round. All
    partials must have the same number of channels (the result keeps it).
    """
    if not partials:
        return SparseCounts(cells=np.zeros(0, dtype=np.int64), counts=np.zeros(0))
    channels = {p.channels for p in partials}
    if len(channels) != 1:
        raise ValueError(f"cannot sum sparse partials with different channels {sorted(channels)}")
    dense = np.bincount(
        np.concatenate([p.cells for p in partials]),
        weights=np.concatenate([p.counts for p in partials]),
        minlength=n_cells,
    ).astype(np.float64, copy=False)  # weighted: already float64
    cells = np.flatnonzero(dense != 0)  # a bool mask's nonzero is several times faster
    return SparseCounts(cells=cells.astype(np.int64), counts=dense[cells],
                        channels=channels.pop())


#: :func:`merge_sparse` sums through a dense scratch array when the entries' cell span is at
#: most this many cells per entry (else it sorts them).
MERGE_SCRATCH_SPAN = 16


def merge_sparse(partials: Sequence[SparseCounts]) -> SparseCounts:
    """The sum of sparse partials without a lattice-sized array: memory ``O(nnz)``.

    Equal to :func:`sum_sparse` (exact for the same reason: counts are multiples of the weight
    resolution, so float64 sums do not round and the order of addition does not matter), but
    its memory is proportional to the stored cells, not to the lattice: the entries (``nnz``
    of them, sorted cells per partial) are summed by one ``bincount`` over their span when the
    span is at most :data:`MERGE_SCRATCH_SPAN` cells per entry, else merged by a stable sort of
    the concatenated sorted runs (``O(nnz log len(partials))``). Partials may mix 2 and
    3 channels (the result has the most; see :meth:`SparseCounts.with_channels`). Cells whose
    counts sum to zero are dropped, as :func:`sum_sparse` drops them.
    """
    channels = max((p.channels for p in partials), default=2)
    partials = [p for p in partials if p.nnz]
    if not partials:
        return SparseCounts(cells=np.zeros(0, dtype=np.int64), counts=np.zeros(0),
                            channels=channels)
    if len(partials) == 1:
        only = partials[0]
        keep = only.counts != 0
        return SparseCounts(cells=only.cells[keep], counts=only.counts[keep], channels=channels)
    cells = np.concatenate([p.cells for p in partials])
    counts = np.concatenate([p.counts for p in partials])
    span = int(max(p.cells[-1] for p in partials)) + 1
    if span <= MERGE_SCRATCH_SPAN * cells.size:
        # Entries are dense in their span: one bincount into a transient scratch array of
        # ``span`` cells (at most MERGE_SCRATCH_SPAN floats per entry) beats sorting them.
        sums = np.bincount(cells, weights=counts, minlength=span).astype(np.float64, copy=False)
        occupied = np.flatnonzero(sums != 0)
        return SparseCounts(cells=occupied.astype(np.int64, copy=False),
                            counts=sums[occupied], channels=channels)
    # Each partial's cells are sorted: a stable sort (timsort) of their concatenation merges
    # sorted runs in O(nnz log len(partials)), faster than np.unique's general sort.
    order = np.argsort(cells, kind="stable")
    cells = cells[order]
    starts = np.flatnonzero(np.concatenate(([True], cells[1:] != cells[:-1])))
    sums = np.add.reduceat(counts[order], starts)
    keep = sums != 0
    return SparseCounts(cells=cells[starts[keep]].astype(np.int64, copy=False),
                        counts=sums[keep], channels=channels)


@dataclass(frozen=True)
class SparseGrid:
    """A threshold grid kept compact: the occupied cells of its histograms, and its edges.

    What the pipeline hands from aggregation to optimisation: memory proportional to the
    occupied cells (at most one per row), where a :class:`ThresholdGrid` holds three dense
    arrays of ``prod(B_j + 1)`` cells. :meth:`to_grid` makes the dense grid when it is needed
    (exactly the grid of the same rows).
    """

    edges: tuple[NDArray[np.float64], ...]
    counts: SparseCounts
    names: tuple[str, ...] | None = None
    weight_bits: int = DEFAULT_WEIGHT_BITS
    audited_rows: int = 0

    def with_edges(self, edges: Sequence[NDArray[np.float64]]) -> SparseGrid:
        """The same grid with its edges (a pipeline may carry only the lattice shape in
        ``edges`` until the edges are needed; they must give that shape)."""
        edges = tuple(np.asarray(e, dtype=np.float64) for e in edges)
        shape = tuple(int(n) for n in self.edges) if all(
            isinstance(n, (int, np.integer)) for n in self.edges) else None
        if shape is not None and shape != tuple(e.size + 1 for e in edges):
            raise ValueError(f"edges give lattice {tuple(e.size + 1 for e in edges)}, the "
                             f"counts were made on {shape}")
        return SparseGrid(edges=edges, counts=self.counts, names=self.names,
                          weight_bits=self.weight_bits, audited_rows=self.audited_rows)

    def to_grid(self) -> ThresholdGrid:
        """The dense :class:`ThresholdGrid` (unrated channel zeros when there is none)."""
        return self.counts.to_grid(self.edges, names=self.names, weight_bits=self.weight_bits,
                                   audited_rows=self.audited_rows)
