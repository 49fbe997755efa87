"""The paper's analytic method: a parametric path through normalised threshold space.

Robles et al. (2020), Algorithm 2 with its steps 1-8, as implemented here:

1. *Normalise thresholds.* Axis ``j`` has ``n_j`` lattice positions (the edges, then "off"); index
   ``i`` maps to ``u = i / (n_j - 1)`` in [0, 1], so 0 is the lowest edge and 1 is "off".
2. *Interpolate TP and FP surfaces* over the normalised grid (piecewise multilinear,
   :class:`scipy.interpolate.RegularGridInterpolator`).
3. *Path family* ``phi_p(x) = (x, x^{p_2}, ..., x^{p_k})`` for ``x`` in [0, 1], sampled at
   ``granularity`` evenly spaced points. It runs from the all-lowest corner to the all-off corner
   and is monotone in every coordinate. For ``k = 2`` this is the paper's ``x -> (x, x^p)``.
4. *Energy* ``E(p)`` = trapezoid area under the PN curve ``(FP^, TP^) o phi_p``.
5. *Minimise* ``-log(log(E))`` with Nelder-Mead over ``q = log p`` (so that ``p > 0``), from
   ``p = 1`` (the diagonal).
6. The fitted PN curve ``C(x) = (FP^(phi(x)), TP^(phi(x)))``.
7-8. *Operating point:* the ``x`` where the curve's slope ``dTP/dFP`` equals the target slope
   ``r``, found with Ridders' method; then the thresholds ``phi(x)``.

Where the paper is ambiguous, and what is chosen here:

- *Normalisation* (step 1) is by lattice position, not by threshold value, because "off" (+inf)
  has no finite value; for evenly spaced edges the two agree except for the "off" position.
- *Energy below e.* ``-log(log E)`` is undefined for ``E <= 1`` and its argument changes sign at
  ``E = e``. For ``E <= e`` the objective continues as ``1 - E / e``, which is continuous at
  ``e`` and decreasing in ``E`` like the paper's, so the optimum is the same.
- *The slope condition* ``dTP/dFP = r`` is solved as ``g(x) = dTP/dx - r dFP/dx = 0`` (the same
  points wherever ``dFP/dx != 0``, without dividing by zero on flat stretches). Brackets are
  the sign changes of ``g`` from + to - on the sampled curve (maxima of ``TP - r FP``); when
  several exist, the root with the largest ``TP - r FP`` is taken. A root is only a local
  maximum, so it is kept only if no sample of the curve, the two ends included (all thresholds
  lowest; all classifiers off, worth 0), is better; otherwise, and when no root exists, the
  argmax of ``TP - r FP`` over the sampled curve is used (the paper's "closest marginal
  precision" fallback, made precise). Without this guard the method can return a point worse
  than flagging nothing.
- *From curve to thresholds:* the continuous point ``phi(x*)`` is snapped to the nearest lattice
  position on every axis, so the reported thresholds are ones a classifier can use and TP/FP
  are the exact empirical counts there; the fitted values are kept in ``details``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib._messages import plain

__all__ = ["AnalyticFit", "fit_analytic_path"]


@dataclass(frozen=True)
class AnalyticFit:
    """Result of the analytic method (before the lattice-level bookkeeping)."""

    exponents: NDArray[np.float64]  # p_1 = 1, p_2..p_k fitted
    energy: float  # trapezoid AUC of the fitted curve
    x_star: float  # curve parameter of the operating point
    root_found: bool  # False: fell back to argmax over the sampled curve
    cell: tuple[int, ...]  # lattice index of the snapped operating point
    fitted_tp: float  # TP^ and FP^ at phi(x_star)
    fitted_fp: float
    samples_x: NDArray[np.float64]
    samples_tp: NDArray[np.float64]  # the fitted PN curve, sampled
    samples_fp: NDArray[np.float64]
    path_cells: NDArray[np.intp]  # snapped lattice path (m, k), consecutive duplicates removed
    optimizer_iterations: int


def _objective_from_energy(energy: float) -> float:
    if energy > math.e:
        return -math.log(math.log(energy))
    return 1.0 - energy / math.e


def fit_analytic_path(
    tp: NDArray[np.float64],
    fp: NDArray[np.float64],
    slope: float,
    *,
    granularity: int = 512,
) -> AnalyticFit:
    """Run the analytic method on TP/FP lattices (see the module docstring).

    Parameters
    ----------
    tp, fp : ndarray of shape (n_1, ..., n_k)
        Counts at every threshold tuple.
    slope : float
        Target slope ``r = dTP/dFP`` (> 0).
    granularity : int, default 512
        Number of samples of the path (the paper's "granularity").
    """
    if granularity < 3:
        raise ValueError(f"granularity must be >= 3, got {plain(granularity)}")
    # scipy on first use: importing it costs every pipeline start that runs no analytic fit
    from scipy.interpolate import RegularGridInterpolator
    from scipy.optimize import minimize, ridder

    shape = tp.shape
    k = tp.ndim
    axes = tuple(np.linspace(0.0, 1.0, n) for n in shape)
    tp_hat = RegularGridInterpolator(axes, tp, method="linear")
    fp_hat = RegularGridInterpolator(axes, fp, method="linear")
    x = np.linspace(0.0, 1.0, granularity)

    def phi(xs: NDArray[np.float64], exponents: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.clip(np.power.outer(xs, exponents), 0.0, 1.0)

    def curve(exponents: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        pts = phi(x, exponents)
        return tp_hat(pts), fp_hat(pts)

    def energy(exponents: NDArray[np.float64]) -> float:
        t, f = curve(exponents)
        return float(np.sum(0.5 * (f[:-1] - f[1:]) * (t[:-1] + t[1:])))

    def full_exponents(q: ArrayLike) -> NDArray[np.float64]:
        return np.concatenate(([1.0], np.exp(np.asarray(q, dtype=np.float64))))

    iterations = 0
    if k == 1:
        exponents = np.ones(1)
    else:
        result = minimize(
            lambda q: _objective_from_energy(energy(full_exponents(q))),
            x0=np.zeros(k - 1),
            method="Nelder-Mead",
            options={"xatol": 1e-4, "fatol": 1e-12, "maxiter": 200 * k},
        )
        exponents = full_exponents(result.x)
        iterations = int(result.nit)

    samples_tp, samples_fp = curve(exponents)
    objective = samples_tp - slope * samples_fp

    def h(xv: float) -> float:
        pt = phi(np.array([xv]), exponents)
        return float(tp_hat(pt)[0] - slope * fp_hat(pt)[0])

    step = 0.5 / (granularity - 1)

    def g(xv: float) -> float:
        lo, hi = max(xv - step, 0.0), min(xv + step, 1.0)
        return (h(hi) - h(lo)) / (hi - lo)

    # Sign changes of the sampled derivative from + to - (skipping flat stretches) bracket the
    # local maxima of h.
    deriv = np.diff(objective)
    moving = np.flatnonzero(deriv != 0)
    turns = np.flatnonzero((deriv[moving[:-1]] > 0) & (deriv[moving[1:]] < 0))
    best_x, best_h, root_found = None, -np.inf, False
    for t in turns:
        lo, hi = x[moving[t]], x[moving[t + 1] + 1]
        if g(lo) > 0 > g(hi):
            root, is_root = ridder(g, lo, hi, xtol=1e-10), True
        else:  # the derivative estimate does not bracket: take the sampled maximum
            inside = slice(moving[t], moving[t + 1] + 2)
            root, is_root = x[inside][int(np.argmax(objective[inside]))], False
        value = h(root)
        if value > best_h:
            best_x, best_h, root_found = root, value, is_root
    # A turning point is only a local maximum: the curve's ends (all lowest, all off) or another
    # sample may be better. The sampled global maximum is always a candidate.
    sampled = int(np.argmax(objective))
    if best_x is None or objective[sampled] > best_h:
        best_x, root_found = float(x[sampled]), False
    best_x = float(best_x)

    point = phi(np.array([best_x]), exponents)
    fitted_tp = float(tp_hat(point)[0])
    fitted_fp = float(fp_hat(point)[0])
    scale = np.array([n - 1 for n in shape], dtype=np.float64)
    cell = tuple(int(i) for i in np.rint(point[0] * scale))

    xs = np.sort(np.append(x, best_x))
    cells = np.rint(phi(xs, exponents) * scale).astype(np.intp)
    keep = np.ones(len(cells), dtype=bool)
    keep[1:] = (cells[1:] != cells[:-1]).any(axis=1)
    return AnalyticFit(
        exponents=exponents,
        energy=energy(exponents),
        x_star=best_x,
        root_found=root_found,
        cell=cell,
        fitted_tp=fitted_tp,
        fitted_fp=fitted_fp,
        samples_x=x,
        samples_tp=samples_tp,
        samples_fp=samples_fp,
        path_cells=cells[keep],
        optimizer_iterations=iterations,
    )
