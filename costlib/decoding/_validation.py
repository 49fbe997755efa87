"""Input checks shared by the decoders: clear errors that name the argument and the reason."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def as_probability_vector(values: ArrayLike, name: str = "probabilities") -> NDArray[np.float64]:
    """Return ``values`` as a 1-D float64 array of probabilities, or raise ``ValueError``.

    Every entry must be a finite real number in ``[0, 1]``; the message names the first bad
    entry, e.g. ``"probabilities[3] is nan; probabilities must be in [0, 1]"``.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of numbers in [0, 1]: {exc}") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}")
    check_probabilities(arr, name)
    return arr


def check_probabilities(arr: NDArray[np.float64], name: str = "probabilities") -> None:
    """Raise ``ValueError`` naming the first entry of ``arr`` that is not in ``[0, 1]``."""
    bad = ~((arr >= 0.0) & (arr <= 1.0))  # catches nan as well
    if np.any(bad):
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        where = ", ".join(str(i) for i in index)
        value = arr[index]
        shown = "nan" if np.isnan(value) else repr(float(value))
        raise ValueError(f"{name}[{where}] is {shown}; {name} must be in [0, 1]")


def descending_order(probabilities: NDArray[np.float64], axis: int = -1) -> NDArray[np.intp]:
    """Indices that sort ``probabilities`` by decreasing value along ``axis``.

    Ties are broken deterministically by the lower original index first (a stable sort of the
    negated values), so the same input always selects the same items.
    """
    return np.argsort(-probabilities, axis=axis, kind="stable")


def sorted_descending(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """``values`` sorted in decreasing order along the last axis (a fast unstable sort)."""
    return np.sort(values, axis=-1)[..., ::-1]


def top_k_mask(values: NDArray[np.float64], sorted_desc: NDArray[np.float64],
               k: NDArray[np.intp]) -> NDArray[np.bool_]:
    """Row-wise mask of the ``k[i]`` largest entries of ``values[i]``, ties by lower index.

    Same selection as taking ``descending_order(values)[:, :k]`` but without an (expensive)
    stable argsort: the ``k``-th largest value ``t`` is read from ``sorted_desc``; every entry
    above ``t`` is selected, and entries equal to ``t`` are taken from the left until ``k`` are
    selected.
    """
    width = values.shape[1]
    if width == 0:
        return np.zeros(values.shape, dtype=bool)
    column = np.clip(k - 1, 0, width - 1)
    threshold = np.take_along_axis(sorted_desc, column[:, None], axis=1)
    above = values > threshold
    ties = values == threshold
    need = k[:, None] - above.sum(axis=1, keepdims=True)
    mask = above | (ties & (np.cumsum(ties, axis=1) <= need))
    mask[k == 0] = False
    return mask
