"""Audit samples of the rows the thresholds in force did not flag, and their weights.

Ratings exist where items were flagged; an audit sample of unflagged rows, drawn with known
inclusion probabilities, lets grids estimate the whole scored population. Public API, by module:

AuditDesign, AuditSample, audit_sample, audit_uniforms, expected_audits, budget_scale, salt_key
    The sampling design (score strata and their probabilities) and a reproducible draw per item
    (:mod:`._sampling`).
relative_design, lattice_depths, share_cutoffs, stratum_counts, cutoff_strata, lattice_cells,
depth_counts_from_cells, flagged_rows, promote_proposed, proposal_recount, check_shares,
check_steps
    Strata relative to the point in force, by lattice depth (:mod:`._strata`): the design, the
    depth of every lattice cell and the rows per stratum, and the checks of the configured
    shares and steps.
NeymanAllocation, neyman_design, neyman_probabilities, design_variance, gain_spreads
    A design sized from the previous run's counts (:mod:`._neyman`).
weighted_poisson_interval, recall_interval
    Bounds on an audit's positives valid with few or no events (Fay–Feuer gamma bounds) and
    the recall interval they give (:mod:`._poisson_bounds`).
audit_for_recall_width, AuditForWidth
    The audit a requested recall half-width needs, from a model of the last audit that
    depends on its rows, not on how they were cut into strata (:mod:`._recall_power`).
AuditWeights, audit_weights
    Horvitz–Thompson weights and the coverage rule for rows rated with known π
    (:mod:`._weights`); the grid applies them (:class:`costlib.thresholds.ThresholdGrid`).

This package imports nothing from :mod:`costlib.thresholds`; the threshold engine builds on it.
The figure of audit-weighted frontiers is :func:`costlib.thresholds.plot_audit_pn_curves`.
"""

from ._neyman import (
    NeymanAllocation,
    design_variance,
    gain_spreads,
    neyman_design,
    neyman_probabilities,
)
from ._poisson_bounds import recall_interval, weighted_poisson_interval
from ._recall_power import AuditForWidth, audit_for_recall_width
from ._sampling import (
    AuditDesign,
    AuditSample,
    audit_sample,
    audit_uniforms,
    budget_scale,
    expected_audits,
    salt_key,
)
from ._strata import (
    check_shares,
    check_steps,
    cutoff_strata,
    depth_counts_from_cells,
    flagged_rows,
    lattice_cells,
    lattice_depths,
    promote_proposed,
    proposal_recount,
    relative_design,
    share_cutoffs,
    stratum_counts,
)
from ._weights import AuditWeights, audit_weights

__all__ = [
    "AuditDesign",
    "AuditForWidth",
    "AuditSample",
    "AuditWeights",
    "NeymanAllocation",
    "audit_for_recall_width",
    "audit_sample",
    "audit_uniforms",
    "audit_weights",
    "budget_scale",
    "check_shares",
    "check_steps",
    "cutoff_strata",
    "depth_counts_from_cells",
    "design_variance",
    "expected_audits",
    "flagged_rows",
    "gain_spreads",
    "lattice_cells",
    "lattice_depths",
    "neyman_design",
    "neyman_probabilities",
    "promote_proposed",
    "proposal_recount",
    "recall_interval",
    "relative_design",
    "salt_key",
    "share_cutoffs",
    "stratum_counts",
    "weighted_poisson_interval",
]
