"""Set losses on confusion counts (Natarajan et al., ICML 2016, Table 1).

Every loss here is a function of the confusion counts of one prediction ``s`` on one label vector
``y`` of the same ``n`` items:

.. math::

    TP = \\sum_i s_i y_i,\\quad FP = \\sum_i s_i (1 - y_i),\\quad
    FN = \\sum_i (1 - s_i) y_i,\\quad TN = \\sum_i (1 - s_i)(1 - y_i).

The paper writes the same losses as :math:`\\psi(u, v, p)` of the normalised counts
:math:`u = TP/n`, :math:`v = (TP + FP)/n` (fraction predicted positive) and
:math:`p = (TP + FN)/n` (fraction actually positive). All named losses are scale free, so counts
or fractions give the same value. Losses are in ``[0, 1]`` and lower is better.

Zero-division convention (the one place it is defined)
-------------------------------------------------------
A *rate* whose denominator is zero counts as a perfect score, ``1``:

- recall / TPR = TP / (TP + FN) is 1 when there are no positives;
- TNR = TN / (TN + FP) is 1 when there are no negatives;
- precision = TP / (TP + FP) is 1 when nothing is predicted;
- the F-β score and the Jaccard index are 1 when TP = FP = FN = 0 (nothing to find, nothing
  predicted).

Consequently every named loss is ``0`` for a perfect prediction (FP = FN = 0), including the
empty prediction on a set without positives, and ``1`` for the empty prediction on a set that has
positives (F-β, Jaccard, G-TP/PR). The harmonic mean of two rates that are both zero is zero
(its limit). The fractional-linear family with user coefficients cannot know what a perfect
score is, so its zero-denominator value is the explicit parameter ``zero_division``.

TP monotonicity
---------------
Theorem 1 of the paper: if, for fixed ``v`` and ``p``, the loss strictly decreases as TP grows
(TP monotonicity), then under conditionally independent labels the expected-loss-optimal
prediction labels the top ``k`` items by probability positive. All named losses are TP monotonic
(checked by :func:`is_tp_monotonic` in the tests); user callables and fractional-linear
coefficients are the user's responsibility, and :func:`is_tp_monotonic` checks them for a given
``n``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib._messages import plain

__all__ = [
    "LOSS_NAMES",
    "SetLoss",
    "am_loss",
    "auc_loss",
    "callable_loss",
    "fbeta_loss",
    "fractional_linear_loss",
    "g_mean_loss",
    "g_tp_pr_loss",
    "get_loss",
    "h_mean_loss",
    "is_tp_monotonic",
    "jaccard_loss",
]

CountFunction = Callable[[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                          NDArray[np.float64]], ArrayLike]
RateFunction = Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.float64]]
_F = NDArray[np.float64]


@dataclass(frozen=True)
class SetLoss:
    """A loss on confusion counts, vectorised over numpy arrays.

    Parameters
    ----------
    name : str
        Short name, e.g. ``"f1"``, ``"fbeta"``, ``"jaccard"``.
    function : callable
        ``function(tp, fp, fn, tn) -> array`` evaluated with numpy broadcasting on float64
        arrays of counts.
    kind : str
        The family the decoders recognise for fast routes (``"fbeta"``, ``"jaccard"``, ``"am"``,
        ``"g_tp_pr"``, ``"g_mean"``, ``"h_mean"``, ``"auc"``, ``"fractional_linear"``,
        ``"callable"``).
    params : mapping
        Parameters of the family, e.g. ``{"beta": 1.0}`` (read-only).
    of_rates : callable, optional
        For losses that depend on the counts only through TPR and TNR (AM, G-Mean, H-Mean,
        AUC): ``of_rates(tpr, tnr) -> array`` with ``function(tp, fp, fn, tn) ==
        of_rates(TPR, TNR)`` under the zero-division convention. Lets Algorithm 1 build the
        rates from precomputed reciprocals instead of dividing per grid cell. Must not modify
        its arguments.
    """

    name: str
    function: CountFunction = field(repr=False)
    kind: str = "callable"
    params: Mapping[str, Any] = field(default_factory=dict)
    of_rates: RateFunction | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Read-only parameters: named losses are shared (cached) objects.
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def __call__(self, tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike
                 ) -> NDArray[np.float64]:
        """Evaluate the loss on (broadcastable) confusion counts; returns float64."""
        arrays = [np.asarray(a, dtype=np.float64) for a in (tp, fp, fn, tn)]
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.asarray(self.function(*arrays), dtype=np.float64)
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        if out.shape != shape:
            out = np.broadcast_to(out, shape).copy()
        return out

    def __hash__(self) -> int:
        return hash((self.name, self.kind, tuple(sorted(self.params.items())), id(self.function)))


def _rate(numerator: NDArray[np.float64], denominator: NDArray[np.float64]
          ) -> NDArray[np.float64]:
    """``numerator / denominator`` with the module convention: a rate with denominator 0 is 1."""
    out = np.asarray(np.divide(numerator, denominator))  # callers silence 0/0 warnings
    np.copyto(out, 1.0, where=denominator == 0)
    return out


def _times(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """``a * b``, reusing ``a``'s memory when it already has the broadcast shape."""
    if a.shape == np.broadcast_shapes(a.shape, b.shape):
        return np.multiply(a, b, out=a)
    return a * b


def fbeta_loss(beta: float = 1.0) -> SetLoss:
    """F-β loss, :math:`1 - (1+β^2) TP / ((1+β^2) TP + β^2 FN + FP)`.

    In the paper's coordinates :math:`ψ(u, v, p) = 1 - (1+β^2) u / (β^2 p + v)`. β is any real
    number > 0 (β < 1 weights precision more, β > 1 recall). The loss is 0 when
    TP = FP = FN = 0 (module convention).
    """
    beta = float(beta)
    if not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta is {plain(beta)}; beta must be a finite real number > 0")
    b2 = beta * beta

    def f(tp: _F, fp: _F, fn: _F, tn: _F) -> _F:
        return 1.0 - _rate((1.0 + b2) * tp, (1.0 + b2) * tp + b2 * fn + fp)

    name = "f1" if beta == 1.0 else f"fbeta(beta={beta:g})"
    return SetLoss(name, f, "fbeta", {"beta": beta})


def jaccard_loss() -> SetLoss:
    """Jaccard loss, :math:`(FP + FN) / (TP + FP + FN) = 1 - (p + v - 2u)/(p + v - u)`.

    0 when TP = FP = FN = 0 (module convention).
    """

    def f(tp: _F, fp: _F, fn: _F, tn: _F) -> _F:
        return 1.0 - _rate(tp, tp + fp + fn)

    return SetLoss("jaccard", f, "jaccard", {})


def _from_rates(of_rates: RateFunction) -> CountFunction:
    """The count function ``of_rates(TPR, TNR)`` with the module's zero-division convention."""

    def f(tp: _F, fp: _F, fn: _F, tn: _F) -> _F:
        return of_rates(_rate(tp, tp + fn), _rate(tn, tn + fp))

    return f


def _am_of_rates(tpr: _F, tnr: _F) -> _F:
    return 1.0 - 0.5 * (tpr + tnr)


def _g_mean_of_rates(tpr: _F, tnr: _F) -> _F:
    product = np.asarray(tpr * tnr)
    return 1.0 - np.sqrt(product, out=product)


def _h_mean_of_rates(tpr: _F, tnr: _F) -> _F:
    total = np.asarray(tpr + tnr)
    product = np.asarray(tpr * tnr)
    product *= 2.0
    mean = np.divide(product, total, out=np.zeros(product.shape), where=total > 0)
    return 1.0 - mean


def _auc_of_rates(tpr: _F, tnr: _F) -> _F:
    return (1.0 - tpr) * (1.0 - tnr)


def am_loss() -> SetLoss:
    """Arithmetic-mean loss, :math:`1 - (TPR + TNR)/2` (one minus balanced accuracy)."""
    return SetLoss("am", _from_rates(_am_of_rates), "am", {}, _am_of_rates)


def g_tp_pr_loss() -> SetLoss:
    """Geometric mean of recall and precision, :math:`1 - \\sqrt{TPR \\cdot Prec}`.

    Equals :math:`1 - TP/\\sqrt{(TP+FN)(TP+FP)}` when both are positive.
    """

    def f(tp: _F, fp: _F, fn: _F, tn: _F) -> _F:
        product = _times(_rate(tp, tp + fn), _rate(tp, tp + fp))
        return 1.0 - np.sqrt(product, out=product)

    return SetLoss("g_tp_pr", f, "g_tp_pr", {})


def g_mean_loss() -> SetLoss:
    """Geometric-mean loss, :math:`1 - \\sqrt{TPR \\cdot TNR}`."""
    return SetLoss("g_mean", _from_rates(_g_mean_of_rates), "g_mean", {}, _g_mean_of_rates)


def h_mean_loss() -> SetLoss:
    """Harmonic-mean loss, :math:`1 - 2/(1/TPR + 1/TNR) = 1 - 2\\,TPR\\,TNR/(TPR + TNR)`.

    The harmonic mean is 0 when either rate is 0 (its limit).
    """
    return SetLoss("h_mean", _from_rates(_h_mean_of_rates), "h_mean", {}, _h_mean_of_rates)


def auc_loss() -> SetLoss:
    """AUC loss of a binary prediction, :math:`FP \\cdot FN / ((TP + FN)(FP + TN))`.

    This is the fraction of (positive, negative) pairs that the 0/1 prediction orders wrongly,
    i.e. :math:`(1 - TPR)(1 - TNR)`; 0 when there are no positives or no negatives.

    Notes
    -----
    As in the paper's Table 1, pairs that the 0/1 prediction ties (both predicted 1 or both 0)
    count as ordered correctly, so the empty and the full prediction have loss 0 and expected-loss
    decoding is trivial (``k = 0``). Counting ties as one half instead gives
    :math:`(FN \\cdot FP + (TP \\cdot FP + FN \\cdot TN)/2) / (P N)`, which equals the AM loss.
    """
    return SetLoss("auc", _from_rates(_auc_of_rates), "auc", {}, _auc_of_rates)


def fractional_linear_loss(
    numerator: ArrayLike, denominator: ArrayLike, zero_division: float = 0.0
) -> SetLoss:
    """The fractional-linear family of Koyejo et al. (paper eq. 4).

    .. math::

        ψ(u, v, p) = \\frac{c_0 + c_1 u + c_2 v + c_3 p}{d_0 + d_1 u + d_2 v + d_3 p},

    with :math:`u = TP/n`, :math:`v = (TP+FP)/n`, :math:`p = (TP+FN)/n`,
    :math:`n = TP+FP+FN+TN`.

    Parameters
    ----------
    numerator : array_like of 4 floats
        :math:`(c_0, c_1, c_2, c_3)`.
    denominator : array_like of 4 floats
        :math:`(d_0, d_1, d_2, d_3)`.
    zero_division : float
        Value of the loss where the denominator is 0.

    Examples
    --------
    F1 is ``numerator=(0, -2, 1, 1), denominator=(0, 0, 1, 1)``; Jaccard is
    ``(0, -2, 1, 1), (0, -1, 1, 1)``.
    """
    c = np.asarray(numerator, dtype=np.float64)
    d = np.asarray(denominator, dtype=np.float64)
    for label, arr in (("numerator", c), ("denominator", d)):
        if arr.shape != (4,) or not np.all(np.isfinite(arr)):
            raise ValueError(f"{label} must be 4 finite coefficients (x0, x_u, x_v, x_p); "
                             f"got {plain(arr)}")
    zero_division = float(zero_division)

    def f(tp: _F, fp: _F, fn: _F, tn: _F) -> _F:
        n = tp + fp + fn + tn
        safe_n = np.where(n > 0, n, 1.0)
        u, v, p = tp / safe_n, (tp + fp) / safe_n, (tp + fn) / safe_n
        num = c[0] + c[1] * u + c[2] * v + c[3] * p
        den = d[0] + d[1] * u + d[2] * v + d[3] * p
        safe = np.where(den != 0, den, 1.0)
        return np.where(den != 0, num / safe, zero_division)

    params = {"numerator": tuple(c.tolist()), "denominator": tuple(d.tolist()),
              "zero_division": zero_division}
    return SetLoss("fractional_linear", f, "fractional_linear", params)


def callable_loss(function: CountFunction, name: str | None = None) -> SetLoss:
    """Wrap a user function ``function(tp, fp, fn, tn) -> array`` as a :class:`SetLoss`.

    The function receives float64 arrays that broadcast against each other and must return the
    loss elementwise (lower is better). Top-k decoding is optimal for it when it is TP monotonic
    (see :func:`is_tp_monotonic`).
    """
    if not callable(function):
        raise TypeError(f"function must be callable; got {type(function).__name__}")
    label = name or str(getattr(function, "__name__", "callable"))
    return SetLoss(label, function, "callable", {})


_FACTORIES: dict[str, Callable[..., SetLoss]] = {
    "f1": lambda: fbeta_loss(1.0),
    "fbeta": fbeta_loss,
    "jaccard": jaccard_loss,
    "am": am_loss,
    "g_tp_pr": g_tp_pr_loss,
    "g_mean": g_mean_loss,
    "h_mean": h_mean_loss,
    "auc": auc_loss,
    "fractional_linear": fractional_linear_loss,
}

#: Names accepted by :func:`get_loss`.
LOSS_NAMES: tuple[str, ...] = tuple(_FACTORIES)

_ALIASES = {"f": "fbeta", "f_beta": "fbeta", "gtp_pr": "g_tp_pr", "g-tp/pr": "g_tp_pr",
            "gtppr": "g_tp_pr", "g-mean": "g_mean", "gmean": "g_mean", "h-mean": "h_mean",
            "hmean": "h_mean", "fl": "fractional_linear"}


def get_loss(name: str | SetLoss | CountFunction, **params: Any) -> SetLoss:
    """Return a :class:`SetLoss` by name (see :data:`LOSS_NAMES`), or wrap a callable.

    Parameters
    ----------
    name : str, SetLoss or callable
        A loss name (``"f1"``, ``"fbeta"``, ``"jaccard"``, ``"am"``, ``"g_tp_pr"``,
        ``"g_mean"``, ``"h_mean"``, ``"auc"``, ``"fractional_linear"``), an F-β name
        ``"f<β>"`` such as ``"f2"`` or ``"f0.5"``, an existing :class:`SetLoss` (returned as
        is), or a callable ``f(tp, fp, fn, tn)``.
    **params
        Parameters of the family, e.g. ``beta=2.0`` for ``"fbeta"``. An F-β name fixes β:
        ``get_loss("f2")`` equals ``get_loss("fbeta", beta=2)``; a different ``beta`` with such
        a name (``get_loss("f1", beta=2)``) raises ``ValueError`` pointing to ``"fbeta"``.

    Examples
    --------
    >>> get_loss("f2") is get_loss("fbeta", beta=2.0)
    True
    >>> dict(get_loss("f0.5").params)
    {'beta': 0.5}
    """
    if isinstance(name, SetLoss):
        if params:
            raise ValueError("params cannot be combined with a SetLoss instance")
        return name
    if callable(name):
        if params:
            raise ValueError("params cannot be combined with a callable loss")
        return callable_loss(name)
    if not isinstance(name, str):
        raise TypeError(f"loss must be a name, a SetLoss or a callable; got {type(name).__name__}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    beta_in_name = _fbeta_name_beta(key)
    if beta_in_name is not None:  # "f1", "f2", "f0.5": F-β with β fixed by the name
        if "beta" in params and float(params["beta"]) != beta_in_name:
            raise ValueError(
                f"loss {name!r} is F-β with β = {beta_in_name:g}, but beta={params['beta']!r} "
                f"was given; use get_loss('fbeta', beta={params['beta']!r}) (or the name "
                f"'f{float(params['beta']):g}')"
            )
        params = {**params, "beta": beta_in_name}
        key = "fbeta"
    if key not in _FACTORIES:
        raise ValueError(
            f"loss {name!r} is unknown; known losses: {', '.join(LOSS_NAMES)}, and F-β by "
            "name as f<β> (e.g. 'f2', 'f0.5')"
        )
    try:
        frozen = tuple(sorted(params.items()))
        hash(frozen)
    except TypeError:  # unhashable parameters (e.g. lists of coefficients): build afresh
        frozen = None
    try:
        if frozen is None:
            return _FACTORIES[key](**params)
        return _named_loss(key, frozen)
    except TypeError as exc:
        raise ValueError(f"invalid parameters for loss {name!r}: {exc}") from None


_FBETA_NAME = re.compile(r"f(?P<beta>[0-9]+(?:\.[0-9]+)?)")


def _fbeta_name_beta(key: str) -> float | None:
    """β of an F-β name such as ``"f1"``, ``"f2"`` or ``"f0.5"``; None for other names."""
    match = _FBETA_NAME.fullmatch(key)
    if match is None:
        return None
    beta = float(match["beta"])
    if not beta > 0:
        raise ValueError(f"loss {key!r}: β must be > 0")
    return beta


@lru_cache(maxsize=128)
def _named_loss(key: str, params: tuple[tuple[str, Any], ...]) -> SetLoss:
    """One :class:`SetLoss` object per name and parameters (lets decoders cache loss tables)."""
    return _FACTORIES[key](**dict(params))


def is_tp_monotonic(loss: SetLoss | str | CountFunction, n: int, strict: bool = True) -> bool:
    """Check TP monotonicity of ``loss`` on every confusion matrix of ``n`` items.

    For every number predicted ``v`` and number of positives ``p`` (counts, ``0..n``) the loss
    must decrease (strictly if ``strict``) as TP runs over its feasible range
    :math:`\\max(0, v + p - n) \\le TP \\le \\min(v, p)`. Cost :math:`O(n^3)`.
    """
    loss = get_loss(loss)
    v, p = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    tp = np.arange(n + 1)[:, None, None] + np.zeros_like(v)[None]
    feasible = (tp >= np.maximum(0, v + p - n)) & (tp <= np.minimum(v, p))
    tp_c = np.where(feasible, tp, 0)
    values = loss(tp_c, v - tp_c, p - tp_c, n - v - p + tp_c)
    both = feasible[1:] & feasible[:-1]
    step = values[1:] - values[:-1]
    bad = (step >= 0) if strict else (step > 1e-12)
    return not bool(np.any(bad & both))
