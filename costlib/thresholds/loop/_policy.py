"""The in-force policy: when a new operating point may replace the thresholds in force.

A recalibration run finds each method's best point on the group's grid; whether the group then
*moves* there is a policy, one frozen value per run (the config's ``in_force`` section, read
once by :meth:`InForcePolicy.from_settings`):

- the bootstrap rule (``min_gain_z = z_b``, with replicate grids): move when the estimated gain
  ``Ĝ`` over the thresholds in force exceeds ``z_b`` bootstrap standard errors;
- else the evidence rule (``evidence_z = z``, on grids with audit weights): move only as far as
  the lower bound ``Ĝ - z (se + m)`` stays positive, ``se`` the Horvitz–Thompson design
  standard error plus ``unseen_rows`` pseudo-rows of every region the move adds or drops, ``m``
  the weight of one audited row there (``one_row_margin``), reviewed on the census of rows
  rated with certainty (``census_review``); a group without thresholds in force is switched on
  only on the same evidence over flagging nothing (``switch_on_evidence``);
- a group too thin to recalibrate keeps its thresholds in force (``keep_when_insufficient``).

The two edge settings (``add_to_edges``, ``max_added_edges``) say whether the thresholds in
force join the candidate thresholds, so that a kept point lies on the lattice exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from costlib._messages import plain
from costlib.bounds import BOUNDS
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop._move_evidence import DEFAULT_EVIDENCE_Z, DEFAULT_UNSEEN_ROWS

__all__ = ["DEFAULT_POLICY", "InForcePolicy"]


@dataclass(frozen=True)
class InForcePolicy:
    """How a run weighs the thresholds in force against each method's new point.

    Attributes
    ----------
    min_gain_z : float or None
        ``z_b >= 0`` of the bootstrap rule (needs replicate grids); None: off.
    evidence_z : float or None, default 1.645
        ``z >= 0`` of the evidence rule (a one-sided 95% bound by default); None: off.
    unseen_rows : float, default 1
        Pseudo-rows ``κ`` in ``[0, 100]`` of the unseen-region term of the evidence rule.
    one_row_margin, census_review, switch_on_evidence : bool, default True
        The evidence rule's margin of one audited row, its census review, and its use for
        switching a group on.
    keep_when_insufficient : bool, default True
        A thin group keeps its thresholds in force (else it gets none, or its parent's).
    add_to_edges : bool, default True
        The thresholds in force join the candidate thresholds.
    max_added_edges : int, default 256
        At most this many thresholds in force added per classifier (``0..4096``).
    """

    min_gain_z: float | None = None
    evidence_z: float | None = DEFAULT_EVIDENCE_Z
    unseen_rows: float = DEFAULT_UNSEEN_ROWS
    one_row_margin: bool = True
    census_review: bool = True
    switch_on_evidence: bool = True
    keep_when_insufficient: bool = True
    add_to_edges: bool = True
    max_added_edges: int = 256

    def __post_init__(self) -> None:
        for name in ("min_gain_z", "evidence_z"):
            value, bound = getattr(self, name), BOUNDS[f"in_force.{name}"]
            if value is not None and value not in bound:
                raise ValueError(f"in_force.{name} must be a number {bound.text()} or None, got "
                                 f"{plain(value)}")
        bound = BOUNDS["in_force.unseen_rows"]
        if self.unseen_rows not in bound:
            raise ValueError(f"in_force.unseen_rows must be {bound.text()}, got "
                             f"{plain(self.unseen_rows)}")
        bound = BOUNDS["in_force.max_added_edges"]
        if self.max_added_edges not in bound:
            raise ValueError(f"in_force.max_added_edges must be {bound.text()}, got "
                             f"{self.max_added_edges}")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> InForcePolicy:
        """The policy of a config's ``in_force`` section (keys as the schema names them;
        a key left out takes its default here). An unknown key is refused."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(settings) - names)
        if unknown:
            raise ValueError(f"in_force: unknown setting(s) {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(names))}")
        return cls(**dict(settings))

    def uses_bootstrap_rule(self, has_bootstrap: bool) -> bool:
        """The bootstrap rule applies (it takes precedence over the evidence rule)."""
        return self.min_gain_z is not None and has_bootstrap

    def uses_evidence_rule(self, grid: ThresholdGrid, has_in_force: bool,
                           has_bootstrap: bool) -> bool:
        """The evidence rule applies to a method's point on ``grid``: the grid carries audit
        weights, and either thresholds are in force or the group is to be switched on on
        evidence (which the bootstrap rule, where it applies, replaces)."""
        return (self.evidence_z is not None and grid.has_audit and grid.variance is not None
                and (has_in_force or (self.switch_on_evidence
                                      and not self.uses_bootstrap_rule(has_bootstrap))))


#: The policy of a config that leaves the ``in_force`` section out.
DEFAULT_POLICY = InForcePolicy()
