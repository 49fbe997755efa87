"""The audit a recall interval of a requested width needs (a power calculation).

The recall interval of :func:`costlib.audit.recall_interval` bounds the positives the
thresholds miss with the audit of the unflagged rows. How wide it will be under a larger or
smaller audit depends on how many missed positives there are and where the design samples
them; both are known only through the last audit. This module estimates them from that audit
with a model whose answer depends on the rows and their labels, not on how the rows were cut
into strata, and finds the scale of the design that brings the interval to a requested
half-width.

Model
-----
Stratum ``h`` of the unflagged rows has ``N_h`` rows sampled with probability ``π_h`` and an
unknown number ``M_h`` of positives; the audit found ``x_h ~ Poisson(π_h M_h)`` of them (the
model of the interval, :mod:`._poisson_bounds`). Strata whose ``π`` agree within 5% (relative,
from the smallest ``π`` of each class up) are one *class* ``c``: the same design level cut
finer, by day or by lattice cell. A class is summed: ``N_c = Σ N_h``, ``π_c = Σ N_h π_h / N_c``
and ``x_c = π_c Σ x_h / π_h`` (the found positives in class units; ``Σ x_h`` when the ``π_h``
are equal).

The prior is one Jeffreys prior for the whole unflagged region, spread evenly over its audited
rows: half a positive in all, ``a_c = ½ n_c / n`` of it to class ``c`` (``n_c`` its audited
rows, ``n`` those of every stratum, census strata included; the expected audited rows
``N_h π_h`` when nothing was audited). Its mean is a rate of ``½ / n`` positives per row everywhere,
and for a single stratum the posterior mean is Jeffreys' ``(x + ½) / π``. The posterior of each
class is

    M_c | x_c  ~  Gamma(shape x_c + a_c, scale 1 / π_c),

independent across classes. Gamma laws of one scale add shape for shape, so cutting a class
into strata of the same ``π`` leaves the posterior of its positives unchanged: the answer
depends on the data, not on the cut. (A Jeffreys prior per stratum would add half a positive
per stratum: cutting one stratum into ten would add five.) Strata with ``π = 1`` are modelled
alike (``x ~ Poisson(M)``: a census knows its positives, the model allows them the spread of a
Poisson count, which errs towards a larger audit), so a ``π`` just below 1 and a census give
the same answer, and a design that scales a census below 1 samples it.

A design scales every ``π_h`` by ``k`` (capped at 1: a census of the stratum). Its expected
half-width is averaged over the posterior: for each of ``draws`` joint draws of the ``M_c``
(Latin hypercube quantiles, a fixed seed), the recall interval of
:func:`~costlib.audit.recall_interval` is evaluated at the expected counts
``x'_c = min(1, k π_c) M_c`` (census classes known), with the largest weight
``ω_M = 1 / min(1, k min_h π_h)`` over the classes still sampled, and the half-widths are
averaged. The average falls as ``k`` grows (each draw's interval narrows), and the smallest
``k`` reaching the requested half-width is found by bisection on ``log k``. The audit is
``Σ_h N_h min(1, k π_h)`` rows.

Averaging over the posterior, rather than plugging in one estimate of ``M``, matters because
the half-width is not monotone in ``M``: an audit that finds nothing (the ``+ω_M`` term) or one
heavily weighted positive gives a wide interval, and a point estimate that is too high predicts
many finds and a narrow interval, hence too small an audit. How close the design comes to the
requested width depends on how much the last audit found:
``tests/benchmarks/bench_recall_power.py`` prints, per family of
``tests/benchmarks/bench_recall_coverage.py``, the requested and the achieved half-width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._poisson_bounds import weighted_poisson_interval

__all__ = ["AuditForWidth", "audit_for_recall_width"]

#: Strata whose ``π`` differ by less than this relative amount are one class.
SAME_PI_RTOL = 0.05
#: Half a positive (Jeffreys) for the whole unflagged region.
PRIOR_POSITIVES = 0.5
#: Relative shortfall from 1 of a scaled class probability still taken as a census (rounding).
CENSUS_RTOL = 1e-9


@dataclass(frozen=True)
class AuditForWidth:
    """What :func:`audit_for_recall_width` found.

    ``scale``: the factor on every stratum's ``π`` (capped at 1); ``probabilities``: the
    resulting ``π_h``; ``audited``: expected audited rows ``sum_h N_h π_h``; ``share``: that over
    the rows ``sum_h N_h``; ``half_width``: the expected half-width of the recall interval at
    that design (averaged over the posterior of the missed positives); ``reachable``: False
    when even auditing every row would not reach the width (then the other fields describe the
    census); ``expected_missed``: the posterior mean of the missed positives.
    """

    scale: float
    probabilities: tuple[float, ...]
    audited: float
    share: float
    half_width: float
    reachable: bool
    expected_missed: float = 0.0


def same_pi_classes(pi: NDArray[np.float64], rtol: float = SAME_PI_RTOL) -> NDArray[np.int64]:
    """Class index of every stratum: in increasing order of ``π``, a class starts at the first
    stratum whose ``π`` exceeds ``1 + rtol`` times the class's smallest ``π`` (so the ``π`` of
    one class differ by at most ``rtol``, relative)."""
    out = np.empty(pi.size, dtype=np.int64)
    order = np.argsort(pi, kind="stable")
    cls, start = -1, 0.0
    for i in order:
        if cls < 0 or pi[i] > start * (1.0 + rtol):
            cls, start = cls + 1, float(pi[i])
        out[i] = cls
    return out


@dataclass(frozen=True)
class _Posterior:
    """Draws of the missed positives per class."""

    pi: NDArray[np.float64]  # π_c of each class
    min_pi: NDArray[np.float64]  # the smallest π_h in each class
    draws: NDArray[np.float64]  # (draws, classes): M_c


def _posterior(rows: NDArray[np.float64], pi: NDArray[np.float64],
               audited: NDArray[np.float64], found: NDArray[np.float64], draws: int,
               seed: int) -> _Posterior:
    from scipy.special import gammaincinv  # scipy.stats costs a second at start-up

    spread = audited if audited.sum() > 0 else rows * pi
    total = float(spread.sum())
    cls = same_pi_classes(pi)
    k = int(cls.max()) + 1 if cls.size else 0
    n_c = np.bincount(cls, weights=rows, minlength=k)
    expected_c = np.bincount(cls, weights=rows * pi, minlength=k)
    pi_c = np.divide(expected_c, n_c, out=np.ones(k), where=n_c > 0)
    x_c = pi_c * np.bincount(cls, weights=found / pi, minlength=k)
    a_c = (PRIOR_POSITIVES / total * np.bincount(cls, weights=spread, minlength=k)
           if total > 0 else np.zeros(k))
    min_pi = np.full(k, 1.0)
    np.minimum.at(min_pi, cls, pi)
    shape = x_c + a_c
    rng = np.random.default_rng(seed)
    # Latin hypercube: each class's quantiles cover (0, 1) evenly, paired at random.
    u = (np.argsort(rng.random((k, draws)), axis=1).T + rng.random((draws, k))) / draws
    m = np.zeros((draws, k))
    live = shape > 0
    m[:, live] = np.asarray(gammaincinv(shape[live], u[:, live]), dtype=np.float64) / pi_c[live]
    return _Posterior(pi_c, min_pi, m)


def _mean_half_width(caught: float, post: _Posterior, k: float, level: float) -> float:
    """Posterior mean of the recall half-width at the design ``min(1, k π)``."""
    p = k * post.pi
    # a class's π is a rows-weighted mean of its strata's: at the scale that makes every
    # stratum a census it may fall short of 1 by rounding, and is a census all the same
    census = p >= 1.0 - CENSUS_RTOL
    p = np.where(census, 1.0, p)
    m = post.draws
    known = m[:, census].sum(axis=1)
    sampled = ~census
    w = 1.0 / p[sampled]
    ms = m[:, sampled]
    y = ms.sum(axis=1)  # sum_c ω_c x'_c with x'_c = p_c M_c
    v = (ms * w).sum(axis=1)  # sum_c ω_c² x'_c
    wm = float(1.0 / np.minimum(1.0, k * post.min_pi[sampled]).min()) if sampled.any() else 0.0
    alpha = (1.0 - level) / 2.0
    lower, upper = weighted_poisson_interval(y, v, wm, alpha)
    den_low = caught + known + upper  # recall's lower end: C / (C + M_U)
    den_high = caught + known + lower
    low = np.divide(caught, den_low, out=np.zeros_like(den_low), where=den_low > 0)
    high = np.divide(caught, den_high, out=np.zeros_like(den_high), where=den_high > 0)
    return float(np.mean((high - low) / 2.0))


def audit_for_recall_width(
    caught: float,
    rows: ArrayLike,
    probabilities: ArrayLike,
    audited: ArrayLike,
    positives: ArrayLike,
    half_width: float,
    level: float = 0.9,
    *,
    draws: int = 512,
    seed: int = 0,
) -> AuditForWidth:
    """The audit that brings the recall interval to a requested half-width (a power calculation).

    Parameters
    ----------
    caught : float
        Positives the thresholds flag (rated with certainty).
    rows, probabilities, audited, positives : array-like of shape (m,)
        Per audit stratum of the unflagged rows, from the last runs: rows ``N_h``, sampling
        probability ``π_h``, audited rows ``n_h`` and positives found ``x_h``. Any cut of the
        same rows gives the same answer: strata of equal ``π`` are pooled.
    half_width : float
        The half-width wanted, e.g. 0.05 for ``±0.05``.
    level : float
        Level of the interval (as :func:`~costlib.audit.recall_interval`).
    draws : int, default 512
        Posterior draws the expected half-width is averaged over.
    seed : int, default 0
        Seed of the draws (the answer is a deterministic function of the inputs).

    Returns
    -------
    AuditForWidth

    Notes
    -----
    Strata of equal ``π`` (within 5%, relative) are pooled into classes ``c``; the
    missed positives of class ``c`` have the posterior ``Gamma(x_c + a_c, scale 1/π_c)``,
    ``a_c = ½ n_c / n`` (one Jeffreys prior for the whole region, spread over the audited
    rows). A design scales every ``π_h`` by ``k`` (capped at 1); its half-width is the mean
    over the posterior draws of the recall interval's half-width at the expected counts
    ``min(1, k π_c) M_c``, and the smallest ``k`` reaching ``half_width`` is found by bisection
    on ``log k``. The module docstring (:mod:`costlib.audit._recall_power`) states the model in
    full.
    """
    n_rows = np.asarray(rows, dtype=np.float64)
    pi = np.asarray(probabilities, dtype=np.float64)
    n_aud = np.asarray(audited, dtype=np.float64)
    found = np.asarray(positives, dtype=np.float64)
    if not (n_rows.shape == pi.shape == n_aud.shape == found.shape) or n_rows.ndim != 1:
        raise ValueError("rows, probabilities, audited and positives must be 1-D, same length")
    if ((pi <= 0) | (pi > 1) | np.isnan(pi)).any():
        raise ValueError("probabilities must be in (0, 1]")
    if (n_rows < 0).any() or (n_aud < 0).any() or (found < 0).any():
        raise ValueError("rows, audited and positives must be >= 0")
    if not 0.0 < half_width < 0.5:
        raise ValueError(f"half_width must be in (0, 0.5), got {half_width!r}")
    if caught < 0:
        raise ValueError(f"caught must be >= 0, got {caught!r}")
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws!r}")
    post = _posterior(n_rows, pi, n_aud, found, draws, seed)
    missed = float(post.draws.mean(axis=0).sum())

    def width(k: float) -> float:
        return _mean_half_width(caught, post, k, level)

    def result(k: float, reachable: bool) -> AuditForWidth:
        p = np.minimum(1.0, k * pi)
        total = float(n_rows.sum())
        aud = float((n_rows * p).sum())
        return AuditForWidth(float(k), tuple(float(q) for q in p), aud,
                             aud / total if total > 0 else 0.0, width(k), reachable, missed)

    k_max = 1.0 / float(pi.min()) if pi.size else 1.0
    if width(k_max) > half_width:
        return result(k_max, False)
    lo = min(1e-6, k_max)
    if width(lo) <= half_width:
        return result(lo, True)
    lo_log, hi_log = math.log(lo), math.log(k_max)
    for _ in range(32):
        mid = (lo_log + hi_log) / 2.0
        if width(math.exp(mid)) <= half_width:
            hi_log = mid
        else:
            lo_log = mid
    return result(math.exp(hi_log), True)
