"""Poisson-bootstrap confidence intervals for operating points, independent of sharding.

Each rated row gets, for replicate ``r = 0 .. R-1``, a weight multiplier ``c_r ~ Poisson(1)``
drawn from a hash of ``(item id, r, seed)`` rather than from a random stream. The replicate
histograms are then as mergeable as the grid itself: however the rows are split across files,
bundles or workers, every row draws the same ``c_r``, so the merged replicate grids equal the
replicate grids of the whole (the Poisson bootstrap approximates the multinomial bootstrap for
large n; Hanley & MacGibbon 2006, Chamandy et al. 2012).

Per replicate the operating point is re-optimised; intervals are percentile intervals taken
from order statistics (so thresholds that are "off" = +inf in some replicates stay meaningful).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib._messages import plain
from costlib.arrays import sorted_distinct
from costlib.bounds import BOUNDS
from costlib.thresholds.binning._bin_locator import locator_for
from costlib.thresholds.binning._cells import ROW_CHUNK, _channel_codes
from costlib.thresholds.binning._rows import (
    DEFAULT_WEIGHT_BITS,
    apply_audit,
    as_score_array,
    quantize_weights,
    split_labels,
    validate_rows,
)
from costlib.thresholds.grid._grid import ThresholdGrid, check_mergeable
from costlib.thresholds.point._operating_point import OperatingPoint, point_at
from costlib.thresholds.point._optimize import optimize_each

__all__ = [
    "BootstrapGrids",
    "BootstrapResult",
    "SparseBootstrapGrids",
    "as_dense",
    "confidence_intervals",
    "poisson_counts",
]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# Inverse CDF of Poisson(1) on 53-bit uniforms; mass beyond 20 is < 1e-19. ``pdtr(k, 1)`` is
# the Poisson(1) CDF at k (what ``scipy.stats.poisson.cdf`` evaluates), without importing
# scipy.stats, which costs about a second at start-up.
@functools.cache
def _poisson1_cdf() -> NDArray[np.float64]:
    """``pdtr(0..20, 1)``, computed on first use (importing scipy.special costs every pipeline
    start ~0.2 s)."""
    from scipy.special import pdtr

    return pdtr(np.arange(21), 1.0)


def _mix64(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64 finaliser: a bijective avalanche mix of 64-bit words."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def hash_item_ids(item_ids: ArrayLike) -> NDArray[np.uint64]:
    """Stable 64-bit hash of item ids (ints or strings), the same on every machine and run."""
    ids = np.asarray(item_ids)
    if ids.ndim != 1:
        raise ValueError(f"item_ids must be 1-D, got shape {ids.shape}")
    if ids.dtype.kind in "iu":
        return _mix64(ids.astype(np.uint64))
    if ids.dtype.kind in "USO":
        import pandas as pd  # only for string ids: importing costlib does not import pandas

        return pd.util.hash_array(ids.astype(object), categorize=False)
    raise ValueError(f"item_ids must be integers or strings, got dtype {ids.dtype}")


def poisson_counts(
    hashed_ids: NDArray[np.uint64], replicate: int, seed: int = 0
) -> NDArray[np.intp]:
    """Poisson(1) multiplier of every row for one replicate, from its hashed item id."""
    with np.errstate(over="ignore"):
        key = np.uint64(seed) * _GOLDEN + np.uint64(replicate + 1) * np.uint64(0xD1B54A32D192ED03)
        bits = _mix64(hashed_ids ^ key)
    uniform = (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 2.0**53)
    return np.searchsorted(_poisson1_cdf(), uniform, side="right")


def _check_same_replicates(a: Any, b: Any) -> None:
    """Raise ValueError unless replicate grids ``a`` and ``b`` (dense or sparse) merge: same
    seed and replicate count (so every row drew the same multipliers), same lattice."""
    if a.seed != b.seed or a.n_replicates != b.n_replicates:
        raise ValueError("cannot merge bootstrap grids with different seeds or replicates")
    check_mergeable(a, b, "bootstrap grids")


@dataclass(frozen=True, eq=False)
class BootstrapGrids:
    """R replicate threshold grids (histograms of shape ``(R, *lattice)``); mergeable with ``+``.

    ``unrated`` holds the replicate weights of unrated rows (null labels), zeros by default.
    ``audited_rows`` counts the rated audit rows (as :attr:`ThresholdGrid.audited_rows`).

    With audit data each rated row's Horvitz–Thompson weight ``w / π`` is multiplied by its
    Poisson(1) draw, so every replicate cell is ``sum_i c_i (w_i / π_i) I_i [cell]`` with
    variance ``sum_i w_i² / π_i [cell]`` given the population (estimated by the replicates):
    the sampling variance ``sum_i w_i² (1 - π_i) / π_i`` of the Horvitz–Thompson estimate plus
    the population's own Poisson variation. The fewer audit rows (smaller ``π``), the wider the
    intervals of the cells below the flagged region.
    """

    edges: tuple[NDArray[np.float64], ...]
    pos: NDArray[np.float64]
    neg: NDArray[np.float64]
    seed: int = 0
    names: tuple[str, ...] | None = None
    weight_bits: int = DEFAULT_WEIGHT_BITS
    unrated: NDArray[np.float64] | None = None
    audited_rows: int = 0

    def __post_init__(self) -> None:
        if self.unrated is None:
            object.__setattr__(self, "unrated", np.zeros_like(self.pos))

    @property
    def n_replicates(self) -> int:
        return self.pos.shape[0]

    @classmethod
    def from_scores(
        cls,
        scores: ArrayLike,
        labels: ArrayLike,
        edges: Sequence[ArrayLike],
        item_ids: ArrayLike,
        weights: ArrayLike | None = None,
        *,
        n_replicates: int = 50,
        seed: int = 0,
        names: Sequence[str] | None = None,
        weight_bits: int = DEFAULT_WEIGHT_BITS,
        audit_probabilities: ArrayLike | None = None,
    ) -> BootstrapGrids:
        """Replicate grids of rated rows (see :meth:`ThresholdGrid.from_scores` for the rows).

        Parameters
        ----------
        item_ids : array-like of shape (n,)
            Stable item identifiers (int or str); they seed each row's Poisson multipliers.
        n_replicates : int, default 50
        seed : int, default 0
            Changes every multiplier; grids with different seeds do not merge.
        audit_probabilities : array-like of shape (n,), optional
            Inclusion probabilities ``π`` (see :meth:`ThresholdGrid.from_scores`).
        """
        return SparseBootstrapGrids.from_scores(
            scores, labels, edges, item_ids, weights, n_replicates=n_replicates, seed=seed,
            names=names, weight_bits=weight_bits, audit_probabilities=audit_probabilities,
        ).to_dense()

    def __add__(self, other: BootstrapGrids) -> BootstrapGrids:
        if not isinstance(other, BootstrapGrids):
            raise TypeError(f"cannot combine BootstrapGrids with {type(other).__name__}")
        _check_same_replicates(self, other)
        assert self.unrated is not None and other.unrated is not None  # set in __post_init__
        return BootstrapGrids(
            edges=self.edges,
            pos=self.pos + other.pos,
            neg=self.neg + other.neg,
            seed=self.seed,
            names=self.names if self.names is not None else other.names,
            weight_bits=self.weight_bits,
            unrated=self.unrated + other.unrated,
            audited_rows=self.audited_rows + other.audited_rows,
        )

    def replicate(self, r: int) -> ThresholdGrid:
        """The r-th replicate as a :class:`ThresholdGrid`."""
        assert self.unrated is not None  # set in __post_init__
        return ThresholdGrid(
            edges=self.edges,
            pos=self.pos[r],
            neg=self.neg[r],
            names=self.names,
            weight_bits=self.weight_bits,
            unrated=self.unrated[r],
            audited_rows=self.audited_rows,
        )


@dataclass(frozen=True, eq=False)
class SparseBootstrapGrids:
    """R replicate grids stored by occupied cell: the mergeable partial of :class:`BootstrapGrids`.

    ``cells`` are flat indices into the ``(channels, *shape)`` array (channel 0 = negatives,
    1 = positives, 2 = unrated when ``channels == 3``), strictly increasing; ``weights[r, j]``
    is replicate ``r``'s weighted count of cell ``cells[j]``. Every replicate of a row falls in
    the same cell (only its Poisson multiplier changes), so one cell list serves all ``R``
    replicates and the memory is ``R × occupied cells`` instead of ``R × channels ×
    prod(shape)``: for a group of 15 rows on a 101² lattice with 50 replicates, 6 KB instead of
    12 MB. Merging (:meth:`sum`, ``+``) is exact and order-free like the dense form; cell
    values equal :class:`BootstrapGrids` bit for bit (:meth:`to_dense`).
    """

    edges: tuple[NDArray[np.float64], ...]
    shape: tuple[int, ...]
    cells: NDArray[np.int64]
    weights: NDArray[np.float64]
    channels: int = 2
    seed: int = 0
    names: tuple[str, ...] | None = None
    weight_bits: int = DEFAULT_WEIGHT_BITS
    audited_rows: int = 0

    @property
    def n_replicates(self) -> int:
        return int(self.weights.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes held by the cell list and the replicate weights."""
        return int(self.cells.nbytes + self.weights.nbytes)

    @classmethod
    def from_scores(
        cls,
        scores: ArrayLike,
        labels: ArrayLike,
        edges: Sequence[ArrayLike],
        item_ids: ArrayLike,
        weights: ArrayLike | None = None,
        *,
        n_replicates: int = 50,
        seed: int = 0,
        names: Sequence[str] | None = None,
        weight_bits: int = DEFAULT_WEIGHT_BITS,
        audit_probabilities: ArrayLike | None = None,
    ) -> SparseBootstrapGrids:
        """Replicate grids of rows, by occupied cell (arguments as
        :meth:`BootstrapGrids.from_scores`).

        Per chunk of rows, the occupied cells ``u`` and every row's index into them are found
        once (``np.unique``); replicate ``r``'s counts are then ``bincount(index, c_r · w)``
        over ``len(u)`` cells, with ``c_r`` the rows' Poisson(1) multipliers.
        """
        if int(n_replicates) != n_replicates or n_replicates < 1:
            raise ValueError(f"n_replicates must be a positive integer, got {plain(n_replicates)}")
        scores, names = as_score_array(scores, names)
        y, unrated = split_labels(labels, np.shape(scores)[0] if np.ndim(scores) else 0)
        s, y, w = validate_rows(scores, y, weights, names=names)
        hashed = hash_item_ids(item_ids)
        if hashed.shape[0] != s.shape[0]:
            raise ValueError(f"item_ids has {hashed.shape[0]} entries for {s.shape[0]} rows")
        s, y, w, unrated, audited, keep = apply_audit(s, y, w, unrated, audit_probabilities)
        if keep is not None:
            hashed = hashed[keep]
        edge_arrays = ThresholdGrid._check_edge_list(edges, s.shape[1])
        empty = ThresholdGrid.empty(edge_arrays, names=names, weight_bits=weight_bits)
        locators = [locator_for(e) for e in empty.edges]
        wq = None if w is None else quantize_weights(w, weight_bits)
        channels = 2 if unrated is None else 3
        parts = []
        for start in range(0, s.shape[0], ROW_CHUNK):
            stop = start + ROW_CHUNK
            code = _channel_codes(s[start:stop], y[start:stop],
                                  None if unrated is None else unrated[start:stop],
                                  locators, empty.shape)
            cells, index = np.unique(code, return_inverse=True)
            counts = np.empty((n_replicates, cells.size))
            base = None if wq is None else wq[start:stop]
            for r in range(n_replicates):
                mult = poisson_counts(hashed[start:stop], r, seed).astype(np.float64)
                if base is not None:
                    mult *= base
                counts[r] = np.bincount(index, weights=mult, minlength=cells.size)
            parts.append(cls(edges=empty.edges, shape=empty.shape,
                             cells=cells.astype(np.int64), weights=counts, channels=channels,
                             seed=seed, names=empty.names, weight_bits=weight_bits))
        if not parts:  # no rows: an empty partial
            parts.append(cls(edges=empty.edges, shape=empty.shape,
                             cells=np.empty(0, np.int64), weights=np.empty((n_replicates, 0)),
                             channels=channels, seed=seed, names=empty.names,
                             weight_bits=weight_bits))
        merged = cls.sum(parts)
        object.__setattr__(merged, "audited_rows", audited)
        return merged

    @classmethod
    def sum(cls, parts: Sequence[SparseBootstrapGrids]) -> SparseBootstrapGrids:
        """Merge partials: replicate counts of the union of their rows (exact, order-free).

        The merged cells are the sorted union ``U`` of the parts' cells; part ``i`` adds its
        weights at ``searchsorted(U, cells_i)``.
        """
        if not parts:
            raise ValueError("nothing to sum: no bootstrap partials")
        first = parts[0]
        for part in parts[1:]:
            if not isinstance(part, SparseBootstrapGrids):
                raise TypeError(
                    f"cannot combine SparseBootstrapGrids with {type(part).__name__}")
            _check_same_replicates(first, part)
        if len(parts) == 1:
            return first
        cells = sorted_distinct(np.concatenate([part.cells for part in parts]))
        weights = np.zeros((first.n_replicates, cells.size))
        for part in parts:
            weights[:, np.searchsorted(cells, part.cells)] += part.weights
        names = next((part.names for part in parts if part.names is not None), None)
        return cls(edges=first.edges, shape=first.shape, cells=cells, weights=weights,
                   channels=max(part.channels for part in parts), seed=first.seed,
                   names=names, weight_bits=first.weight_bits,
                   audited_rows=sum(part.audited_rows for part in parts))

    def __add__(self, other: SparseBootstrapGrids) -> SparseBootstrapGrids:
        return SparseBootstrapGrids.sum([self, other])

    def to_dense(self) -> BootstrapGrids:
        """The same replicate grids as a dense :class:`BootstrapGrids` (``R × channels ×
        prod(shape)`` floats: make one group's at a time)."""
        size = int(np.prod(self.shape))
        total = np.zeros((self.n_replicates, self.channels * size))
        total[:, self.cells] = self.weights
        total = total.reshape((self.n_replicates, self.channels, *self.shape))
        return BootstrapGrids(
            edges=self.edges,
            pos=total[:, 1].copy(),
            neg=total[:, 0].copy(),
            seed=self.seed,
            names=self.names,
            weight_bits=self.weight_bits,
            unrated=None if self.channels == 2 else total[:, 2].copy(),
            audited_rows=self.audited_rows,
        )


def as_dense(grids: BootstrapGrids | SparseBootstrapGrids) -> BootstrapGrids:
    """``grids`` as a dense :class:`BootstrapGrids` (unchanged if it is one already)."""
    return grids.to_dense() if isinstance(grids, SparseBootstrapGrids) else grids


@dataclass(frozen=True)
class BootstrapResult:
    """Percentile intervals of an operating point over bootstrap replicates.

    ``thresholds`` has shape (2, k) (lower row, upper row); ``tp``, ``fp``, ``precision`` are
    ``(lower, upper)`` pairs; ``replicate_*`` hold the per-replicate values.
    ``estimated_total_positives`` and ``estimated_recall`` are the intervals of ``P̂`` and of
    the replicate points' ``TP / P̂`` when the grids hold audit rows, else None.
    """

    level: float
    thresholds: NDArray[np.float64]
    tp: tuple[float, float]
    fp: tuple[float, float]
    precision: tuple[float, float]
    replicate_thresholds: NDArray[np.float64]
    replicate_tp: NDArray[np.float64]
    replicate_fp: NDArray[np.float64]
    replicate_precision: NDArray[np.float64]
    points: list[OperatingPoint] = field(repr=False, default_factory=list)
    estimated_total_positives: tuple[float, float] | None = None
    estimated_recall: tuple[float, float] | None = None


def _order_statistic_interval(values: NDArray[np.float64], level: float) -> tuple[float, float]:
    finite_or_inf = values[~np.isnan(values)]
    if finite_or_inf.size == 0:
        return float("nan"), float("nan")
    ordered = np.sort(finite_or_inf)
    alpha = 1.0 - level
    lo = int(np.floor(alpha / 2 * (ordered.size - 1)))
    hi = int(np.ceil((1 - alpha / 2) * (ordered.size - 1)))
    return float(ordered[lo]), float(ordered[hi])


def confidence_intervals(
    grids: BootstrapGrids, *, level: float = 0.9, **optimize_kwargs: Any
) -> BootstrapResult:
    """Re-optimise every replicate and take percentile intervals.

    Parameters
    ----------
    grids : BootstrapGrids
    level : float, default 0.9
        Coverage of the two-sided interval.
    **optimize_kwargs
        Passed to :func:`costlib.thresholds.optimize` (target, rule, method, ...).
    """
    BOUNDS["bootstrap.level"].check("level", level)
    points = list(optimize_each((grids.replicate(r) for r in range(grids.n_replicates)),
                                **optimize_kwargs))
    thresholds = np.array([p.thresholds for p in points], dtype=np.float64)
    tp = np.array([p.tp for p in points])
    fp = np.array([p.fp for p in points])
    precision = np.array([p.precision for p in points])
    k = grids.pos.ndim - 1
    estimated = {}
    if grids.audited_rows > 0:
        totals = np.array([p.estimated_total_positives for p in points], dtype=np.float64)
        recalls = np.array([p.estimated_recall for p in points], dtype=np.float64)
        estimated = {"estimated_total_positives": _order_statistic_interval(totals, level),
                     "estimated_recall": _order_statistic_interval(recalls, level)}
    per_axis = [_order_statistic_interval(thresholds[:, j], level) for j in range(k)]
    return BootstrapResult(
        level=level,
        thresholds=np.array(per_axis).T,
        tp=_order_statistic_interval(tp, level),
        fp=_order_statistic_interval(fp, level),
        precision=_order_statistic_interval(precision, level),
        replicate_thresholds=thresholds,
        replicate_tp=tp,
        replicate_fp=fp,
        replicate_precision=precision,
        points=points,
        **estimated,
    )


def intervals_at(result: BootstrapResult, grids: BootstrapGrids, thresholds: Sequence[float],
                 **point_kwargs: Any) -> BootstrapResult:
    """``result`` with the intervals of TP, FP, precision, ``P̂`` and estimated recall taken at
    the fixed ``thresholds`` on every replicate (:func:`costlib.thresholds.point_at`) instead of
    at each replicate's re-optimised point; the threshold intervals stay ``result``'s.

    For a published point that is not the method's own (the thresholds in force kept, or a
    move part way, by the evidence rule): its counts and recall are those of ``thresholds``,
    so their intervals must be too, or an interval could exclude its own point estimate.
    ``point_kwargs`` are :func:`~costlib.thresholds.point_at`'s (target, rule, method, ...).
    """
    level = result.level
    points = [point_at(grids.replicate(r), thresholds, **point_kwargs)
              for r in range(grids.n_replicates)]
    tp = np.array([p.tp for p in points])
    fp = np.array([p.fp for p in points])
    precision = np.array([p.precision for p in points])
    total_ci, recall_ci = result.estimated_total_positives, result.estimated_recall
    if recall_ci is not None:
        totals = np.array([p.estimated_total_positives for p in points], dtype=np.float64)
        recalls = np.array([p.estimated_recall for p in points], dtype=np.float64)
        total_ci = _order_statistic_interval(totals, level)
        recall_ci = _order_statistic_interval(recalls, level)
    return replace(result, tp=_order_statistic_interval(tp, level),
                   fp=_order_statistic_interval(fp, level),
                   precision=_order_statistic_interval(precision, level), replicate_tp=tp,
                   replicate_fp=fp, replicate_precision=precision, points=points,
                   estimated_total_positives=total_ci, estimated_recall=recall_ci)
