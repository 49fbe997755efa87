"""Thresholds for classifier ensembles: grids, candidate thresholds, operating points.

The engine of paper 002 (rated predicted positives on a lattice of candidate thresholds per
classifier) and what is built on it, in six wings, each importing only the ones above it:

1. :mod:`costlib.thresholds.binning`: the rows a grid counts and the candidate thresholds;
2. :mod:`costlib.thresholds.grid`: grids, sparse partial grids, recall intervals from the audit;
3. :mod:`costlib.thresholds.point`: targets, objectives and operating points;
4. :mod:`costlib.thresholds.loop`: recalibration per group, bootstrap, moves on evidence;
5. :mod:`costlib.thresholds.capacity`: one review capacity shared by many groups;
6. :mod:`costlib.thresholds.plots`: figures.

Public API, by wing:

RULES, uniform_edges, quantile_edges, decision_edges, decision_edges_from_sketch,
with_thresholds, DEFAULT_DECISION_EDGES, ScoreSketch, EdgeSketch
    Candidate thresholds from rows or from one-pass score sketches (binning).
ThresholdGrid, RecallBounds, recall_bounds, total_positives_bounds, RECALL_BOUNDS
    Weighted counts of rated positives, negatives and unrated rows on a lattice; intervals of
    recall and of all positives from the audit, valid when it finds few or no missed
    positives (grid).
DecisionSpec, Target, Objective, Constraints, OBJECTIVES, objective_names,
capacity_objective_names, register_objective, unregister_objective, optimize, optimize_each,
point_at, estimated_recall, OperatingPoint, METHODS, max_area_path, max_area_paths,
fit_analytic_path, AnalyticFit, Resolution, lattice_resolution, refine, resolution_check
    What an operating point optimises and under which constraints; operating points on a grid
    by the exact max-area path or the analytic fit; whether the lattice is fine enough where
    the decision is made (point).
BootstrapGrids, BootstrapResult, confidence_intervals, recalibrate_grids, optimize_group,
apply_fallback, GroupResult, ALL_GROUPS, InForcePolicy, move_evidence, MoveEvidence,
lower_bound_move, LowerBoundMove, DEFAULT_EVIDENCE_Z
    Poisson bootstrap of a grid's counts; per-group recalibration that moves away from the
    point in force only on evidence (loop).
allocate_capacity, CapacityAllocation, GroupAllocation, ALLOCATION_OBJECTIVES, split_baselines,
SplitBaselines
    One review capacity shared by many groups, on each group's frontier, against fixed splits
    of it (capacity).
plot_pn_curves, plot_threshold_surfaces, CurveSpec, plot_audit_pn_curves, audit_frontiers
    Figures (matplotlib, the ``plots`` extra; plots).
"""

from costlib.thresholds.binning import (
    DEFAULT_DECISION_EDGES,
    RULES,
    EdgeSketch,
    ScoreSketch,
    decision_edges,
    decision_edges_from_sketch,
    quantile_edges,
    uniform_edges,
    with_thresholds,
)
from costlib.thresholds.capacity import (
    ALLOCATION_OBJECTIVES,
    CapacityAllocation,
    GroupAllocation,
    SplitBaselines,
    allocate_capacity,
    split_baselines,
)
from costlib.thresholds.grid import (
    RECALL_BOUNDS,
    RecallBounds,
    ThresholdGrid,
    recall_bounds,
    total_positives_bounds,
)
from costlib.thresholds.loop import (
    ALL_GROUPS,
    DEFAULT_EVIDENCE_Z,
    BootstrapGrids,
    BootstrapResult,
    GroupResult,
    InForcePolicy,
    LowerBoundMove,
    MoveEvidence,
    apply_fallback,
    confidence_intervals,
    lower_bound_move,
    move_evidence,
    optimize_group,
    recalibrate_grids,
)
from costlib.thresholds.plots import (
    CurveSpec,
    audit_frontiers,
    plot_audit_pn_curves,
    plot_pn_curves,
    plot_threshold_surfaces,
)
from costlib.thresholds.point import (
    METHODS,
    OBJECTIVES,
    AnalyticFit,
    Constraints,
    DecisionSpec,
    Objective,
    OperatingPoint,
    Resolution,
    Target,
    capacity_objective_names,
    estimated_recall,
    fit_analytic_path,
    lattice_resolution,
    max_area_path,
    max_area_paths,
    objective_names,
    optimize,
    optimize_each,
    point_at,
    refine,
    register_objective,
    resolution_check,
    unregister_objective,
)

__all__ = [
    "ALLOCATION_OBJECTIVES",
    "ALL_GROUPS",
    "DEFAULT_DECISION_EDGES",
    "DEFAULT_EVIDENCE_Z",
    "METHODS",
    "OBJECTIVES",
    "RECALL_BOUNDS",
    "RULES",
    "AnalyticFit",
    "BootstrapGrids",
    "BootstrapResult",
    "CapacityAllocation",
    "Constraints",
    "CurveSpec",
    "DecisionSpec",
    "EdgeSketch",
    "GroupAllocation",
    "GroupResult",
    "InForcePolicy",
    "LowerBoundMove",
    "MoveEvidence",
    "Objective",
    "OperatingPoint",
    "RecallBounds",
    "Resolution",
    "ScoreSketch",
    "SplitBaselines",
    "Target",
    "ThresholdGrid",
    "allocate_capacity",
    "apply_fallback",
    "audit_frontiers",
    "capacity_objective_names",
    "confidence_intervals",
    "decision_edges",
    "decision_edges_from_sketch",
    "estimated_recall",
    "fit_analytic_path",
    "lattice_resolution",
    "lower_bound_move",
    "max_area_path",
    "max_area_paths",
    "move_evidence",
    "objective_names",
    "optimize",
    "optimize_each",
    "optimize_group",
    "plot_audit_pn_curves",
    "plot_pn_curves",
    "plot_threshold_surfaces",
    "point_at",
    "quantile_edges",
    "recalibrate_grids",
    "recall_bounds",
    "refine",
    "register_objective",
    "resolution_check",
    "split_baselines",
    "total_positives_bounds",
    "uniform_edges",
    "unregister_objective",
    "with_thresholds",
]
