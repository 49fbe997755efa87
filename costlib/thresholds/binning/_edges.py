"""Candidate thresholds ("edges") per classifier, and binning scores against them.

A classifier with edges ``e[0] < e[1] < ... < e[B-1]`` has ``B + 1`` threshold choices: ``e[t]``
for ``t < B`` and "off" (``+inf``) for ``t = B``. A score ``s`` falls in bin

.. math:: b(s) = \\#\\{i : e_i \\le s\\} \\in \\{0, \\dots, B\\},

so bin 0 is the underflow bin (scores below ``e[0]``, and ``-inf`` for "did not score"), and the
classifier fires at threshold index ``t`` exactly when ``s >= e[t]``, i.e. when ``b(s) > t``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib._messages import plain
from costlib.thresholds.binning._bin_locator import BinLocator, bin_indices
from costlib.thresholds.binning._rows import (
    apply_audit,
    as_score_array,
    split_labels,
    validate_rows,
)
from costlib.thresholds.binning._score_sketch import EdgeSketch, ScoreSketch

#: Candidate thresholds per classifier of the default recipe (:func:`decision_edges`).
DEFAULT_DECISION_EDGES = 128

__all__ = [
    "DEFAULT_DECISION_EDGES",
    "BinLocator",
    "bin_indices",
    "check_edges",
    "decision_edges",
    "decision_edges_from_sketch",
    "fine_histogram",
    "quantile_edges",
    "quantile_edges_from_histogram",
    "uniform_edges",
    "with_thresholds",
]



def uniform_edges(low: float, high: float, n_edges: int) -> NDArray[np.float64]:
    """Evenly spaced candidate thresholds ``low, ..., high`` (both included).

    Parameters
    ----------
    low, high : float
        Lowest and highest candidate threshold, ``low < high``, both finite.
    n_edges : int
        Number of candidate thresholds, at least 1 (``n_edges == 1`` gives ``[low]``).

    Returns
    -------
    ndarray of shape (n_edges,)
    """
    if not (np.isfinite(low) and np.isfinite(high)):
        raise ValueError(
            f"uniform_edges: low and high must be finite, got {plain(low)}, {plain(high)}"
        )
    if int(n_edges) != n_edges or n_edges < 1:
        raise ValueError(f"uniform_edges: n_edges must be a positive integer, got {plain(n_edges)}")
    if n_edges == 1:
        return np.array([float(low)])
    if not low < high:
        raise ValueError(
            f"uniform_edges: need low < high, got low={plain(low)}, high={plain(high)}"
        )
    return np.linspace(float(low), float(high), int(n_edges))


def quantile_edges(sample: ArrayLike, n_edges: int) -> NDArray[np.float64]:
    """Candidate thresholds at evenly spaced quantiles of a sample of scores.

    The edges are the ``i / n_edges`` quantiles, ``i = 0 .. n_edges - 1`` (the minimum is the
    first edge; the maximum is left out because "off" follows it), with duplicates removed, so
    the result may be shorter than ``n_edges`` when the sample has ties. ``-inf`` entries (items
    the classifier did not score) are ignored.

    Take the sample from *every scored row*, rated or not, and build the grid from the same rows
    (null labels go to its unrated channel): then candidates span the whole score range and
    :func:`costlib.thresholds.optimize` refuses the tuples whose flagged rows were
    not rated (``max_unrated_share``). Quantiles of rated rows alone reach below the rating floor
    wherever another classifier flagged a row, and a grid of rated rows alone cannot tell
    those candidates from well-rated ones.

    Parameters
    ----------
    sample : array-like of shape (n,)
        Scores; finite or ``-inf``. NaN raises ``ValueError``.
    n_edges : int
        Requested number of candidate thresholds.
    """
    values = np.asarray(sample, dtype=np.float64).ravel()
    if np.isnan(values).any():
        raise ValueError("quantile_edges: sample contains NaN")
    if int(n_edges) != n_edges or n_edges < 1:
        raise ValueError(
            f"quantile_edges: n_edges must be a positive integer, got {plain(n_edges)}"
        )
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise ValueError("quantile_edges: sample has no finite score")
    edges = np.quantile(values, np.arange(int(n_edges)) / int(n_edges), method="lower")
    return np.unique(edges)


def check_edges(edges: ArrayLike, name: str = "edges") -> NDArray[np.float64]:
    """Validate one axis of candidate thresholds: 1-D, non-empty, finite, strictly ascending."""
    arr = np.asarray(edges, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (the 'off' threshold +inf is implicit)")
    if arr.size > 1 and not (np.diff(arr) > 0).all():
        bad = int(np.flatnonzero(np.diff(arr) <= 0)[0])
        raise ValueError(
            f"{name} must be strictly ascending; {name}[{bad}]={arr[bad].item()!r} "
            f">= {name}[{bad + 1}]={arr[bad + 1].item()!r}"
        )
    return arr


def with_thresholds(
    edges: ArrayLike, thresholds: ArrayLike, name: str = "edges"
) -> NDArray[np.float64]:
    """Edges with further candidate thresholds added: ``sorted(set(edges) | finite thresholds)``.

    Used to put the thresholds in force on the lattice, so that "keep what is applied" is a
    candidate of the optimiser exactly (a threshold between two edges could otherwise only be
    approximated by the next edge above it, which flags fewer rows). ``+inf`` ("off") is
    dropped: it is always a choice. Scores binned against the result count the same rows above
    every old edge, so grids built on ``edges`` and on the result agree at the old thresholds.

    Parameters
    ----------
    edges : array_like of shape (B,)
        Strictly ascending finite candidate thresholds.
    thresholds : array_like
        Thresholds to add; ``+inf`` entries are ignored, NaN and ``-inf`` are refused.

    Returns
    -------
    ndarray of shape (B',), B' >= B
    """
    base = check_edges(edges, name=name)
    extra = np.asarray(thresholds, dtype=np.float64).ravel()
    if np.isnan(extra).any() or (extra == -np.inf).any():
        raise ValueError(f"{name}: thresholds to add must be finite or +inf, got "
                         f"{[float(v) for v in extra]}")
    extra = extra[np.isfinite(extra)]
    if extra.size == 0:
        return base
    return check_edges(np.union1d(base, extra), name=name)


def fine_histogram(values: ArrayLike, low: float, high: float,
                   resolution: int) -> NDArray[np.intp]:
    """Counts of values in ``resolution`` equal cells over ``[low, high]`` (int64, mergeable).

    Values below ``low`` count in the first cell and values above ``high`` in the last; ``-inf``
    ("did not score") is not counted. The sufficient statistic for
    :func:`quantile_edges_from_histogram`: it adds across shards, so quantile edges computed
    from it do not depend on how the data was split.
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    cell = np.floor((v - low) * (resolution / (high - low)))
    np.clip(cell, 0, resolution - 1, out=cell)
    return np.bincount(cell.astype(np.intp), minlength=resolution)


def quantile_edges_from_histogram(
    counts: ArrayLike, low: float, high: float, n_edges: int
) -> NDArray[np.float64]:
    """Quantile edges snapped to the boundaries of a :func:`fine_histogram`.

    Edge ``j`` (``j = 0 .. n_edges - 1``) is the highest cell boundary ``g_i = low + i * step``
    with at most a fraction ``j / n_edges`` of the counted values below it; duplicates are
    removed. With a fine enough histogram these approach :func:`quantile_edges` of the raw
    values, and they are exactly reproducible from the merged counts.
    """
    c = np.asarray(counts)
    if c.ndim != 1 or c.size == 0:
        raise ValueError("counts must be a non-empty 1-D histogram")
    total = c.sum()
    if total == 0:
        raise ValueError("the histogram is empty: no finite score to take quantiles of")
    below = np.concatenate(([0], np.cumsum(c)))
    targets = np.arange(int(n_edges)) * total / int(n_edges)
    index = np.searchsorted(below, targets, side="right") - 1
    step = (high - low) / c.size
    return np.unique(low + index * step)


def _tail_levels(n_levels: int, total: float) -> NDArray[np.float64]:
    """Quantile levels evenly spaced in ``log(1 - q)`` from the median to the top row.

    ``1 - q_i = 0.5 * (1 / (2 total)) ** (i / (n - 1))``, so ``q`` runs from 0.5 to
    ``1 - 1 / total`` (the highest row) and every decade of the tail gets the same number.
    """
    if n_levels <= 0 or total <= 2:
        return np.zeros(0)
    if n_levels == 1:
        return np.array([0.5])
    exponents = np.arange(n_levels) / (n_levels - 1)
    return 1.0 - 0.5 * (1.0 / (2.0 * total)) ** exponents


def decision_edges_from_sketch(sketch: EdgeSketch, n_edges: int = DEFAULT_DECISION_EDGES,
                               name: str = "classifier") -> NDArray[np.float64]:
    """Candidate thresholds of one classifier where decisions are made (the default recipe).

    With ``n = n_edges`` (default 128), the union of

    - ``n / 8`` evenly spaced quantiles of every scored row (the body: a threshold anywhere);
    - ``n / 4`` quantiles of every scored row at levels evenly spaced in ``log(1 - q)``, from
      the median to the highest row (:func:`_tail_levels`): the top 1%, 0.1%, 0.01%... each get
      as many candidates, so "flag the top 0.05%" is expressible whatever the prevalence;
    - ``n / 8`` evenly spaced quantiles of the rated rows (the region the ratings describe);
    - the scores of the rated positives, all of them when the remaining room holds every
      distinct one; else as many weighted quantiles of them as fill the room, three quarters
      spaced evenly over the positives in the *decision band* (from the top down to where the
      local precision of the classifier's scores falls below 5%, :func:`_decision_band`) and
      a quarter evenly over all positives.

    The positives carry the decision. Raising a threshold from a positive's score to just below
    the next positive's score (on that axis) removes no true positive and never adds a false
    one, under both rules: so with every positive's score a candidate, the lattice holds the
    exact optimum over *all* thresholds of any objective that rises with TP and falls with FP
    (linear, F-beta, precision, volume and FP caps), for fully labelled rows. With more
    positives than room, quantiles of them space the candidates by true positives, where
    those objectives change.

    The scored and rated channels are bucketed at relative width ``2**-12``
    (:mod:`costlib.thresholds.binning._score_sketch`); edges are bucket lower bounds, so edge values
    are scores (or bucket bounds just below them) and the result depends only on the merged sketch.

    Parameters
    ----------
    sketch : EdgeSketch
        The classifier's merged sketch.
    n_edges : int, default 128
        Most candidate thresholds returned (at least 4).
    name : str
        The classifier, for messages.

    Returns
    -------
    ndarray of shape (B,), 1 <= B <= n_edges
        Strictly ascending finite thresholds.

    Raises
    ------
    ValueError
        ``n_edges`` below 4, or no row has a finite score of this classifier.
    """
    if int(n_edges) != n_edges or n_edges < 4:
        raise ValueError(f"decision edges: n_edges must be an integer >= 4, got {plain(n_edges)}")
    n_edges = int(n_edges)
    scored, rated, positives = sketch.scored, sketch.rated, sketch.positives
    if scored.size == 0:
        raise ValueError(f"decision edges: no row has a finite score of {name!r}: there is "
                         "nothing to place its candidate thresholds on")
    n_body, n_rated = max(1, n_edges // 16), max(1, n_edges // 16)
    base = np.union1d(scored.quantiles(np.arange(n_body) / n_body),
                      scored.quantiles(_tail_levels(3 * n_edges // 16, scored.total)))
    if rated.size:
        base = np.union1d(base, rated.quantiles(np.arange(n_rated) / n_rated))
    if positives.size == 0 or base.size >= n_edges:
        return check_edges(base[:n_edges] if base.size > n_edges else base, name=name)
    room = n_edges - base.size
    every = positives.lower_bounds()
    if np.union1d(base, every).size <= n_edges:
        return check_edges(np.union1d(base, every), name=name)
    # More distinct positives than room: the most quantile levels whose union still fits.
    band = _decision_band(sketch)
    best = np.union1d(base, _positive_quantiles(positives, room, band))
    levels = room
    while best.size < n_edges and levels < 16 * n_edges:
        levels += n_edges - best.size
        trial = np.union1d(base, _positive_quantiles(positives, levels, band))
        if trial.size > n_edges:
            break
        best = trial
    return check_edges(best, name=name)


#: Local precision below which the positives of one classifier are outside the decision band.
DECISION_BAND_PRECISION = 0.05


def _decision_band(sketch: EdgeSketch) -> float:
    """Weight of the top positives of one classifier within the *decision band*.

    Walking down the classifier's scores from the top, the local precision of a slab holding
    ``max(5, 5%)`` of the positives' weight is the slab's positives over its rated rows (rated
    and positive sketches, at the rated sketch's level). The band ends where that precision
    falls below :data:`DECISION_BAND_PRECISION` for good: no operating point with a target
    precision of 5% or more flags positives below it on this classifier alone. Returns the
    positives' weight above the end (all of it when precision never falls that low).
    """
    positives, rated = sketch.positives, sketch.rated
    total = positives.total
    if rated.size == 0 or total <= 0:
        return total
    level = max(positives.level, rated.level)
    pos, rat = positives.at_level(level), rated.at_level(level)
    where = np.searchsorted(rat.keys, pos.keys)
    pos_in = np.zeros(rat.size)
    found = (where < rat.size) & (rat.keys[np.minimum(where, rat.size - 1)] == pos.keys)
    np.add.at(pos_in, where[found], pos.weights[found])
    from_top_pos = np.cumsum(pos_in[::-1])  # positives at or above each bucket, from the top
    from_top_rated = np.cumsum(rat.weights[::-1])
    window = max(5.0 * float(pos.weights.min()) if pos.size else 5.0, 0.05 * total)
    starts = from_top_pos - window
    lo = np.searchsorted(from_top_pos, starts, side="right")  # first bucket of each slab
    slab_pos = from_top_pos - np.where(lo > 0, from_top_pos[np.maximum(lo - 1, 0)], 0.0)
    slab_rated = from_top_rated - np.where(lo > 0, from_top_rated[np.maximum(lo - 1, 0)], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(slab_rated > 0, slab_pos / slab_rated, 1.0)
    full = from_top_pos >= window  # slabs that hold a whole window
    above = full & (precision >= DECISION_BAND_PRECISION)
    if not above.any():
        return total
    return float(min(total, from_top_pos[np.flatnonzero(above)[-1]]))


def _positive_quantiles(positives: ScoreSketch, n_levels: int,
                        band: float) -> NDArray[np.float64]:
    """Three quarters of the levels spaced evenly over the positives' weight in the decision
    band (the top ``band`` of it, :func:`_decision_band`), a quarter evenly over all
    positives (operating points of rare-event classifiers sit at the top of the positives)."""
    total = positives.total
    in_band = n_levels - n_levels // 4
    low = max(0.0, 1.0 - band / total) if total > 0 else 0.0
    band_levels = low + (1.0 - low) * np.arange(in_band) / in_band
    rest = n_levels // 4
    return np.union1d(positives.quantiles(band_levels),
                      positives.quantiles(np.arange(rest) / max(rest, 1)))


def decision_edges(
    scores: ArrayLike,
    labels: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    *,
    n_edges: int = DEFAULT_DECISION_EDGES,
    audit_probabilities: ArrayLike | None = None,
    thresholds_in_force: ArrayLike | None = None,
    names: Sequence[str] | None = None,
    weight_bits: int = 16,
) -> list[NDArray[np.float64]]:
    """The default candidate thresholds per classifier for a grid of these rows.

    Builds each classifier's :class:`~costlib.thresholds.EdgeSketch` from the rows as
    :meth:`costlib.thresholds.ThresholdGrid.from_scores` would enter them (null labels
    unrated; with ``audit_probabilities`` Horvitz–Thompson weights and represented rows left out),
    then places ``n_edges`` candidates with :func:`decision_edges_from_sketch`, and adds the
    thresholds in force (:func:`with_thresholds`, beyond ``n_edges``). ``costlib recalibrate``
    merges the same sketches across batches, so a config with ``grid.edges: auto`` gives the
    same edges on the same rows.

    Parameters
    ----------
    scores : array-like of shape (n, k) or (n,), or a DataFrame
        As :meth:`~costlib.thresholds.ThresholdGrid.from_scores` takes them.
    labels : array-like of shape (n,), optional
        True/False, null for unrated rows; default: every row unrated (candidates from the
        score distribution alone).
    weights, audit_probabilities, names, weight_bits
        As :meth:`~costlib.thresholds.ThresholdGrid.from_scores`.
    n_edges : int, default 128
        Candidate thresholds per classifier before the thresholds in force.
    thresholds_in_force : array-like of shape (k,) or (m, k), optional
        Thresholds applied now (``+inf`` = off): added so "keep what is applied" is a candidate.

    Returns
    -------
    list of k ndarrays
    """

    raw_scores, names = as_score_array(scores, names)
    score_array = np.asarray(raw_scores, dtype=np.float64)
    n = score_array.shape[0]
    if labels is None:
        labels = np.full(n, None, dtype=object)
    y, unrated = split_labels(labels, n)
    s, y, w, unrated, _, _ = apply_audit(*validate_rows(score_array, y, weights, names=names),
                                         unrated, audit_probabilities)
    k = s.shape[1]
    label_names = list(names) if names is not None else [f"scores[:, {j}]" for j in range(k)]
    in_force = None
    if thresholds_in_force is not None:
        in_force = np.asarray(thresholds_in_force, dtype=np.float64).reshape(-1, k)
    out = []
    for j in range(k):
        sketch = EdgeSketch.from_rows(s[:, j], y, w, unrated, weight_bits=weight_bits)
        edges = decision_edges_from_sketch(sketch, n_edges, name=label_names[j])
        if in_force is not None:
            edges = with_thresholds(edges, in_force[:, j], name=label_names[j])
        out.append(edges)
    return out
