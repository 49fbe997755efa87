"""Exact-style bounds on a stratified audit's count of positives, valid with few or no events.

An audit of unflagged rows finds ``x_h`` positives among the rows of stratum ``h``, each row
sampled independently with probability ``π_h``. The Horvitz–Thompson estimate of the stratum's
positives is ``x_h / π_h``; summed over strata, ``Y = sum_h x_h / π_h``. With rare positives
most strata find none, and a bootstrap of the audited rows then has no variation to show. The
bounds here do not need events.

Model
-----
Treat ``x_h`` as Poisson with mean ``π_h M_h`` (``M_h`` the stratum's positives; the binomial
``Bin(M_h, π_h)`` of a Poisson design is at most as variable, so the bounds stay conservative).
``Y = sum_h ω_h x_h`` with ``ω_h = 1 / π_h`` is then a weighted sum of independent Poisson
counts with mean ``M = sum_h M_h``. Fay & Feuer (1997) bound such a sum with gamma quantiles:
with ``v = sum_h ω_h² x_h`` and ``ω_M = max_h ω_h`` over the strata that could have been
audited,

    lower = G^{-1}(α;  Y² / v,  v / Y)                              (0 when Y = 0)
    upper = G^{-1}(1 - α;  (Y + ω_M)² / (v + ω_M²),  (v + ω_M²) / (Y + ω_M))

``G^{-1}(q; a, s)`` the gamma quantile of shape ``a`` and scale ``s``. With one stratum the
bounds are exactly Garwood's (1936) Poisson bounds scaled by ``1/π``: nothing found gives
``upper = -ln(α) / π`` (``-ln 0.05 = 2.996``: 300 positives for a 1% audit). With several
strata the interval is conservative (Fay & Feuer 1997; Tiwari, Clegg & Zou 2006 compare it
with alternatives and find it the one that keeps its level). The ``+ω_M`` term is what makes
"nothing found" honest: one more positive in the least sampled stratum is always possible.

References
----------
Garwood, F. (1936). Fiducial limits for the Poisson distribution. Biometrika 28, 437-442.
Fay, M. P. & Feuer, E. J. (1997). Confidence intervals for directly standardized rates: a
method based on the gamma distribution. Statistics in Medicine 16, 791-801.
Tiwari, R. C., Clegg, L. X. & Zou, Z. (2006). Efficient interval estimation for age-adjusted
cancer rates. Statistical Methods in Medical Research 15, 547-569.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["recall_interval", "weighted_poisson_interval"]


def _gamma_quantile(q: float, shape: NDArray[np.float64]) -> NDArray[np.float64]:
    """Quantile ``q`` of the unit-scale gamma of each ``shape`` (> 0); ``gammaincinv`` is the
    inverse of the regularised lower incomplete gamma, i.e. ``scipy.stats.gamma.ppf``."""
    from scipy.special import gammaincinv  # scipy.stats costs a second at start-up

    return np.asarray(gammaincinv(shape, q), dtype=np.float64)


def weighted_poisson_interval(
    y: ArrayLike, v: ArrayLike, max_weight: ArrayLike, alpha: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Fay–Feuer bounds ``(lower, upper)`` on the mean of a weighted sum of Poisson counts.

    Parameters
    ----------
    y : array-like
        The estimate ``Y = sum_h ω_h x_h`` (e.g. Horvitz–Thompson positives of a region).
    v : array-like
        ``sum_h ω_h² x_h`` (same shape).
    max_weight : array-like
        ``ω_M``, the largest weight one more event could carry (``1/π`` of the least sampled
        stratum of the region); 0 where the region holds no sampled row: bounds ``(y, y)``.
    alpha : float
        One-sided error of each bound, in (0, 0.5): ``lower`` is a ``1 - α`` lower bound and
        ``upper`` a ``1 - α`` upper bound (a ``1 - 2α`` two-sided interval).

    Returns
    -------
    lower, upper : ndarray
        ``lower = G^{-1}(α; Y²/v, v/Y)`` (0 when ``Y = 0``) and
        ``upper = G^{-1}(1-α; (Y+ω_M)²/(v+ω_M²), (v+ω_M²)/(Y+ω_M))`` (module docstring).
    """
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha!r}")
    yy, vv, wm = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64)
                                       for a in (y, v, max_weight)))
    if (yy < 0).any() or (vv < 0).any() or (wm < 0).any():
        raise ValueError("y, v and max_weight must be >= 0")
    lower = np.zeros(yy.shape)
    found = (yy > 0) & (vv > 0)
    if found.any():
        shape = yy[found] ** 2 / vv[found]
        lower[found] = _gamma_quantile(alpha, shape) * vv[found] / yy[found]
    lower = np.where((yy > 0) & (vv == 0), yy, lower)  # no sampled weight: known exactly
    upper = yy.copy()
    open_ = wm > 0
    if open_.any():
        y1, v1 = yy[open_] + wm[open_], vv[open_] + wm[open_] ** 2
        upper[open_] = _gamma_quantile(1.0 - alpha, y1 * y1 / v1) * v1 / y1
    return lower, np.maximum(upper, yy)


def recall_interval(
    caught: tuple[float, float, float, float],
    missed: tuple[float, float, float, float],
    level: float = 0.9,
) -> tuple[float | None, float | None]:
    """Interval of recall ``C / (C + M)`` from bounds on the caught and the missed positives.

    Parameters
    ----------
    caught, missed : tuple ``(known, y, v, max_weight)``
        Each part of the positives: ``known`` counted with certainty (rows rated with ``π = 1``)
        plus a sampled part with Fay–Feuer inputs ``y, v, max_weight``
        (:func:`weighted_poisson_interval`).
    level : float
        Two-sided level; each end errs with at most ``α = (1 - level) / 2``.

    Returns
    -------
    low, high : float or None
        ``C_L / (C_L + M_U)`` and ``C_U / (C_U + M_L)``. Recall increases in ``C`` and
        decreases in ``M`` and the two parts are disjoint sets of rows (independent samples),
        so each end needs one bound of each part; when both parts have sampled rows, each bound
        is taken at ``α / 2`` (Bonferroni), so each end still errs with at most ``α``. None when
        the denominator is 0 (no positive can exist).
    """
    alpha = (1.0 - level) / 2.0
    sampled = [part[3] > 0 for part in (caught, missed)]
    a = alpha / 2.0 if all(sampled) else alpha
    bounds = []
    for known, y, v, wm in (caught, missed):
        lo, hi = weighted_poisson_interval(y, v, wm, a)
        bounds.append((known + float(lo), known + float(hi)))
    (c_lo, c_hi), (m_lo, m_hi) = bounds
    low = c_lo / (c_lo + m_hi) if c_lo + m_hi > 0 else None
    high = c_hi / (c_hi + m_lo) if c_hi + m_lo > 0 else None
    return low, high
