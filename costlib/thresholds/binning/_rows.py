"""Rows as they enter a threshold grid: validated, quantised, and weighted under an audit design.

What :class:`costlib.thresholds.grid._grid.ThresholdGrid`, the sparse partials
(:mod:`costlib.thresholds.grid._sparse`), the bootstrap and the pipelines check before they count a
row:

- Scores are an ``(n, k)`` array of real numbers, finite or ``-inf`` ("this classifier did not
  score the item": it never fires); NaN and ``+inf`` raise, naming the column and the first
  offending row. A pandas DataFrame of classifier columns is accepted, its missing values
  becoming ``-inf`` (:func:`as_score_array`).
- Labels are bool or 0/1; a null label marks a scored but *unrated* row (:func:`split_labels`).
  Weights are finite and non-negative.
- The combination rule is ``"any"`` (OR) or ``"all"`` (AND) (:data:`RULES`, :func:`check_rule`).

Exactness. :func:`quantize_weights` rounds a weight ``w`` to ``rint(w * 2**b) / 2**b``, the
nearest multiple of ``2**-b`` (``b = weight_bits``, default 16; ties to even), so it moves by at
most ``2**-(b + 1)`` and sums of such weights below ``2**(53 - b)`` are exact in float64.

Audit design. With inclusion probabilities ``π_i`` (:mod:`costlib.audit._weights`), rated rows
weigh ``w_i / π_i`` (Horvitz–Thompson; :func:`apply_audit`). The per-row terms of the variance
estimate of such a total are ``(1 - π_i) (w_i / π_i)**2`` (:func:`ht_variance_weights`), and the
rows an audit could have sampled (``0 < π_i < 1``) carry ``w_i² (1 - π_i) / π_i`` and ``π_i``
(times :data:`DESIGN_EXPECTED_SCALE`) into the grid's design channels (:func:`design_weights`);
all are quantised like weights.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib.audit._weights import audit_weights

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DESIGN_EXPECTED_SCALE",
    "RULES",
    "apply_audit",
    "as_score_array",
    "design_weights",
    "ht_variance_weights",
    "quantize_weights",
    "split_labels",
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
    fix = ("convert them to True for the positive class, e.g. labels == 'fraud', keeping "
           "None/NaN/<NA> for unrated rows")
    if y.dtype != np.bool_:
        if not np.issubdtype(y.dtype, np.number):
            shown = sorted({repr(v) for v in y.ravel().tolist()})[:5] if y.dtype.kind in "OUS" \
                else y.dtype
            raise ValueError(f"labels must be bool or 0/1 (null = unrated), got {shown}; {fix}")
        bad = ~np.isin(y, (0, 1))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"labels must be bool or 0/1 (null = unrated); labels[{i}] = "
                             f"{y[i].item()!r}; {fix}")
        y = y.astype(np.bool_)
    return y


def rated_labels(labels: ArrayLike, rated: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Bool labels of the rated rows (False elsewhere); rated labels must be bool or 0/1."""
    y = np.asarray(labels).ravel()
    if y.dtype == np.bool_:
        return y & rated
    out = np.zeros(y.shape[0], dtype=bool)
    kept = y[rated]
    if kept.dtype == object:
        kept = np.array(kept.tolist()) if kept.size else np.zeros(0, dtype=bool)
    out[rated] = _check_labels(kept, kept.shape[0])
    return out


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


def _imported_pandas() -> Any:
    """pandas if something imported it (only then can an argument be a pandas object), else
    None: importing costlib does not import pandas."""
    return sys.modules.get("pandas")


def is_data_frame(value: object) -> bool:
    """Whether ``value`` is a pandas DataFrame (without importing pandas)."""
    pd = _imported_pandas()
    return pd is not None and isinstance(value, pd.DataFrame)


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
    pandas = _imported_pandas()
    if pandas is not None and isinstance(scores, pandas.DataFrame):
        given: pd.DataFrame = scores
        columns = list(given.columns) if names is None else list(names)
        missing = [c for c in columns if c not in given.columns]
        if missing:
            raise ValueError(
                f"score columns {missing} not in the DataFrame (columns: {list(given.columns)})"
            )
        frame = given[columns]
        bad = [c for c in columns if not pandas.api.types.is_numeric_dtype(frame[c])
               or pandas.api.types.is_bool_dtype(frame[c])]
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
    pd = _imported_pandas()
    if pd is not None and isinstance(labels, (pd.Series, pd.Index,
                                              pd.api.extensions.ExtensionArray)):
        missing = np.asarray(pd.isna(labels), dtype=bool)
        y = np.asarray(labels, dtype=object) if missing.any() else labels.to_numpy()
    else:
        y = np.asarray(labels)
        if y.dtype == object:
            import pandas

            missing = np.asarray(pandas.isna(y), dtype=bool)
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
