"""The baselines of Natarajan et al. (2016), Section 5.2.

- *Baseline*: threshold :math:`\\hat η(x)` at 1/2.
- *Tuning* (empirical utility maximisation, EUM; Koyejo et al., 2014): the plug-in classifier
  :math:`\\mathrm{sign}(\\hat η(x) - δ)` with δ chosen to minimise the loss of the *empirical*
  confusion matrix on a validation split. The threshold is then applied to new items one by one,
  unlike the set decoders, which choose ``k`` per set.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib._messages import plain

from ._losses import CountFunction, SetLoss, get_loss
from ._validation import as_probability_vector, descending_order


def threshold_predictions(probabilities: ArrayLike, threshold: float = 0.5) -> NDArray[np.bool_]:
    """Predict positive where ``probability >= threshold`` (the paper's baseline at 1/2)."""
    p = as_probability_vector(probabilities)
    if not np.isfinite(threshold):
        raise ValueError(f"threshold is {plain(threshold)}; it must be finite")
    return p >= threshold


def tune_threshold(
    probabilities: ArrayLike,
    labels: ArrayLike,
    loss: str | SetLoss | CountFunction = "f1",
    **loss_params: Any,
) -> float:
    """Threshold δ minimising the empirical loss of ``probabilities >= δ`` on labelled data.

    Every distinct cut of the sorted validation probabilities is tried (vectorised: cumulative
    TP and FP counts); the returned δ is the midpoint between the lowest selected and the highest
    unselected probability, so :func:`threshold_predictions` reproduces the chosen cut on the
    validation data. Ties in loss go to the highest threshold (fewest positives).

    Parameters
    ----------
    probabilities : array_like, shape (n,)
        Validation-split :math:`\\hat η(x)`.
    labels : array_like of {0, 1}, shape (n,)
        True labels.
    loss : str, SetLoss or callable
        See :func:`costlib.decoding._losses.get_loss`.
    """
    p = as_probability_vector(probabilities)
    y = np.asarray(labels)
    if y.shape != p.shape:
        raise ValueError(f"labels has shape {y.shape}; it must match probabilities {p.shape}")
    if not np.all(np.isin(y, (0, 1))):
        raise ValueError("labels must be 0/1 (or boolean)")
    if p.size == 0:
        raise ValueError("probabilities is empty; need validation data to tune a threshold")
    loss_obj = get_loss(loss, **loss_params)
    order = descending_order(p)
    sp, sy = p[order], y[order].astype(np.float64)
    n = p.size
    tp = np.concatenate([[0.0], np.cumsum(sy)])
    k = np.arange(n + 1, dtype=np.float64)
    positives = tp[-1]
    values = loss_obj(tp, k - tp, positives - tp, (n - positives) - (k - tp))
    # Only cuts between distinct probabilities are realisable by a threshold.
    valid = np.ones(n + 1, dtype=bool)
    valid[1:n] = sp[:-1] > sp[1:]
    values = np.where(valid, values, np.inf)
    best = int(np.argmin(values))
    if best == 0:
        return float(np.nextafter(sp[0], np.inf))
    if best == n:
        return float(sp[-1])
    mid = 0.5 * (sp[best - 1] + sp[best])
    return float(mid if mid > sp[best] else sp[best - 1])
