"""Binning: the rows a grid counts, and the candidate thresholds it counts them at.

Public face of the wing (the engine's other wings and the pipelines import these names):

RULES, RULE_ALIASES, design_weights, ht_variance_weights
    The decision rules (``any``: flag a row when some classifier's score reaches its
    threshold; ``all``: when every one does) and how a row's weight ``w`` and audit probability
    ``pi`` become its grid weight ``w / pi`` and its variance weight ``w^2 (1 - pi) / pi^2``
    (:mod:`._rows`).
DEFAULT_DECISION_EDGES, uniform_edges, quantile_edges, decision_edges,
decision_edges_from_sketch, with_thresholds, check_edges, fine_histogram,
quantile_edges_from_histogram
    Candidate thresholds per classifier (:mod:`._edges`): evenly spaced, at score quantiles,
    or where the decision is made (every rated positive's score while they fit), from rows or
    from a one-pass sketch; a fine histogram's quantiles for merged passes.
ScoreSketch, EdgeSketch, SketchingBinner
    One-pass sketches of the scores (:mod:`._score_sketch`) and a binner that locates rows in
    their cells while it sketches (:mod:`._binned_sketch`, :mod:`._bin_locator`,
    :mod:`._cells`).
"""

from costlib.thresholds.binning._binned_sketch import SketchingBinner
from costlib.thresholds.binning._edges import (
    DEFAULT_DECISION_EDGES,
    check_edges,
    decision_edges,
    decision_edges_from_sketch,
    fine_histogram,
    quantile_edges,
    quantile_edges_from_histogram,
    uniform_edges,
    with_thresholds,
)
from costlib.thresholds.binning._rows import (
    RULE_ALIASES,
    RULES,
    design_weights,
    ht_variance_weights,
)
from costlib.thresholds.binning._score_sketch import EdgeSketch, ScoreSketch

__all__ = [
    "DEFAULT_DECISION_EDGES", "RULES", "RULE_ALIASES", "EdgeSketch", "ScoreSketch",
    "SketchingBinner", "check_edges", "decision_edges", "decision_edges_from_sketch",
    "design_weights", "fine_histogram", "ht_variance_weights", "quantile_edges",
    "quantile_edges_from_histogram", "uniform_edges", "with_thresholds",
]
