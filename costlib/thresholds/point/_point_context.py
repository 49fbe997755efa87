"""What reading a point off a grid needs besides its curve: the grid, the
:class:`~costlib.thresholds.DecisionSpec`, the method, the constraints with the grid's ``P``
and coverage (:class:`PointContext`), built once per call by
:func:`costlib.thresholds.point._operating_point.point_at` and the methods of
:func:`~costlib.thresholds.optimize`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._decision_spec import DecisionSpec
from costlib.thresholds.point._objectives import Constraints, Objective
from costlib.thresholds.point._target import Target

__all__ = ["PointContext"]


@dataclass(frozen=True)
class PointContext:
    """What every method needs besides its curve."""

    grid: ThresholdGrid
    spec: DecisionSpec
    method: str
    constraints: Constraints  # the spec's, with the grid's P of min_recall
    covered: NDArray[np.bool_] | None  # None: every tuple is covered

    @property
    def rule(self) -> str:
        return self.spec.rule

    @property
    def target(self) -> Target | None:
        return self.spec.target

    @property
    def objective(self) -> Objective:
        return self.spec.objective

    @property
    def max_unrated_share(self) -> float:
        return self.spec.max_unrated_share

    @property
    def recall_level(self) -> float:
        return self.spec.recall_level
