"""What one shared review capacity is compared with, and the next period's scale of a group.

:func:`volume_scales` gives each group's ``volume_scale`` ``a_g`` (its expected rows next period
over its rows in the grid, :func:`grid_rows`), by which
:mod:`costlib.thresholds.capacity._group_frontiers` scales its volumes and utilities.
:func:`split_baselines` evaluates the fixed splits of the capacity an allocation
(:mod:`costlib.thresholds.capacity._allocation`) is compared with: equal shares and shares
proportional
to traffic (:func:`split_shares`), each group taking its best candidate within its share
(:func:`utility_within`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from costlib._messages import plain
from costlib.thresholds.capacity._group_frontiers import GroupFrontier, _per_group
from costlib.thresholds.grid._grid import ThresholdGrid

__all__ = [
    "SplitBaselines",
    "grid_rows",
    "split_baselines",
    "split_shares",
    "utility_within",
    "volume_scales",
]


# ----------------------------------------------------------------------------- next period
def volume_scales(
    rows: Mapping[str, float],
    *,
    period_share: float = 1.0,
    expected_rows: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Each group's ``volume_scale`` ``a_g``: its expected rows next period over its rows now.

    The capacity is for the *next* period, the grids count the period read. A group's flagged
    volume and utility next period are taken as ``a_g`` times those of the grid (its score
    distribution and prevalence stay, its traffic changes):

    .. math:: a_g = \\frac{\\hat n_g}{n_g}, \\qquad
              \\hat n_g = \\text{expected\\_rows}[g] \\text{ if given, else }
              \\text{period\\_share} \\cdot n_g,

    with ``n_g`` the group's rows in the grid (weighted; rated and unrated, scored or not:
    :func:`grid_rows`). ``period_share`` is next period's length over the period read (e.g.
    ``1/7``: capacity per day, a week of data), the same for every group without a forecast.

    Parameters
    ----------
    rows : mapping of group to float
        ``n_g > 0``.
    period_share : float
        ``> 0``.
    expected_rows : mapping of group to float, optional
        ``n̂_g > 0`` per group (a forecast); groups not in ``rows`` are refused.

    Returns
    -------
    dict of str to float
    """
    share = float(period_share)
    if not (math.isfinite(share) and share > 0):
        raise ValueError(f"period_share must be finite and > 0, got {plain(period_share)}")
    groups = list(rows)
    expected = _per_group("expected_rows", expected_rows, groups, math.nan, positive=True)
    out = {}
    for g, n_hat in zip(groups, expected.tolist(), strict=True):
        n = float(rows[g])
        if not (math.isfinite(n) and n > 0):
            raise ValueError(f"rows[{g!r}] must be finite and > 0, got {plain(rows[g])}")
        out[g] = share if math.isnan(n_hat) else n_hat / n
    return out


def grid_rows(grid: ThresholdGrid) -> float:
    """Weighted rows of a grid: rated positives and negatives and unrated rows, every cell
    (the underflow cell of rows no classifier scored included)."""
    total = math.fsum((float(grid.pos.sum()), float(grid.neg.sum())))
    return total + (float(grid._unrated().sum()) if grid.has_unrated else 0.0)


# ----------------------------------------------------------------------------- baselines
def utility_within(frontier: GroupFrontier, volume: float) -> tuple[float, float, float]:
    """The group's best candidate with scaled volume ``<= volume`` (its own choice had it
    ``volume`` reviews to itself): ``(utility, true positives, volume)``; zeros when no
    candidate fits (then it flags nothing; a ``min_volume`` above ``volume``, or no
    candidate at all)."""
    i = int(np.searchsorted(frontier.volume, volume, side="right")) - 1
    if i < 0:
        return 0.0, 0.0, 0.0
    return (float(frontier.utility[i]), float(frontier.true_positives[i]),
            float(frontier.volume[i]))


@dataclass(frozen=True)
class SplitBaselines:
    """What fixed splits of the same capacity give (sums over groups, exact ``fsum``).

    ``equal_*``: every group of the allocation gets ``C / G``; ``proportional_*``: group ``g``
    gets ``C n̂_g / sum n̂`` (``traffic``: its expected rows). Each group then takes its best
    candidate within its share (:func:`utility_within`).
    """

    equal_utility: float
    equal_true_positives: float
    equal_volume: float
    proportional_utility: float
    proportional_true_positives: float
    proportional_volume: float


def split_shares(traffic: Mapping[str, float], capacity: float) -> dict[str, tuple[float, float]]:
    """Per group its ``(equal, proportional)`` share of ``capacity``: ``C / G`` and
    ``C n̂_g / sum n̂`` (``sum`` exact)."""
    total = math.fsum(float(v) for v in traffic.values())
    n = len(traffic)
    return {g: (capacity / n, capacity * float(v) / total if total > 0 else capacity / n)
            for g, v in traffic.items()}


def split_baselines(frontiers: Mapping[str, GroupFrontier], traffic: Mapping[str, float],
                    capacity: float) -> SplitBaselines:
    """The equal and the traffic-proportional split of ``capacity`` (:class:`SplitBaselines`).

    ``frontiers`` must hold each group's whole Pareto set (not only its hull vertices)."""
    shares = split_shares({g: traffic[g] for g in frontiers}, capacity)
    equal = [utility_within(f, shares[g][0]) for g, f in frontiers.items()]
    prop = [utility_within(f, shares[g][1]) for g, f in frontiers.items()]
    return SplitBaselines(*(math.fsum(v[i] for v in equal) for i in range(3)),
                          *(math.fsum(v[i] for v in prop) for i in range(3)))
