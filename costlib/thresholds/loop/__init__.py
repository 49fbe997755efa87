"""The loop: recalibration per group, and moving away from the thresholds in force on evidence.

Public face of the wing:

BootstrapGrids, SparseBootstrapGrids, BootstrapResult, confidence_intervals
    Poisson bootstrap replicates of a grid's counts, dense or sparse, and percentile intervals
    of the re-optimised points (:mod:`._bootstrap`).
GroupResult, ALL_GROUPS, NOT_SWITCHED_ON, PROPOSED, ReasonCode, is_sufficient,
apply_fallback, optimize_group, recalibrate_grids
    One group's points from its grid, with the fallback to a parent grid when the group has too
    few rated rows (:mod:`._recalibration`).
InForcePolicy, DEFAULT_POLICY
    When a method's new point may replace the thresholds in force: one frozen value built
    from the config's ``in_force`` section and passed whole (:mod:`._policy`).
DEFAULT_EVIDENCE_Z, MoveEvidence, move_evidence, LowerBoundMove, lower_bound_move
    Whether a new point beats the one in force: the gain against its bootstrap standard error,
    or a lower confidence bound of the gain (:mod:`._move_evidence`), reviewed on the census of
    rows rated with certainty (:mod:`._census_review`).
"""

from costlib.thresholds.loop._bootstrap import (
    BootstrapGrids,
    BootstrapResult,
    SparseBootstrapGrids,
    confidence_intervals,
)
from costlib.thresholds.loop._move_evidence import (
    DEFAULT_EVIDENCE_Z,
    LowerBoundMove,
    MoveEvidence,
    lower_bound_move,
    move_evidence,
)
from costlib.thresholds.loop._policy import DEFAULT_POLICY, InForcePolicy
from costlib.thresholds.loop._recalibration import (
    ALL_GROUPS,
    NOT_SWITCHED_ON,
    PROPOSED,
    GroupResult,
    ReasonCode,
    apply_fallback,
    is_sufficient,
    optimize_group,
    recalibrate_grids,
)

__all__ = [
    "ALL_GROUPS",
    "DEFAULT_EVIDENCE_Z",
    "DEFAULT_POLICY",
    "NOT_SWITCHED_ON",
    "PROPOSED",
    "BootstrapGrids",
    "BootstrapResult",
    "GroupResult",
    "InForcePolicy",
    "LowerBoundMove",
    "MoveEvidence",
    "ReasonCode",
    "SparseBootstrapGrids",
    "apply_fallback",
    "confidence_intervals",
    "is_sufficient",
    "lower_bound_move",
    "move_evidence",
    "optimize_group",
    "recalibrate_grids",
]
