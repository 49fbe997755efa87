"""What a decision asks of a grid, stated once: :class:`DecisionSpec`.

Choosing an operating point (:func:`~costlib.thresholds.optimize`), reading the point of given
thresholds (:func:`~costlib.thresholds.point_at`), recalibrating a group
(:func:`~costlib.thresholds.optimize_group`), the evidence rule
(:func:`~costlib.thresholds.lower_bound_move`), the census review, the bootstrap intervals and
the capacity allocation all ask the same question of a grid: the trade-off (``target``), the
combination ``rule``, the :class:`~costlib.thresholds.Objective`, the hard
:class:`~costlib.thresholds.Constraints`, the allowed unrated share of the flagged volume
(coverage, ``max_unrated_share``) and how a recall floor is measured (``recall_bound`` at
``recall_level``). A :class:`DecisionSpec` holds these, validated when it is made, and every
one of those functions takes it.

``min_recall``'s ``P`` depends on the grid: :meth:`DecisionSpec.constraints_on` gives the
constraints with the grid's ``P`` (the upper bound ``P_U`` of the total positives, or the
estimate ``P̂``; :func:`~costlib.thresholds.grid._recall_bounds.recall_total`).

>>> spec = DecisionSpec.of(target_marginal_precision=0.3, min_precision=0.5)
>>> spec.rule, round(spec.objective.slope, 4), spec.constraints.min_precision
('any', 0.4286, 0.5)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numpy.typing import ArrayLike

from costlib.bounds import BOUNDS
from costlib.thresholds.binning._rows import check_rule
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.grid._recall_bounds import (
    DEFAULT_RECALL_LEVEL,
    RECALL_BOUNDS,
    recall_total,
)
from costlib.thresholds.point._objectives import Constraints, Objective
from costlib.thresholds.point._target import Target, resolve_target

__all__ = ["RECALL_NEEDS_AUDIT", "DecisionSpec", "as_decision_spec"]

#: Why :func:`~costlib.thresholds.optimize` refuses ``min_recall`` on a grid without audit rows.
RECALL_NEEDS_AUDIT = (
    "min_recall needs audit data: without an audit sample the total number of positives P is "
    "unknown (rated positives are only those the thresholds in force flagged), so no recall "
    "can be computed. Rate an audit sample of the unflagged rows (costlib decide with the "
    "config's audit section enabled) and build the grid with their inclusion probabilities "
    "(ThresholdGrid.from_scores(..., audit_probabilities=pi); in the pipelines "
    "columns.audit_probability); see docs/audit.md"
)


@dataclass(frozen=True)
class DecisionSpec:
    """The question a decision asks of a grid (see the module docstring).

    Make one with :meth:`of` (the keyword arguments :func:`~costlib.thresholds.optimize`
    takes) or directly from its parts; it is checked either way.

    Attributes
    ----------
    target : Target or None
        The trade-off; required by objectives that need one (the linear objective's slope
        ``r`` is ``target.slope``), otherwise it only steers the analytic method.
    objective : Objective
        What the point maximises.
    rule : {"any", "all"}
        Flag an item when any (OR) / all (AND) classifiers fire (aliases ``"or"``, ``"and"``).
    constraints : Constraints
        The hard constraints, without ``total_positives`` (:meth:`constraints_on` adds the
        grid's).
    max_unrated_share : float in [0, 1]
        Only tuples whose flagged volume holds at most this share of unrated weight are
        chosen (coverage).
    recall_bound : {"lower", "point"}
        ``P`` of ``min_recall``: the upper bound ``P_U`` at ``recall_level`` or the estimate.
    recall_level : float in (0, 1)
        Two-sided level of recall intervals and of ``P_U``.
    """

    target: Target | None
    objective: Objective
    rule: str = "any"
    constraints: Constraints = field(default_factory=Constraints)
    max_unrated_share: float = 0.0
    recall_bound: str = "lower"
    recall_level: float = DEFAULT_RECALL_LEVEL

    def __post_init__(self) -> None:
        object.__setattr__(self, "rule", check_rule(self.rule))
        if self.target is not None and not isinstance(self.target, Target):
            raise TypeError(f"target must be a Target, got {type(self.target).__name__}")
        if not isinstance(self.objective, Objective):
            raise TypeError(f"objective must be an Objective, got "
                            f"{type(self.objective).__name__}")
        if self.objective.needs_target and self.target is None:
            raise ValueError(f"the {self.objective.name} objective needs a target")
        if self.constraints.total_positives is not None:
            raise ValueError("a DecisionSpec's constraints hold no total_positives: "
                             "constraints_on(grid) adds the grid's")
        BOUNDS["coverage.max_unrated_share"].check("max_unrated_share", self.max_unrated_share)
        object.__setattr__(self, "max_unrated_share", float(self.max_unrated_share))
        if self.recall_bound not in RECALL_BOUNDS:
            raise ValueError(f"recall_bound must be one of {RECALL_BOUNDS}, got "
                             f"{self.recall_bound!r}")
        if self.recall_level not in BOUNDS["recall.level"]:
            raise ValueError(f"recall_level must be {BOUNDS['recall.level'].text()}, got "
                             f"{self.recall_level!r}")
        object.__setattr__(self, "recall_level", float(self.recall_level))

    @classmethod
    def of(
        cls,
        *,
        target_marginal_precision: float | None = None,
        target_slope: float | None = None,
        benefit_matrix: ArrayLike | None = None,
        target: Target | None = None,
        rule: str = "any",
        max_unrated_share: float = 0.0,
        objective: str = "linear",
        beta: float = 1.0,
        volume: float | None = None,
        min_precision: float | None = None,
        max_volume: float | None = None,
        max_false_positives: float | None = None,
        min_recall: float | None = None,
        recall_bound: str = "lower",
        recall_level: float = DEFAULT_RECALL_LEVEL,
    ) -> DecisionSpec:
        """The spec of :func:`~costlib.thresholds.optimize`'s keyword arguments.

        Give the trade-off at most one way: ``target_marginal_precision`` m in (0, 1),
        ``target_slope`` r = dTP/dFP = m / (1 - m), a 2x2 ``benefit_matrix`` (rows = true
        class, r = (b00 - b01) / (b11 - b10)), or a :class:`~costlib.thresholds.Target`; an
        objective that needs a target (the linear one) needs exactly one. ``objective`` is a
        registered objective's name (:func:`~costlib.thresholds.point._objectives.objective_names`)
        with its parameters ``beta`` / ``volume``; the constraints are those of
        :class:`~costlib.thresholds.Constraints`.
        """
        constraints = Constraints(min_precision, max_volume, max_false_positives, min_recall)
        given = (target_marginal_precision, target_slope, benefit_matrix, target)
        kind = Objective.kind_of(objective)
        tgt = resolve_target(*given) if kind.needs_target or any(
            v is not None for v in given) else None
        made = Objective.make(objective, slope=None if tgt is None else tgt.slope, beta=beta,
                              volume=volume)
        return cls(tgt, made, rule, constraints, max_unrated_share, recall_bound, recall_level)

    def replace(self, **changes: Any) -> DecisionSpec:
        """The same spec with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def without_recall_floor(self) -> DecisionSpec:
        """The spec without ``min_recall`` (for a grid whose recall is unknown)."""
        if self.constraints.min_recall is None:
            return self
        return self.replace(constraints=dataclasses.replace(self.constraints, min_recall=None))

    def constraints_on(self, grid: ThresholdGrid, *, refuse: bool = False) -> Constraints:
        """The constraints with ``P`` of ``min_recall`` from ``grid`` when it holds audit rows:
        ``P_U`` (``recall_bound="lower"``) or ``P̂`` (``"point"``).

        ``refuse``: a ValueError (:data:`RECALL_NEEDS_AUDIT`) for ``min_recall`` on a grid
        without audit rows (what :func:`~costlib.thresholds.optimize` does); otherwise its
        ``P`` is the grid's rated positive weight there.
        """
        cons = self.constraints
        if cons.min_recall is None:
            return cons
        if refuse and not grid.has_audit:
            raise ValueError(RECALL_NEEDS_AUDIT)
        total = recall_total(grid, self.recall_bound, self.recall_level)
        return dataclasses.replace(cons, total_positives=total)


def as_decision_spec(spec: DecisionSpec | None, decision: Mapping[str, Any]) -> DecisionSpec:
    """``spec``, or the spec of the keyword arguments ``decision`` (:meth:`DecisionSpec.of`)
    when it is None; both at once are refused."""
    if spec is None:
        return DecisionSpec.of(**decision)
    if not isinstance(spec, DecisionSpec):
        raise TypeError(f"spec must be a DecisionSpec, got {type(spec).__name__}")
    if decision:
        raise TypeError(f"give a DecisionSpec or its keyword arguments, not both (got "
                        f"{', '.join(sorted(decision))} too)")
    return spec
