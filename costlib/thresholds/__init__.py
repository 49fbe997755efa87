"""Thresholds for classifier ensembles: grids, candidate thresholds, operating points.

The engine of paper 002 (rated predicted positives on a lattice of candidate thresholds per
classifier) and what is built on it. Public API, by module:

ThresholdGrid, RULES
    Weighted counts of rated positives, negatives and unrated rows on a lattice (:mod:`._grid`),
    of rows validated as they enter it (:mod:`._rows`), coded by bin cell (:mod:`._cells`) and
    counted in sparse partials (:mod:`._sparse`).
uniform_edges, quantile_edges, decision_edges, decision_edges_from_sketch, with_thresholds,
DEFAULT_DECISION_EDGES, ScoreSketch, EdgeSketch, Resolution, lattice_resolution, refine,
resolution_check
    Candidate thresholds (:mod:`._edges`), from one-pass score sketches
    (:class:`ScoreSketch`, :class:`EdgeSketch`, :mod:`._score_sketch`); whether a lattice is
    fine enough where the decision is made (:func:`lattice_resolution`, :func:`refine`,
    :mod:`._resolution`).
Target, Objective, Constraints, OBJECTIVES
    What an operating point optimises and under which constraints (:mod:`._target`,
    :mod:`._objectives`).
optimize, optimize_each, point_at, estimated_recall, OperatingPoint, METHODS, max_area_path,
max_area_paths, fit_analytic_path, AnalyticFit
    Operating points on a grid (:mod:`._operating_point`), found by :mod:`._optimize` with the
    exact max-area path (:func:`max_area_path`, :mod:`._lattice_path`) and the analytic fit
    (:func:`fit_analytic_path`, :mod:`._analytic`).
RecallBounds, recall_bounds, total_positives_bounds, RECALL_BOUNDS
    Intervals of recall and of all positives from the audit, valid when it finds few or no
    missed positives, and the evidence behind them (:mod:`._recall_bounds`).
BootstrapGrids, BootstrapResult, confidence_intervals
    Poisson bootstrap of a grid's counts (:mod:`._bootstrap`).
recalibrate_grids, optimize_group, apply_fallback, GroupResult, ALL_GROUPS, move_evidence,
MoveEvidence, lower_bound_move, LowerBoundMove, DEFAULT_EVIDENCE_Z
    Per-group recalibration (:mod:`._recalibration`); moves away from the point in force only on
    evidence (:func:`move_evidence`, :func:`lower_bound_move`, :mod:`._move_evidence`).
allocate_capacity, CapacityAllocation, GroupAllocation, ALLOCATION_OBJECTIVES, split_baselines,
SplitBaselines
    One review capacity shared by many groups (:mod:`._allocation`), on each group's frontier
    (:mod:`._group_frontiers`), against fixed splits of it (:mod:`._split_baselines`).
plot_pn_curves, plot_threshold_surfaces, CurveSpec, plot_audit_pn_curves, audit_frontiers
    Figures (matplotlib, the ``plots`` extra; :mod:`._plots`, :mod:`._audit_plots`).
"""

from ._allocation import CapacityAllocation, GroupAllocation, allocate_capacity
from ._analytic import AnalyticFit, fit_analytic_path
from ._audit_plots import audit_frontiers, plot_audit_pn_curves
from ._bootstrap import BootstrapGrids, BootstrapResult, confidence_intervals
from ._edges import (
    DEFAULT_DECISION_EDGES,
    decision_edges,
    decision_edges_from_sketch,
    quantile_edges,
    uniform_edges,
    with_thresholds,
)
from ._grid import ThresholdGrid
from ._group_frontiers import ALLOCATION_OBJECTIVES
from ._lattice_path import max_area_path, max_area_paths
from ._move_evidence import (
    DEFAULT_EVIDENCE_Z,
    LowerBoundMove,
    MoveEvidence,
    lower_bound_move,
    move_evidence,
)
from ._objectives import OBJECTIVES, Constraints, Objective
from ._operating_point import METHODS, OperatingPoint, estimated_recall, point_at
from ._optimize import optimize, optimize_each
from ._plots import CurveSpec, plot_pn_curves, plot_threshold_surfaces
from ._recalibration import (
    ALL_GROUPS,
    GroupResult,
    apply_fallback,
    optimize_group,
    recalibrate_grids,
)
from ._recall_bounds import RECALL_BOUNDS, RecallBounds, recall_bounds, total_positives_bounds
from ._resolution import Resolution, lattice_resolution, refine, resolution_check
from ._rows import RULES
from ._score_sketch import EdgeSketch, ScoreSketch
from ._split_baselines import SplitBaselines, split_baselines
from ._target import Target

__all__ = [
    "ALLOCATION_OBJECTIVES", "ALL_GROUPS", "DEFAULT_DECISION_EDGES", "DEFAULT_EVIDENCE_Z",
    "METHODS", "OBJECTIVES", "RECALL_BOUNDS", "RULES",
    "AnalyticFit", "BootstrapGrids", "BootstrapResult", "CapacityAllocation", "Constraints",
    "CurveSpec", "EdgeSketch", "GroupAllocation", "GroupResult", "LowerBoundMove", "MoveEvidence",
    "Objective", "OperatingPoint", "RecallBounds", "Resolution", "ScoreSketch", "SplitBaselines",
    "Target",
    "ThresholdGrid",
    "allocate_capacity", "apply_fallback", "audit_frontiers", "confidence_intervals",
    "decision_edges", "decision_edges_from_sketch", "estimated_recall", "fit_analytic_path",
    "lattice_resolution", "lower_bound_move", "max_area_path", "max_area_paths", "move_evidence",
    "optimize", "optimize_each", "optimize_group", "plot_audit_pn_curves", "plot_pn_curves",
    "plot_threshold_surfaces", "point_at", "quantile_edges", "recalibrate_grids",
    "recall_bounds", "refine",
    "resolution_check", "split_baselines", "total_positives_bounds", "uniform_edges",
    "with_thresholds",
]
