"""The audit design of a decide run, sized from the previous run's counts (``audit.design: auto``).

``costlib decide`` records in its manifest, per audit stratum, the unflagged rows ``N_h`` it saw
(``audit.strata[h].unflagged``). With ``audit.design: auto`` the next decide run into the same
output reads them from the run ``OUTPUT/LATEST`` names and sizes its design with
:func:`costlib.audit.neyman_design`:

    pi_h = min(1, max(floor, c * S_h)),    sum_h N_h pi_h = budget_share * sum_h N_h,

with spreads ``S_h = strata.weights[h] * rms_h`` (:func:`spreads`): ``rms_h`` is the root mean
square of a row's contribution to the estimated gain ``TP - r FP`` (see
:mod:`costlib.audit._neyman`), from the audited positives and negatives per stratum that the
recalibrate run being applied counted (``audit.stratum.<h>.positives`` / ``.negatives`` in its
row accounting), and 1 when there are none (operating points given as a file, other strata
edges, no audited row): then the weights alone shape the design. The previous run's counts
stand in for the expected counts of this run: only their shares matter, since the expected
audited *share* of this run is ``sum_h (N'_h / N') pi_h`` whatever its row count ``N'``.

The previous run is not usable (and the run falls back to the configured weights, scaled by
``budget_share / max(weights)`` so that no stratum's probability exceeds ``budget_share``:
:func:`first_run_design`; the manifest's ``audit.sizing.reason`` says why) when there is none,
when it had no audit section, when its strata edges differ from the config's, or when it
counted no unflagged row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib.audit import AuditDesign, gain_spreads, neyman_design
from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.runs import previous_run, read_manifest

__all__ = ["PreviousCounts", "audited_labels", "first_run_design", "previous_counts",
           "sized_design", "spreads"]


@dataclass(frozen=True)
class PreviousCounts:
    """Unflagged rows per audit stratum that decide run ``run_id`` counted."""

    run_id: str
    unflagged: tuple[float, ...]


def _bound(value: float | str) -> float:
    return float(value)  # "inf" / "-inf" as the manifest writes them parse as floats


def previous_counts(output: str, design: AuditDesign, relative_to: str = "score"
                    ) -> tuple[PreviousCounts | None, str]:
    """The per-stratum counts of the decide run ``output``'s ``LATEST`` names, or None and why.

    The counts are used only when that run's strata have exactly ``design``'s bounds and were
    cut relative to the same thing (``audit.strata.relative_to``: score or point).
    """
    run_id, why = previous_run(output)
    if run_id is None:
        return None, why
    try:
        manifest = read_manifest(f"{output.rstrip('/')}/runs/{run_id}")
    except (InputError, ValueError) as exc:
        return None, f"previous decide run {run_id} not readable: {exc}"
    audit = manifest.get("audit") or {}
    strata = audit.get("strata")
    if not audit.get("enabled") or not strata:
        return None, f"previous decide run {run_id} drew no audit sample (no per-stratum counts)"
    if audit.get("relative_to", "score") != relative_to:
        return None, (f"previous decide run {run_id} cut its strata relative to "
                      f"{audit.get('relative_to', 'score')}, config: {relative_to}")
    bounds = [_bound(s["lower"]) for s in strata] + [_bound(strata[-1]["upper"])]
    want = [-np.inf, *design.edges, np.inf]
    if bounds != want:
        return None, (f"previous decide run {run_id} used other strata edges "
                      f"({bounds[1:-1]}, config: {list(design.edges)})")
    unflagged = tuple(int(s["unflagged"]) for s in strata)
    if sum(unflagged) == 0:
        return None, f"previous decide run {run_id} counted no unflagged row"
    return PreviousCounts(run_id, unflagged), f"sized from decide run {run_id}"


def audited_labels(source: str | None, design: AuditDesign
                   ) -> tuple[tuple[list[int], list[int]] | None, str]:
    """Audited positives and negatives per stratum that the recalibration ``source`` (a run
    directory) rated (its row accounting's ``audit.stratum.<h>.positives`` / ``.negatives``),
    or None and why. Used only when that run's config had the same audit strata edges."""
    if source is None or source.endswith(".parquet"):
        return None, "operating points are a file, not a recalibrate run: no audited labels"
    try:
        manifest = read_manifest(source)
    except (InputError, ValueError) as exc:
        return None, f"recalibrate run {source} not readable: {exc}"
    edges = (((manifest.get("config") or {}).get("audit") or {}).get("strata") or {}).get(
        "edges", [])
    if [float(e) for e in edges] != list(design.edges):
        return None, (f"recalibrate run {source} used other audit strata edges ({edges}, "
                      f"config: {list(design.edges)})")
    accounting = manifest.get("row_accounting") or {}
    pos = [int(accounting.get(f"audit.stratum.{h}.positives", 0)) for h in range(design.n_strata)]
    neg = [int(accounting.get(f"audit.stratum.{h}.negatives", 0)) for h in range(design.n_strata)]
    if sum(pos) + sum(neg) == 0:
        return None, f"recalibrate run {source} rated no audited row"
    return (pos, neg), f"audited labels of recalibrate run {source}"


def spreads(config: RunConfig, design: AuditDesign, source: str | None
            ) -> tuple[NDArray[np.float64], dict[str, Any]]:
    """Neyman spreads ``S_h = weights[h] * rms_h`` and the manifest's record of them.

    ``rms_h = sqrt((P_h + r^2 Q_h) / (P_h + Q_h))`` is the root mean square of a row's
    contribution ``d = y - r (1 - y)`` to the gain ``TP - r FP`` (``r`` = the config's target
    slope), from the audited positives ``P_h`` and negatives ``Q_h`` of the recalibration
    applied (:func:`audited_labels`; :func:`costlib.audit.gain_spreads`, which gives an
    unaudited stratum the largest spread of the others); 1 everywhere without them. The
    weights say how much a stratum's rows matter to the decision (e.g. small far below every
    threshold); the design minimises ``sum_h N_h weights[h]^2 M_h (1 / pi_h - 1)``.
    """
    weights = np.asarray(design.weights, dtype=np.float64)
    if config.relative_strata:
        return weights, {"spread_source": "audit.strata.weights", "spread_reason":
                         "relative strata (audit.strata.relative_to point): recalibrate counts "
                         "audited labels by score strata only"}
    labels, reason = audited_labels(source, design)
    if labels is None:
        return weights, {"spread_source": "audit.strata.weights", "spread_reason": reason}
    slope = float(config.target.slope)
    rms = gain_spreads(labels[0], labels[1], slope)
    return weights * rms, {"spread_source": "audit.strata.weights * audited labels",
                           "spread_reason": reason, "audited_positives": labels[0],
                           "audited_negatives": labels[1], "slope": slope,
                           "rms": [float(v) for v in rms]}


def first_run_design(configured: AuditDesign) -> AuditDesign:
    """The design of an auto-sized run without usable counts: the configured weights with the
    scale ``c = budget_share / max_h weights[h]``, so ``pi_h = min(1, max(floor, c w_h)) <=
    budget_share`` in every stratum (``floor <= budget_share`` for auto designs) and the expected
    audited share is at most ``budget_share`` whatever the counts. (The fixed design's scale
    ``budget_share`` spends ``budget_share * weights[h]`` in stratum ``h``: with weights up to
    40, a first run audited 3-4% of the rows where 1% was asked.)"""
    top = max(configured.weights)
    scale = configured.budget_share / top if top > 0 else configured.budget_share
    return AuditDesign(edges=configured.edges, weights=configured.weights,
                       floor=configured.floor, budget_share=scale)


def sized_design(config: RunConfig, output: str, operating_points: str | None = None,
                 recut: PreviousCounts | None = None) -> tuple[AuditDesign, dict[str, Any]]:
    """The audit design of a decide run and the manifest's record of how it was sized.

    ``audit.design: fixed``: the configured design. ``auto``: the Neyman design of
    :func:`costlib.audit.neyman_design` for the previous run's counts (the module
    docstring), or :func:`first_run_design` when there are none or they cannot be used. The
    record holds ``design``, ``counts_from`` (run id or None), ``unflagged`` (the counts),
    ``spreads``, ``scale``, ``budget_share``, ``expected_share`` (``sum_h N_h pi_h /
    sum_h N_h`` over the counts) and ``reason``.
    """
    configured = config.audit_design()
    if config.audit.design != "auto":
        return configured, {"design": "fixed"}
    counts, reason = previous_counts(output, configured,
                                     "point" if config.relative_strata else "score")
    if recut is not None and counts is not None:  # share strata: re-cut by this run's cutoffs
        counts, reason = recut, f"sized from decide run {recut.run_id} (depths re-cut by " \
                                "this run's share cutoffs)"
    if counts is None:
        first = first_run_design(configured)
        return first, {"design": "auto", "counts_from": None, "scale": first.budget_share,
                       "budget_share": configured.budget_share,
                       "reason": f"{reason}: the configured weights scaled so that no stratum "
                                 "exceeds budget_share (first run)"}
    n = np.asarray(counts.unflagged, dtype=np.float64)
    spread, spread_record = spreads(config, configured, operating_points)
    try:
        design, allocation = neyman_design(n, spread, configured.edges,
                                           configured.budget_share, configured.floor)
    except ValueError as exc:  # e.g. weights 0 where most rows are: budget out of reach
        first = first_run_design(configured)
        return first, {"design": "auto", "counts_from": counts.run_id,
                       "unflagged": list(counts.unflagged), "scale": first.budget_share,
                       "budget_share": configured.budget_share,
                       "reason": f"cannot size from decide run {counts.run_id}: {exc}; the "
                                 "configured weights scaled so that no stratum exceeds "
                                 "budget_share"}
    return design, {
        "design": "auto",
        "counts_from": counts.run_id,
        "unflagged": list(counts.unflagged),
        "spreads": [float(v) for v in spread],
        **spread_record,
        "scale": allocation.scale,
        "budget_share": configured.budget_share,
        "expected_share": round(allocation.expected / float(n.sum()), 12),
        "reason": reason,
    }
