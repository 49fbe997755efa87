"""The audit sample of the decide stage: its settings, its record columns and its summary.

:func:`audit_settings` turns the config's ``audit`` section into :class:`AuditSettings` (the
design, sized by :mod:`costlib_pipelines.decide.audit_sizing`, the salt, and with relative
strata the lattice and cutoffs of :mod:`costlib_pipelines.decide.audit_lattice`); the private
helpers give a batch's ``audit`` and ``audit_probability`` columns and its audit counters (for
:func:`costlib_pipelines.decide.records.decision_table_and_audit`), and :func:`audit_summary`
the manifest's ``audit`` section from the run's counters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from costlib.audit import (
    AuditDesign,
    audit_sample,
    cutoff_strata,
    expected_audits,
    flagged_rows,
    lattice_cells,
    lattice_depths,
    promote_proposed,
)
from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.audit_lattice import decide_lattice, relative_cutoffs
from costlib_pipelines.decide.audit_sizing import PreviousCounts, first_run_design, sized_design
from costlib_pipelines.io.published_points import DecisionThresholds

__all__ = [
    "AuditSettings",
    "audit_settings",
]


#: Counter prefix of rows per group and lattice cell (relative audit strata); they are written
#: to :data:`costlib_pipelines.decide.audit_lattice.CELLS_FILE` (which
#: :func:`~costlib_pipelines.decide.audit_lattice.relative_cutoffs` reads).
CELL_PREFIX = "audit_cell."


@dataclass(frozen=True)
class AuditSettings:
    """The audit design and the salt of a run (small, pickled into DoFns); ``sizing`` records
    how the design was chosen (:func:`costlib_pipelines.decide.audit_sizing.sized_design`)."""

    design: AuditDesign
    salt: str
    #: Only rows of groups without a usable operating point are candidates (the floor audit
    #: of ``audit.groups_without_point`` when the audit is disabled).
    only_without_point: bool = False
    sizing: dict[str, Any] = field(default_factory=lambda: {"design": "fixed"})
    #: ``audit.strata.relative_to: point``: strata are lattice depths below the group's
    #: thresholds in force (:mod:`costlib.audit._strata`) on this lattice (None: unknown, every
    #: unflagged row in stratum 0); ``lattice_record`` is the manifest's ``audit.lattice``.
    relative: bool = False
    lattice: tuple[tuple[float, ...], ...] | None = None
    lattice_record: dict[str, Any] | None = None
    #: Relative strata: depth cutoffs per group (``default_cutoffs`` for the others).
    cutoffs: dict[str, tuple[float, ...]] = field(default_factory=dict)
    default_cutoffs: tuple[float, ...] = ()
    cutoffs_record: dict[str, Any] | None = None
    #: ``audit.strata.proposal_stratum`` (None: off): rows of a group's proposed point
    #: (:attr:`GroupThresholds.proposed`) are audited in at least this stratum.
    proposal_stratum: int | None = None

    def relative_strata(self, scores: NDArray[np.float64], thresholds: NDArray[np.float64],
                        rule: str, group_names: Sequence[str], codes: NDArray[np.integer],
                        proposed: NDArray[np.float64] | None = None,
                        ) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.bool_]]:
        """Depth of every row below its thresholds (:func:`costlib.audit.lattice_depths`;
        ``inf`` without a lattice), its relative stratum (its group's cutoffs) and whether the
        row's proposed thresholds (``proposed``, one row per score row, ``+inf`` where none)
        raised it (:func:`costlib.audit._strata.promote_proposed`)."""
        if self.lattice is None:
            depth = np.full(scores.shape[0], np.inf)
        else:
            depth = lattice_depths(scores, thresholds, self.lattice, rule)
        table = np.asarray([self.cutoffs.get(g, self.default_cutoffs) for g in group_names],
                           dtype=np.float64).reshape(len(group_names), -1)
        stratum = cutoff_strata(depth, table[codes])
        if self.proposal_stratum is None or proposed is None:
            return depth, stratum, np.zeros(stratum.shape, dtype=bool)
        raised = promote_proposed(stratum, flagged_rows(scores, proposed, rule),
                                  self.proposal_stratum)
        return depth, raised, raised > stratum


def audit_settings(config: RunConfig, run_id: str, output: str | None = None,
                   operating_points: str | None = None,
                   thresholds: DecisionThresholds | None = None) -> AuditSettings | None:
    """``config.audit`` of a run; the salt defaults to the run id.

    Disabled: None, unless ``audit.groups_without_point`` is ``"floor"`` (the default): then
    a one-stratum design with ``π = floor`` for the rows of groups without a usable
    operating point only (``only_without_point``), so that such a group (e.g. on a first run,
    with nothing to keep) gets unbiased ratings instead of none.

    With ``audit.design: auto`` and ``output``, the design is sized from the counts of the
    decide run ``output``'s ``LATEST`` names and the audited labels of the recalibrate run
    ``operating_points`` (:mod:`costlib_pipelines.decide.audit_sizing`).

    With ``audit.strata.relative_to: point`` the lattice of the depths is the one of the
    recalibrate run ``operating_points`` (else the config's fixed edges with ``thresholds``
    added; :func:`costlib_pipelines.decide.audit_lattice.decide_lattice`).
    """
    audit = config.audit
    salt = audit.salt if audit.salt is not None else run_id
    if not audit.enabled:
        if audit.groups_without_point != "floor":
            return None
        floor = float(audit.floor)
        return AuditSettings(AuditDesign(edges=(), weights=(1.0,), floor=floor,
                                         budget_share=floor), salt, only_without_point=True)
    if output is None:
        sizing = {"design": audit.design}
        design = config.audit_design()
        if audit.design == "auto":
            design = first_run_design(design)
            sizing.update(counts_from=None, reason="no output to read previous counts from: "
                                                   "the configured weights scaled so that no "
                                                   "stratum exceeds budget_share")
    lattice, record = None, None
    by_group: dict[str, tuple[float, ...]] = {}
    default: tuple[float, ...] = ()
    source: dict[str, Any] = {}
    if config.relative_strata:
        applied = np.zeros((0, len(config.classifiers)))
        if thresholds is not None:
            applied = np.asarray([e.thresholds for e in [*thresholds.by_group.values(),
                                                         thresholds.default]
                                  if e.thresholds is not None], dtype=np.float64)
        lattice, record = decide_lattice(config, operating_points, applied)

        def in_force(group: str) -> np.ndarray:
            entry = thresholds.get(group) if thresholds is not None else None
            return np.full(len(config.classifiers), np.inf) \
                if entry is None or entry.thresholds is None else np.asarray(entry.thresholds)

        def proposed(group: str) -> np.ndarray | None:
            entry = thresholds.get(group) if thresholds is not None else None
            return None if entry is None or entry.thresholds is None or entry.proposed is None \
                else np.asarray(entry.proposed)
        by_group, default, source = relative_cutoffs(config, output, lattice, in_force,
                                                     proposed)
    if output is not None:
        recut = None
        if source.get("unflagged") is not None and sum(source["unflagged"]) > 0:
            recut = PreviousCounts(str(source["from"]), tuple(source["unflagged"]))
        design, sizing = sized_design(config, output, operating_points, recut)
    if not config.relative_strata:
        return AuditSettings(design, salt, sizing=sizing)
    if default and all(np.isinf(default)) and not by_group:
        # no previous counts: every unflagged row in the nearest stratum, audited with
        # budget_share (fixed or auto alike; fixed would spend budget_share * weights[-1])
        design = AuditDesign(edges=design.edges, weights=(1.0,) * design.n_strata,
                             floor=design.floor, budget_share=float(audit.budget_share))
        sizing = {**sizing, "scale": design.budget_share,
                  "reason": f"{source.get('reason', '')}: pi = budget_share for every "
                            "unflagged row"}
    return AuditSettings(design, salt, sizing=sizing, relative=True, lattice=lattice,
                         lattice_record=record, cutoffs=by_group, default_cutoffs=default,
                         cutoffs_record=source, proposal_stratum=config.proposal_stratum)


def _floor_audit_columns(
    item_ids: pa.Array, scores: NDArray[np.float64], flagged: NDArray[np.bool_],
    no_point: NDArray[np.bool_] | None, audit: AuditSettings,
) -> tuple[pa.Array, pa.Array, Counter]:
    """The floor audit of groups without a usable point (``audit.only_without_point``).

    Candidates are the rows with a null threshold decision (``no_point``), each audited with
    ``π = floor``; ``audit_probability`` is ``π`` on them, 1 on flagged rows of other groups
    and null elsewhere (unflagged rows of groups with a point: not audit-eligible). Counters:
    ``audited`` and ``audit_unflagged.0`` (the candidates).
    """
    n = flagged.size
    if no_point is None:  # every row's group has a point: flagged rows p = 1, others null
        return (pa.array(np.zeros(n, dtype=bool)),
                pa.array(np.ones(n), mask=~flagged if not flagged.all() else None),
                Counter({"audited": 0, "audit_unflagged.0": 0}))
    sample = audit_sample(item_ids, scores, ~no_point, audit.salt, audit.design)
    probability = np.where(no_point, sample.audit_probability, 1.0)
    null = ~no_point & ~flagged
    counters = Counter({"audit_unflagged.0": int(np.count_nonzero(no_point)),
                        "audited": int(np.count_nonzero(sample.audit))})
    return (pa.array(sample.audit), pa.array(probability, mask=null if null.any() else None),
            counters)


def _cell_counters(scores: NDArray[np.float64], lattice, codes: NDArray[np.integer],
                   group_names: Sequence[str]) -> Counter:
    """Rows per group and lattice cell (:func:`costlib.audit._strata.lattice_cells`):
    ``audit_cell.<group>.<c_1>,...,<c_k>``; the next run places its share cutoffs on them
    (:func:`costlib_pipelines.decide.audit_lattice.relative_cutoffs`). Empty without a lattice."""
    out: Counter = Counter()
    if lattice is None or scores.shape[0] == 0:
        return out
    cells = lattice_cells(scores, lattice)
    keyed = np.column_stack([codes, cells])
    found, counts = np.unique(keyed, axis=0, return_counts=True)
    for row, count in zip(found.tolist(), counts.tolist(), strict=True):
        out[f"{CELL_PREFIX}{group_names[row[0]]}.{','.join(map(str, row[1:]))}"] = int(count)
    return out


def _audit_columns(
    item_ids: pa.Array, scores: NDArray[np.float64], flagged: NDArray[np.bool_],
    audit: AuditSettings | None,
) -> tuple[pa.Array, pa.Array, Counter]:
    """``audit``, ``audit_probability`` columns and audit counters (see
    :func:`~costlib_pipelines.decide.records.decision_table_and_audit`); ``scores`` are what the
    strata are cut on (relative strata: :meth:`AuditSettings.relative_strata`)."""
    n = flagged.size
    if audit is None:
        return pa.array(np.zeros(n, dtype=bool)), pa.nulls(n, pa.float64()), Counter()
    sample = audit_sample(item_ids, scores, flagged, audit.salt, audit.design)
    unflagged = np.bincount(sample.stratum[~flagged], minlength=audit.design.n_strata)
    counters = Counter({f"audit_unflagged.{h}": int(c) for h, c in enumerate(unflagged)})
    counters["audited"] = int(np.count_nonzero(sample.audit))
    return pa.array(sample.audit), pa.array(sample.audit_probability), counters


def audit_summary(counts: dict[str, Any], audit: AuditSettings | None) -> dict[str, Any]:
    """The manifest's ``audit`` section, from the integer counters of the run.

    ``expected = sum_h N_h pi_h`` and ``variance = sum_h N_h pi_h (1 - pi_h)`` over the
    ``N_h`` unflagged rows of stratum ``h`` (:func:`costlib.audit.expected_audits`):
    the mean and variance of the audited count under the design, computed from integer counts so the
    numbers do not depend on the order in which bundles were summed.
    """
    if audit is None:
        return {"enabled": False}
    design = audit.design
    if audit.only_without_point:
        candidates = int(counts.get("audit_unflagged.0", 0))
        return {"enabled": False, "groups_without_point": {
            "salt": audit.salt, "probability": design.floor, "candidates": candidates,
            "audited": int(counts.get("audited", 0)),
            "expected": round(candidates * design.floor, 6),
            "variance": round(candidates * design.floor * (1 - design.floor), 6)}}
    probabilities = design.probabilities()
    unflagged = [int(counts.get(f"audit_unflagged.{h}", 0)) for h in range(design.n_strata)]
    expected, variance = expected_audits(unflagged, probabilities)
    bounds = [-np.inf, *design.edges, np.inf]
    relative = {}
    if audit.relative:
        relative = {"relative_to": "point", "lattice": audit.lattice_record,
                    "cutoffs": {"by_group": {g: [_json_bound(v) for v in c]
                                             for g, c in sorted(audit.cutoffs.items())},
                                "default": [_json_bound(v) for v in audit.default_cutoffs],
                                **(audit.cutoffs_record or {})},
                    "proposal": {"stratum": audit.proposal_stratum,
                                 "unflagged": int(counts.get("audit_proposed", 0))}}
    return {
        "enabled": True,
        **relative,
        "salt": audit.salt,
        "design": audit.sizing.get("design", "fixed"),
        "sizing": audit.sizing,
        "floor": design.floor,
        "budget_share": audit.sizing.get("budget_share", design.budget_share),
        "audited": int(counts.get("audited", 0)),
        "unflagged": int(sum(unflagged)),
        "expected": round(expected, 6),
        "variance": round(variance, 6),
        "strata": [
            {"lower": _json_bound(bounds[h]), "upper": _json_bound(bounds[h + 1]),
             "weight": design.weights[h], "probability": float(probabilities[h]),
             "unflagged": unflagged[h]}
            for h in range(design.n_strata)
        ],
    }


def _json_bound(value: float) -> float | str:
    return value if np.isfinite(value) else ("inf" if value > 0 else "-inf")
