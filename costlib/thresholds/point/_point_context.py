"""What reading a point off a grid needs besides its curve: the grid, the rule, the method, the
target, the objective, the constraints and coverage (:class:`PointContext`), built once per
call by :func:`costlib.thresholds.point._operating_point.point_at` and the methods of
:func:`~costlib.thresholds.optimize`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.grid._recall_bounds import DEFAULT_RECALL_LEVEL
from costlib.thresholds.point._objectives import Constraints, Objective
from costlib.thresholds.point._target import Target

__all__ = ["PointContext"]


@dataclass(frozen=True)
class PointContext:
    """What every method needs besides its curve."""

    grid: ThresholdGrid
    rule: str
    method: str
    target: Target | None
    objective: Objective
    constraints: Constraints
    max_unrated_share: float
    covered: NDArray[np.bool_] | None  # None: every tuple is covered
    recall_level: float = DEFAULT_RECALL_LEVEL
