"""Exact expected F-β of every top-k prediction in :math:`O(n^2)`: the recursion of Ye et al.

With :math:`A_k` positives among the top ``k`` items and :math:`B_k` among the rest,

.. math::

    E[F_β(k)] = \\sum_{a \\ge 1} (1+β^2)\\, a\\, P(A_k = a)\\, R_k(k + β^2 a),\\qquad
    R_k(c) = E\\left[\\frac{1}{c + β^2 B_k}\\right].

Ye, Chai, Lee and Chieu (ICML 2012) observe that :math:`R` obeys a backward recursion over
items, :math:`R_{k-1}(c) = (1 - p_k) R_k(c) + p_k R_k(c + β^2)` with :math:`R_n(c) = 1/c`, so
one table over the lattice of denominators serves every ``k`` (the paper's Appendix B.1
algorithm for fractional-linear losses follows the same idea). For :math:`β^2 = r/s` in lowest
terms the denominators, scaled by ``s``, are the integers :math:`sk + r(a + b)`, and the table
has :math:`(r + s) n` entries: :math:`O((r+s) n^2)` time overall. This route therefore needs a
rational :math:`β^2` with a small numerator and denominator (``r + s <= 64``: β = 1, 2, 1/2,
√2, ...); :mod:`._exponential_sum` handles any real β.

The :math:`A_k` are built forward with the same tail truncation as Algorithm 1; the recursion for
:math:`R` itself is exact.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from ._poisson_binomial import prefix_distributions

#: Largest numerator + denominator of β² accepted by the dynamic program.
MAX_RATIONAL_SIZE = 64


def rational_beta_squared(beta: float) -> tuple[int, int] | None:
    """``(r, s)`` with ``β² = r/s`` (to 1e-14 relative) and ``r + s <= 64``, else ``None``."""
    b2 = beta * beta
    frac = Fraction(b2).limit_denominator(MAX_RATIONAL_SIZE)
    r, s = frac.numerator, frac.denominator
    if r <= 0 or r + s > MAX_RATIONAL_SIZE or abs(r / s - b2) > 1e-14 * b2:
        return None
    return r, s


def fbeta_dp_expected_losses(
    sorted_probabilities: NDArray[np.float64], beta: float, tol: float
) -> NDArray[np.float64]:
    """Expected F-β loss :math:`1 - E[F_β]` of the top ``k`` items, ``k = 0..n``.

    Raises
    ------
    ValueError
        If β² is not a rational number with numerator + denominator <= 64.
    """
    rs = rational_beta_squared(beta)
    if rs is None:
        raise ValueError(
            f"beta={beta!r}: the F-beta dynamic program needs beta**2 = r/s with r + s <= "
            f"{MAX_RATIONAL_SIZE}; use method='exponential_sum' or 'algorithm1' for this beta")
    r, s = rs
    b2 = r / s
    p = sorted_probabilities
    n = p.size
    prefix = prefix_distributions(p, tol)
    size = (r + s) * n + 1
    table = np.zeros(size)
    table[1:] = 1.0 / np.arange(1, size, dtype=np.float64)  # R_n(c) = 1/c, c scaled by s
    expected_f = np.zeros(n + 1)
    for k in range(n, 0, -1):
        dist = prefix[k]
        a = np.arange(dist.offset, dist.offset + dist.pmf.size)
        keep = a >= 1
        a, weights = a[keep], dist.pmf[keep]
        if a.size:
            # (1+β²) a / (k + β²(a+b)) = (1+β²) s a / (s k + r a + r b)
            expected_f[k] = (1.0 + b2) * s * float(
                np.dot(weights * a, table[s * k + r * a]))
        used = (r + s) * (k - 1) + 1
        table[:used] = (1.0 - p[k - 1]) * table[:used] + p[k - 1] * table[r:used + r]
    # k = 0: F = 1 by convention if there are no positives, else 0.
    expected_f[0] = float(np.exp(np.sum(np.log1p(-p)))) if np.all(p < 1.0) else 0.0
    return 1.0 - expected_f
