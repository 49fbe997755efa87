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
