"""Operating points: what a grid's best thresholds are, for a target and constraints.

Public face of the wing:

DecisionSpec
    What a decision asks of a grid, stated once: target, rule, objective, constraints,
    coverage, recall bound and level (:mod:`._decision_spec`); every function below takes it.
objective_names, capacity_objective_names, register_objective, unregister_objective,
objective_parameters, parameter_owners
    The registry of objectives, one class each (:class:`Objective`, :mod:`._objective_registry`).
Target, Objective, Constraints, OBJECTIVES
    The business target (the precision ``m`` the next flagged rows must reach to be worth
    flagging, stored as the slope ``r = m / (1 - m)`` of ``TP - r FP``; :mod:`._target`),
    the objective an operating point maximises and the constraints it meets
    (:mod:`._objectives`; the geometry of the frontier is in :mod:`._frontier`).
OperatingPoint, METHODS, point_at, estimated_recall
    A chosen threshold tuple with its counts and evidence (:mod:`._operating_point`).
optimize, optimize_each, prepare_graph_paths, graph_batch_size
    Thresholds by one of the methods (:mod:`._optimize`): the exact max-area monotone path
    (:func:`max_area_path`, :func:`max_area_paths`, :mod:`._lattice_path`), the paper's
    parametric path (:func:`fit_analytic_path`, :class:`AnalyticFit`, :mod:`._analytic`), the
    concave hull of all cells.
max_area_path, max_area_paths, fit_analytic_path, AnalyticFit
    The two path methods, usable alone.
Resolution, lattice_resolution, refine, resolution_check
    Whether finer candidate thresholds could beat a point: a bound from the grid alone
    (:mod:`._resolution`), and re-binning on the rows (:mod:`._refine`).
"""

from costlib.thresholds.point._analytic import AnalyticFit, fit_analytic_path
from costlib.thresholds.point._decision_spec import DecisionSpec
from costlib.thresholds.point._lattice_path import max_area_path, max_area_paths
from costlib.thresholds.point._objective_registry import (
    capacity_objective_names,
    objective_names,
    objective_parameters,
    parameter_owners,
    register_objective,
    unregister_objective,
)
from costlib.thresholds.point._objectives import OBJECTIVES, Constraints, Objective
from costlib.thresholds.point._operating_point import (
    METHODS,
    OperatingPoint,
    estimated_recall,
    point_at,
)
from costlib.thresholds.point._optimize import (
    graph_batch_size,
    optimize,
    optimize_each,
    prepare_graph_paths,
)
from costlib.thresholds.point._refine import refine, resolution_check
from costlib.thresholds.point._resolution import Resolution, lattice_resolution
from costlib.thresholds.point._target import Target

__all__ = [
    "METHODS",
    "OBJECTIVES",
    "AnalyticFit",
    "Constraints",
    "DecisionSpec",
    "Objective",
    "OperatingPoint",
    "Resolution",
    "Target",
    "capacity_objective_names",
    "estimated_recall",
    "fit_analytic_path",
    "graph_batch_size",
    "lattice_resolution",
    "max_area_path",
    "max_area_paths",
    "objective_names",
    "objective_parameters",
    "optimize",
    "optimize_each",
    "parameter_owners",
    "point_at",
    "prepare_graph_paths",
    "refine",
    "register_objective",
    "resolution_check",
    "unregister_objective",
]
