"""The audit design of a decide run, sized from the previous run's counts (``audit.design: auto``).

``costlib decide`` records in its manifest, per audit stratum, the unflagged rows ``N_h`` it saw
(``audit.strata[h].unflagged``). With ``audit.design: auto`` the next decide run into the same
output reads them from the run ``OUTPUT/LATEST`` names and sizes its design with
:func:`costlib.audit_design.neyman_design`:

    pi_h = min(1, max(floor, c * S_h)),    sum_h N_h pi_h = budget_share * sum_h N_h,

with ``S_h`` the configured ``strata.weights`` (the Neyman spreads: the relative root mean
square of a row's contribution to the estimated gain, see :mod:`costlib.audit_design`). The
previous run's counts stand in for the expected counts of this run: only their shares matter,
since the expected audited *share* of this run is ``sum_h (N'_h / N') pi_h`` whatever its row
count ``N'``.

The previous run is not usable (and the run falls back to the configured design, ``fixed``,
saying why in the manifest's ``audit.sizing.reason``) when there is none, when it had no audit
section, when its strata edges differ from the config's, or when it counted no unflagged row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from costlib.audit_design import neyman_design
from costlib.audit_sampling import AuditDesign
from costlib_pipelines.config import RunConfig
from costlib_pipelines.files import InputError
from costlib_pipelines.runs import latest_run_id, read_manifest

__all__ = ["PreviousCounts", "previous_counts", "sized_design"]


@dataclass(frozen=True)
class PreviousCounts:
    """Unflagged rows per audit stratum that decide run ``run_id`` counted."""

    run_id: str
    unflagged: tuple[int, ...]


def _bound(value: float | str) -> float:
    return float(value)  # "inf" / "-inf" as the manifest writes them parse as floats


def previous_counts(output: str, design: AuditDesign) -> tuple[PreviousCounts | None, str]:
    """The per-stratum counts of the decide run ``output``'s ``LATEST`` names, or None and why.

    The counts are used only when that run's strata have exactly ``design``'s bounds.
    """
    try:
        run_id = latest_run_id(output)
    except InputError as exc:
        return None, f"no usable previous decide run: {exc}"
    if run_id is None:
        return None, f"no previous decide run in {output} (no LATEST)"
    try:
        manifest = read_manifest(f"{output.rstrip('/')}/runs/{run_id}")
    except (InputError, ValueError) as exc:
        return None, f"previous decide run {run_id} not readable: {exc}"
    audit = manifest.get("audit") or {}
    strata = audit.get("strata")
    if not audit.get("enabled") or not strata:
        return None, f"previous decide run {run_id} drew no audit sample (no per-stratum counts)"
    bounds = [_bound(s["lower"]) for s in strata] + [_bound(strata[-1]["upper"])]
    want = [-np.inf, *design.edges, np.inf]
    if bounds != want:
        return None, (f"previous decide run {run_id} used other strata edges "
                      f"({bounds[1:-1]}, config: {list(design.edges)})")
    unflagged = tuple(int(s["unflagged"]) for s in strata)
    if sum(unflagged) == 0:
        return None, f"previous decide run {run_id} counted no unflagged row"
    return PreviousCounts(run_id, unflagged), f"sized from decide run {run_id}"


def sized_design(config: RunConfig, output: str) -> tuple[AuditDesign, dict[str, Any]]:
    """The audit design of a decide run and the manifest's record of how it was sized.

    ``audit.design: fixed``: the configured design. ``auto``: the Neyman design of
    :func:`costlib.audit_design.neyman_design` for the previous run's counts (the module
    docstring), or the configured design when there are none. The record holds ``design``,
    ``counts_from`` (run id or None), ``unflagged`` (the counts), ``spreads``, ``scale``,
    ``budget_share``, ``expected_share`` (``sum_h N_h pi_h / sum_h N_h`` over the counts) and
    ``reason``.
    """
    configured = config.audit_design()
    if config.audit["design"] != "auto":
        return configured, {"design": "fixed"}
    counts, reason = previous_counts(output, configured)
    if counts is None:
        return configured, {"design": "auto", "counts_from": None,
                            "reason": f"{reason}: the configured (fixed) design"}
    n = np.asarray(counts.unflagged, dtype=np.float64)
    try:
        design, allocation = neyman_design(n, configured.weights, configured.edges,
                                           configured.budget_share, configured.floor)
    except ValueError as exc:  # e.g. weights 0 where most rows are: budget out of reach
        return configured, {"design": "auto", "counts_from": counts.run_id,
                            "unflagged": list(counts.unflagged),
                            "reason": f"cannot size from decide run {counts.run_id}: {exc}; "
                                      "the configured (fixed) design"}
    return design, {
        "design": "auto",
        "counts_from": counts.run_id,
        "unflagged": list(counts.unflagged),
        "spreads": list(configured.weights),
        "spread_source": "audit.strata.weights",
        "scale": allocation.scale,
        "budget_share": configured.budget_share,
        "expected_share": round(allocation.expected / float(n.sum()), 12),
        "reason": reason,
    }
