"""Optimal top-k decoding of one set of items, and the exact expected loss of any prediction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib._messages import plain

from ._algorithm1 import algorithm1_expected_losses
from ._exponential_sum import SUPPORTED_KINDS, exponential_sum_expected_losses
from ._fbeta import fbeta_dp_expected_losses, rational_beta_squared
from ._losses import CountFunction, SetLoss, get_loss
from ._poisson_binomial import TRUNCATION_TOL, poisson_binomial
from ._small_sets import expected_losses_single, padded_loss_table
from ._validation import as_probability_vector, descending_order

#: Methods accepted by :func:`optimal_topk`.
METHODS = ("auto", "algorithm1", "fbeta_dp", "exponential_sum")

#: Up to this many items ``method="auto"`` uses the untruncated Algorithm 1 (exact, cheap).
SMALL_SET = 32


@dataclass(frozen=True)
class TopK:
    """Result of :func:`optimal_topk`.

    Attributes
    ----------
    k : int
        Number of items predicted positive.
    selected : ndarray of bool, shape (n,)
        Prediction in the input order: the ``k`` items of highest probability (ties by lower
        index first).
    expected_loss : float
        :math:`E[L]` of ``selected`` under independent Bernoulli labels.
    expected_losses : ndarray, shape (n + 1,)
        Expected loss of the top-``j`` prediction for ``j = 0..n`` (nan for ``j`` that an
        early stop did not evaluate).
    order : ndarray of int, shape (n,)
        Item indices by decreasing probability; ``selected[order[:k]]`` is all True.
    method : str
        Algorithm that produced ``expected_losses``.
    loss : SetLoss
        The loss.
    """

    k: int
    selected: NDArray[np.bool_]
    expected_loss: float
    expected_losses: NDArray[np.float64]
    order: NDArray[np.intp]
    method: str
    loss: SetLoss


def resolve_method(method: str, loss: SetLoss, n: int) -> str:
    """The concrete algorithm for ``method`` (``"auto"`` picks the fastest exact route)."""
    if method not in METHODS:
        raise ValueError(f"method {method!r} is unknown; choose one of {', '.join(METHODS)}")
    if method != "auto":
        if method == "exponential_sum" and loss.kind not in SUPPORTED_KINDS:
            raise ValueError(f"method 'exponential_sum' supports {sorted(SUPPORTED_KINDS)}; "
                             f"loss {loss.name!r} is of kind {loss.kind!r}")
        if method == "fbeta_dp" and loss.kind != "fbeta":
            raise ValueError(f"method 'fbeta_dp' needs an F-beta loss; got {loss.name!r}")
        return method
    if n <= SMALL_SET:
        return "algorithm1"
    if loss.kind in SUPPORTED_KINDS:
        return "exponential_sum"
    return "algorithm1"


def topk_expected_losses(
    sorted_probabilities: NDArray[np.float64],
    loss: SetLoss,
    method: str,
    tol: float = TRUNCATION_TOL,
    early_stop: bool = False,
) -> NDArray[np.float64]:
    """Expected loss of the top ``k`` of already sorted probabilities, ``k = 0..n``."""
    if method == "algorithm1":
        return algorithm1_expected_losses(sorted_probabilities, loss, tol, early_stop)
    if method == "fbeta_dp":
        return fbeta_dp_expected_losses(sorted_probabilities, loss.params["beta"], tol)
    return exponential_sum_expected_losses(sorted_probabilities, loss)


def early_stop_k(expected_losses: NDArray[np.float64]) -> int:
    """The paper's early stop on a curve :math:`L_0, L_1, \\dots`.

    Algorithm 1 scans ``k = 1, 2, ...`` and stops at the first ``k*`` with
    :math:`L_{k^*+1} \\ge L_{k^*}` (``k* = n`` if there is none); the answer is the best of
    :math:`L_0` (the all-negative start) and :math:`L_1 .. L_{k^*}`. Only
    ``expected_losses[:k* + 2]`` is read, so a curve cut short by an early stop is fine.
    """
    n = expected_losses.size - 1
    if n <= 1:
        return int(np.argmin(expected_losses))
    rises = np.flatnonzero(np.diff(expected_losses[1:]) >= 0)
    stop = int(rises[0]) + 1 if rises.size else n
    return int(np.argmin(expected_losses[:stop + 1]))


def optimal_topk(
    probabilities: ArrayLike,
    loss: str | SetLoss | CountFunction = "f1",
    *,
    method: str = "auto",
    tol: float = TRUNCATION_TOL,
    early_stop: bool = False,
    **loss_params: Any,
) -> TopK:
    """Prediction minimising the expected loss over independent labels, among top-k sets.

    With :math:`Y_i \\sim \\mathrm{Bernoulli}(p_i)` independent, returns
    :math:`\\arg\\min_k E[L(\\text{top}_k, Y)]`. For a TP-monotonic loss (all named losses) this is
    the optimum over all :math:`2^n` predictions (Natarajan et al., 2016, Theorem 1).

    Parameters
    ----------
    probabilities : array_like, shape (n,)
        :math:`P(Y_i = 1 \\mid x)`, each in ``[0, 1]``; nan or out-of-range raise ``ValueError``.
    loss : str, SetLoss or callable
        See :func:`costlib.decoding._losses.get_loss`; ``**loss_params`` are passed to it
        (``beta=2``).
    method : {"auto", "algorithm1", "fbeta_dp", "exponential_sum"}
        ``"algorithm1"``: the paper's Algorithm 1, any loss, :math:`O(n^2)` in practice with
        truncation (:math:`O(n^3)` with ``tol=0``). ``"fbeta_dp"``: Ye et al.'s exact
        :math:`O(n^2)` recursion for F-β with rational β². ``"exponential_sum"``:
        :math:`O(n m)`, m ≈ 220, for F-β (any β), Jaccard, AM and G-TP/PR, relative error
        ~1e-15. ``"auto"``: Algorithm 1 untruncated for n <= 32, else the exponential sum when
        it applies, else Algorithm 1.
    tol : float
        Poisson-binomial tail mass dropped per update (Algorithm 1 and the DP); the expected
        losses are then off by at most ``2 n tol``. ``0`` disables truncation.
    early_stop : bool
        Use the paper's early stop (scan ``k = 1, 2, ...`` up to the first ``k`` with
        :math:`L_{k+1} \\ge L_k`; best of those and ``k = 0``) instead of the global minimum. A
        heuristic: equal to the full scan when :math:`L_1, \\dots, L_n` is unimodal, which
        fails occasionally for Jaccard (see the tests).

    Returns
    -------
    TopK
        Ties in :math:`L_k` resolve to the smallest ``k``; ties in probability to the lower
        index.

    Examples
    --------
    >>> from costlib.decoding import optimal_topk
    >>> result = optimal_topk([0.9, 0.1, 0.6, 0.45], "f1")
    >>> int(result.k), result.selected.tolist()
    (3, [True, False, True, True])
    """
    p = as_probability_vector(probabilities)
    loss_obj = get_loss(loss, **loss_params)
    if not (np.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol is {plain(tol)}; tol must be a finite number >= 0")
    order = descending_order(p)
    sorted_p = np.ascontiguousarray(p[order])
    chosen = resolve_method(method, loss_obj, p.size)
    if chosen == "fbeta_dp" and rational_beta_squared(loss_obj.params["beta"]) is None:
        raise ValueError(
            f"method 'fbeta_dp' needs beta**2 = r/s with small r + s; got beta="
            f"{loss_obj.params['beta']!r}; use method='exponential_sum'")
    if method == "auto" and chosen == "algorithm1" and p.size <= SMALL_SET:
        # Untruncated Algorithm 1 in its vectorised small-set form (cached loss tables).
        losses = expected_losses_single(sorted_p, padded_loss_table(loss_obj, p.size))
    else:
        losses = topk_expected_losses(sorted_p, loss_obj, chosen, tol, early_stop)
    if early_stop:
        k = early_stop_k(losses[~np.isnan(losses)])
    else:
        k = int(np.argmin(losses))
    selected = np.zeros(p.size, dtype=bool)
    selected[order[:k]] = True
    return TopK(k, selected, float(losses[k]), losses, order, chosen, loss_obj)


def expected_loss(
    probabilities: ArrayLike,
    selected: ArrayLike,
    loss: str | SetLoss | CountFunction = "f1",
    *,
    tol: float = TRUNCATION_TOL,
    **loss_params: Any,
) -> float:
    """Expected loss :math:`E[L(s, Y)]` of any prediction ``s`` over independent labels.

    .. math::

        E[L] = \\sum_{a, b} P(A = a) P(B = b)\\, L(a,\\; |s| - a,\\; b,\\; n - |s| - b),

    with :math:`A` (:math:`B`) the Poisson-binomial number of positives among the selected
    (unselected) items. Cost :math:`O(n^2)` (less with truncation).

    Parameters
    ----------
    probabilities : array_like, shape (n,)
        :math:`P(Y_i = 1)`, each in ``[0, 1]``.
    selected : array_like of bool, shape (n,)
        The prediction (True = predicted positive), e.g. ``probabilities >= 0.5``.
    loss : str, SetLoss or callable
        See :func:`costlib.decoding._losses.get_loss`.
    tol : float
        Poisson-binomial tail mass dropped per update (error at most ``2 n tol``); ``0`` for the
        exact sum.

    Returns
    -------
    float
        Within the range of the loss over the outcomes of positive probability (a named loss:
        ``[0, 1]``).

    Examples
    --------
    Predicting nothing on items that are surely positive loses everything, exactly:

    >>> expected_loss([0.9, 1.0, 0.7], [False, False, False], "f1")
    1.0
    """
    p = as_probability_vector(probabilities)
    s = np.asarray(selected)
    if s.shape != p.shape:
        raise ValueError(f"selected has shape {s.shape}; it must match probabilities {p.shape}")
    if s.dtype != np.bool_:
        if not np.all(np.isin(s, (0, 1))):
            raise ValueError("selected must be boolean (or 0/1) per item")
        s = s.astype(bool)
    loss_obj = get_loss(loss, **loss_params)
    n, k = p.size, int(s.sum())
    top = poisson_binomial(p[s], tol)
    rest = poisson_binomial(p[~s], tol)
    tp = top.support[:, None]
    fn = rest.support[None, :]
    grid = np.asarray(loss_obj(tp, k - tp, fn, (n - k) - fn), dtype=np.float64)
    # A convex combination of losses: dividing by the (rounded, or truncated) total mass and
    # clamping to the losses combined keeps it within them, e.g. exactly 1.0 when every
    # outcome with any probability costs 1.
    value = float(top.pmf @ grid @ rest.pmf) / float(top.pmf.sum() * rest.pmf.sum())
    reached = grid[np.ix_(top.pmf > 0, rest.pmf > 0)]
    return float(min(max(value, float(reached.min())), float(reached.max())))
