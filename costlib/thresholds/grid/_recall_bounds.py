"""Recall and total positives of an audited grid: intervals valid with few or no audit events.

A grid built with audit probabilities keeps, per lattice cell, the positives rated with
certainty (``census``, flagged rows, ``π = 1``), the Horvitz–Thompson weight of audited
positives (``pos - census``) and what the design could have sampled (``design``: ``W = sum
w²(1-π)/π`` and ``A = sum π`` over the rows with ``0 < π < 1``). For a threshold tuple ``t`` the
positives split into those ``t`` flags (caught, ``C``) and the rest (missed, ``M``); each is a
certain part plus an audited part. The audited part is bounded with
:func:`costlib.audit.weighted_poisson_interval` (Fay & Feuer 1997: a gamma bound on a
weighted sum of Poisson counts, exactly Garwood's Poisson bound for one stratum), with the
cells as strata:

- each cell's sampling fraction ``π_c`` solves ``W_c / A_c = (1 - π_c) / π_c²`` (exact for rows
  of weight 1 sharing one ``π`` in the cell, as audit strata relative to the point in force
  do: a stratum is a band of lattice depth); ``ω_c = 1 / π_c``;
- ``Y = sum_c Y_c`` (audited positive weight), ``v = sum_c ω_c Y_c`` (``= sum ω² x``), and
  ``ω_M`` the largest ``ω_c`` over the cells of the region any row could be audited in.

``P`` (all positives) is bounded likewise over the whole grid, and recall ``C / (C + M)`` by
:func:`costlib.audit.recall_interval`. The evidence behind the bound (per stratum, i.e. per
distinct ``π_c``: rows, audited rows and positives found among the missed) is returned with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib.audit._poisson_bounds import recall_interval, weighted_poisson_interval
from costlib.bounds import BOUNDS
from costlib.thresholds.binning._rows import DESIGN_EXPECTED_SCALE, check_rule
from costlib.thresholds.grid._grid import ThresholdGrid

__all__ = ["RecallBounds", "cell_probabilities", "recall_bounds", "total_positives_bounds"]

#: Default two-sided level of the recall interval (each end errs with at most 5%).
DEFAULT_RECALL_LEVEL = 0.9


@dataclass(frozen=True)
class RecallBounds:
    """Intervals of ``P`` and of recall at one threshold tuple, with the audit evidence.

    ``strata`` lists, per audit stratum (distinct sampling probability ``pi``) of the rows the
    tuple does not flag: ``pi``, ``rows`` (expected from the design: ``sum π / π``),
    ``audited`` (audited rated rows) and ``positives`` (audited positives found), all in row
    weight units. ``positives_missed_found`` and ``audited_missed`` are their sums.
    """

    level: float
    total_positives_low: float
    total_positives_high: float
    recall_low: float | None
    recall_high: float | None
    positives_missed_found: float
    audited_missed: float
    strata: tuple[dict[str, float], ...]

    @property
    def recall_width(self) -> float | None:
        """``recall_high - recall_low`` (None when either is None)."""
        if self.recall_low is None or self.recall_high is None:
            return None
        return self.recall_high - self.recall_low

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "total_positives_low": self.total_positives_low,
                "total_positives_high": self.total_positives_high,
                "recall_low": self.recall_low, "recall_high": self.recall_high,
                "positives_missed_found": self.positives_missed_found,
                "audited_missed": self.audited_missed, "strata": [dict(s) for s in self.strata]}


def cell_probabilities(grid: ThresholdGrid) -> NDArray[np.float64]:
    """Effective sampling probability ``π_c`` of every cell (1 where no row could be audited).

    Solves ``r π² + π - 1 = 0`` with ``r = W_c / A_c`` (the module docstring); where the design
    holds nothing but audited positives were found (quantisation), falls back to the variance
    channel, ``var_c / Y_c = (1 - π) / π``. Computed once per grid.
    """
    return grid._memo(("recall", "cell_pi"), lambda: _cell_probabilities(grid))


def _cell_probabilities(grid: ThresholdGrid) -> NDArray[np.float64]:
    if grid.design is None:
        raise ValueError("the grid carries no audit design (build it with audit_probabilities)")
    worst = grid.design[0]
    expected = grid.design[1] / DESIGN_EXPECTED_SCALE
    pi = np.ones(worst.shape)
    has = expected > 0
    r = np.zeros(worst.shape)
    np.divide(worst, expected, out=r, where=has)
    pos_r = has & (r > 0)
    pi[pos_r] = (-1.0 + np.sqrt(1.0 + 4.0 * r[pos_r])) / (2.0 * r[pos_r])
    audited = _audited_positives(grid)
    var = grid.variance[1] if grid.variance is not None else np.zeros(worst.shape)
    lost = ~has & (audited > 0) & (var > 0)
    pi[lost] = audited[lost] / (audited[lost] + var[lost])
    return pi


def _audited_positives(grid: ThresholdGrid) -> NDArray[np.float64]:
    """Horvitz–Thompson weight of audited positives per cell (``pos`` minus the census)."""
    census = 0.0 if grid.census is None else grid.census[1]
    return np.maximum(grid.pos - census, 0.0)


def _flagged_cells(grid: ThresholdGrid, index: tuple[int, ...], rule: str) -> NDArray[np.bool_]:
    """Cells a threshold tuple (lattice indices) flags: ``b_j > t_j`` for any / all ``j``."""
    rule = check_rule(rule)
    above = [np.arange(n).reshape([-1 if a == j else 1 for a in range(grid.k)]) > index[j]
             for j, n in enumerate(grid.shape)]
    out = np.broadcast_to(above[0], grid.shape)
    for a in above[1:]:
        out = (out | a) if rule == "any" else (out & a)
    return np.asarray(out, dtype=bool)


def _region_inputs(grid: ThresholdGrid, mask: NDArray[np.bool_], pi: NDArray[np.float64]
                   ) -> tuple[float, float, float, float]:
    """``(known, Y, v, ω_M)`` of the positives in the cells of ``mask``."""
    census = 0.0 if grid.census is None else float(grid.census[1][mask].sum())
    y_c = _audited_positives(grid)[mask]
    omega = 1.0 / pi[mask]
    assert grid.design is not None
    sampled = (grid.design[1][mask] > 0) | (y_c > 0)
    wm = float(omega[sampled].max()) if sampled.any() else 0.0
    return census, float(y_c.sum()), float((y_c * omega).sum()), wm


def total_positives_bounds(grid: ThresholdGrid, level: float = DEFAULT_RECALL_LEVEL
                           ) -> tuple[float, float]:
    """Interval ``(low, high)`` of all positives ``P`` at two-sided ``level``.

    The census positives plus the Fay–Feuer interval of the audited positives over every
    cell (each end errs with at most ``(1 - level) / 2``). Needs a grid with a design.
    """
    _check_level(level)

    def compute() -> tuple[float, float]:
        pi = cell_probabilities(grid)
        known, y, v, wm = _region_inputs(grid, np.ones(grid.shape, dtype=bool), pi)
        lo, hi = weighted_poisson_interval(y, v, wm, (1.0 - level) / 2.0)
        return known + float(lo), known + float(hi)

    return grid._memo(("recall", f"total_{level!r}"), compute)


def _check_level(level: float) -> None:
    if level not in BOUNDS["recall.level"]:
        raise ValueError(f"level must be {BOUNDS['recall.level'].text()}, got {level!r}")


def recall_bounds(grid: ThresholdGrid, index: tuple[int, ...], rule: str = "any",
                  level: float = DEFAULT_RECALL_LEVEL) -> RecallBounds | None:
    """Intervals of ``P`` and of recall at the tuple ``index``, and the audit evidence.

    Parameters
    ----------
    grid : ThresholdGrid
        Built with audit probabilities (``design`` set); None is returned otherwise.
    index : tuple of int
        Lattice indices of the tuple (``OperatingPoint.index``).
    rule : {"any", "all"}
    level : float, default 0.9
        Two-sided level of both intervals.

    Returns
    -------
    RecallBounds or None
        ``recall_low = C_L / (C_L + M_U)`` and ``recall_high = C_U / (C_U + M_L)``
        (:func:`costlib.audit.recall_interval`; Bonferroni between the caught and the missed
        audited parts when both have sampled rows).
    """
    if not grid.has_audit or grid.design is None:
        return None
    _check_level(level)
    pi = cell_probabilities(grid)
    flagged = _flagged_cells(grid, tuple(int(i) for i in index), rule)
    caught = _region_inputs(grid, flagged, pi)
    missed = _region_inputs(grid, ~flagged, pi)
    low, high = recall_interval(caught, missed, level)
    p_low, p_high = total_positives_bounds(grid, level)
    return RecallBounds(level, p_low, p_high, low, high, *_evidence(grid, ~flagged, pi))


def _evidence(grid: ThresholdGrid, mask: NDArray[np.bool_], pi: NDArray[np.float64]
              ) -> tuple[float, float, tuple[dict[str, float], ...]]:
    """Positives found and audited rows among the cells of ``mask``, and per stratum."""
    assert grid.design is not None
    audited_w = np.maximum(grid.pos + grid.neg - (0.0 if grid.census is None
                                                  else grid.census[0] + grid.census[1]), 0.0)
    expected = grid.design[1] / DESIGN_EXPECTED_SCALE
    y_c = _audited_positives(grid)
    sampled = mask & ((expected > 0) | (audited_w > 0))
    pc = pi[sampled]
    keys, stratum = np.unique(np.round(pc, 9), return_inverse=True)
    sums = [np.bincount(stratum, weights=w, minlength=keys.size) for w in
            (expected[sampled] / pc, audited_w[sampled] * pc, y_c[sampled] * pc)]
    strata = [{"pi": float(keys[h]), "rows": float(sums[0][h]), "audited": float(sums[1][h]),
               "positives": float(sums[2][h])}
              for h in range(keys.size - 1, -1, -1)]  # far (smallest π) last: near first
    found = sum(s["positives"] for s in strata)
    audited = sum(s["audited"] for s in strata)
    return found, audited, tuple(strata)


#: Values of ``recall_bound``: what ``min_recall`` is checked against.
RECALL_BOUNDS = ("lower", "point")


def recall_total(grid: ThresholdGrid, recall_bound: str = "lower",
                 recall_level: float = DEFAULT_RECALL_LEVEL) -> float:
    """``P`` of the ``min_recall`` floor ``TP >= r P``: the upper bound of ``P`` by default.

    ``recall_bound="lower"``: ``P_U``, the upper end of :func:`total_positives_bounds` at
    ``recall_level``, so the floor holds on the lower bound ``TP / P_U`` of recall (exactly
    the interval's lower end where the caught positives are rated with certainty, i.e. at
    and above the thresholds in force). ``"point"``: the estimate ``P̂``. A grid without an
    audit design (hand-built, or a bootstrap replicate) has no bound: ``P̂``.
    """
    if recall_bound not in RECALL_BOUNDS:
        raise ValueError(f"recall_bound must be one of {RECALL_BOUNDS}, got {recall_bound!r}")
    if recall_bound == "point" or grid.design is None or not grid.has_audit:
        return grid.total_positives
    return max(total_positives_bounds(grid, recall_level)[1], grid.total_positives)
