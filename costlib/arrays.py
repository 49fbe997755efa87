"""Array helpers where numpy's general function is the wrong tool for our sizes."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = ["sorted_distinct"]

_S = TypeVar("_S", bound=np.generic)


def sorted_distinct(values: NDArray[_S]) -> NDArray[_S]:
    """The sorted distinct values of a 1-d array: what ``np.unique(values)`` returns.

    One sort, then the first of each run of equal values (``s[0]`` and every ``s[i]`` with
    ``s[i] != s[i - 1]``). Since numpy 2.3, ``np.unique`` of integers goes through a hash table,
    which for millions of distinct values is tens of times slower than sorting them; item ids
    and sparse cell indices are exactly that. NaNs, if any, are kept apart as ``np.sort`` puts
    them (``np.unique`` folds them into one); the callers pass integers.
    """
    ordered = np.sort(values.ravel())
    if ordered.size < 2:
        return ordered
    first = np.empty(ordered.size, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]
