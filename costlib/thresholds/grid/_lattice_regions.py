"""Lattice sums over the regions two threshold tuples split the rows into.

With ``X`` a lattice of sums over the rows each tuple flags (:func:`costlib.thresholds.grid._grid.
lattice_counts` of a per-cell histogram), the sums over the rows flagged by *both* of a cell
``c`` and a fixed tuple ``f``, by one of them only, or by exactly one, follow for every ``c``
at once from ``X`` at ``c``, at ``f`` and at the cell ``min(c, f)`` or ``max(c, f)``. The
evidence rule (:mod:`costlib.thresholds.loop._move_evidence`) and the census review
(:mod:`costlib.thresholds.loop._census_review`) read their variances and regions from these.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["flagged_both", "flagged_by_one", "one_sided"]


def flagged_both(lattice: NDArray[np.float64], index: Sequence[int], rule: str
                 ) -> NDArray[np.float64]:
    """``X(c ∧ f)`` at every cell ``c``: the lattice sum over rows flagged at ``c`` *and* at
    the fixed tuple ``f = index``.

    ``all``: flagged at both = flagged at ``max(c, f)``. ``any``: flagged at both = flagged at
    ``c`` + flagged at ``f`` - flagged at ``min(c, f)`` (inclusion-exclusion over the
    unflagged boxes, whose intersection is the box below ``min(c, f)``).
    """
    pick = np.minimum if rule == "any" else np.maximum
    grids = np.ix_(*[pick(np.arange(n), int(i)) for n, i in zip(lattice.shape, index,
                                                                strict=True)])
    at_extreme = lattice[grids]
    if rule == "all":
        return at_extreme
    return lattice + lattice[tuple(int(i) for i in index)] - at_extreme


def one_sided(lattice: NDArray[np.float64], index: Sequence[int], rule: str
              ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(X(c \\ f), X(f \\ c))`` at every cell ``c``: lattice sums over the rows flagged at
    ``c`` but not at ``f = index``, and at ``f`` but not at ``c``."""
    both = flagged_both(lattice, index, rule)
    at_f = lattice[tuple(int(i) for i in index)]
    return np.maximum(lattice - both, 0.0), np.maximum(at_f - both, 0.0)


def flagged_by_one(lattice: NDArray[np.float64], index: Sequence[int], rule: str
                   ) -> NDArray[np.float64]:
    """``X(c) + X(f) - 2 X(c ∧ f)`` at every cell ``c``: the lattice sum over the rows flagged
    by exactly one of ``c`` and ``f = index``."""
    both = flagged_both(lattice, index, rule)
    return np.maximum(lattice + lattice[tuple(int(i) for i in index)] - 2.0 * both, 0.0)
