"""The estimated-recall fields of an operating point record: estimate, interval, audit evidence.

With audit data a point carries :class:`costlib.thresholds.RecallBounds`: intervals of the
total positives ``P`` and of recall that hold when the audit finds few or no missed positives,
and the evidence behind them per audit stratum. The records carry them (``recall.interval:
exact``, the default) or the bootstrap's percentile intervals (``bootstrap``), the evidence, a
warning when the recall interval is wider than ``recall.max_width``, and the audit share that
would bring it to ``± recall.target_half_width`` (:func:`costlib.audit.audit_for_recall_width`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from costlib.audit import audit_for_recall_width
from costlib.message_text import count_text

__all__ = ["DEFAULT_RECALL_SETTINGS", "FIRST_ESTIMATE_BELOW", "recall_fields"]

#: Below this many positives found among the audited unflagged rows, ``audit_share_needed`` is
#: a first estimate: the simulation behind it (docs/audit.md, ``bench_recall_power.py``)
#: reached 0.74-2.57 times the half-width asked there, 0.79-1.23 times from 10 found on.
FIRST_ESTIMATE_BELOW = 10.0

#: ``recall`` settings of a run that names none (the schema's defaults).
DEFAULT_RECALL_SETTINGS: dict[str, Any] = {
    "bound": "lower", "level": 0.9, "interval": "exact", "max_width": 0.2,
    "target_half_width": 0.05,
}


def _number(value: float | None) -> float | None:
    return None if value is None or value != value else float(value)


@lru_cache(maxsize=256)
def _share_needed(caught: float, strata: tuple[tuple[float, float, float, float], ...],
                  half_width: float, level: float) -> float | None:
    """Audited share for ``± half_width`` (None: out of reach), once per distinct evidence:
    the methods of a group often land on one point, and the calculation averages over 512
    posterior draws."""
    pi, rows, audited, positives = (list(c) for c in zip(*strata, strict=True))
    plan = audit_for_recall_width(caught, rows, pi, audited, positives, half_width,
                                  level=level)
    return plan.share if plan.reachable else None


def _nulls() -> dict[str, Any]:
    return {"recall_interval": None, "audit_missed_positives_found": None,
            "audit_missed_audited": None, "audit_strata_pi": None, "audit_strata_rows": None,
            "audit_strata_audited": None, "audit_strata_positives": None,
            "recall_warning": None, "audit_share_needed": None}


def recall_fields(point, ci, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Estimated recall and total positives, their intervals and the audit evidence.

    ``point``: the record's :class:`~costlib.thresholds.OperatingPoint` (or None); ``ci``: its
    :class:`~costlib.thresholds.BootstrapResult` (or None); ``settings``: the run's ``recall``
    section (default :data:`DEFAULT_RECALL_SETTINGS`).
    """
    cfg = {**DEFAULT_RECALL_SETTINGS, **(settings or {})}
    bounds = None if point is None else point.recall_bounds
    out: dict[str, Any] = {
        "estimated_total_positives": None if point is None
        else _number(point.estimated_total_positives),
        "estimated_recall": None if point is None else _number(point.estimated_recall),
        "estimated_recall_ci_low": None, "estimated_recall_ci_high": None,
        "estimated_total_positives_ci_low": None, "estimated_total_positives_ci_high": None,
        **_nulls(),
    }
    boot_recall = None if ci is None else ci.estimated_recall
    boot_total = None if ci is None else ci.estimated_total_positives
    if bounds is not None and (cfg["interval"] == "exact" or boot_recall is None):
        out.update(estimated_recall_ci_low=_number(bounds.recall_low),
                   estimated_recall_ci_high=_number(bounds.recall_high),
                   estimated_total_positives_ci_low=_number(bounds.total_positives_low),
                   estimated_total_positives_ci_high=_number(bounds.total_positives_high),
                   recall_interval="exact")
    elif boot_recall is not None:
        out.update(estimated_recall_ci_low=_number(boot_recall[0]),
                   estimated_recall_ci_high=_number(boot_recall[1]),
                   estimated_total_positives_ci_low=None if boot_total is None
                   else _number(boot_total[0]),
                   estimated_total_positives_ci_high=None if boot_total is None
                   else _number(boot_total[1]),
                   recall_interval="bootstrap")
    if bounds is None:
        return out
    strata = bounds.strata
    out.update(
        audit_missed_positives_found=float(bounds.positives_missed_found),
        audit_missed_audited=float(bounds.audited_missed),
        audit_strata_pi=[s["pi"] for s in strata],
        audit_strata_rows=[s["rows"] for s in strata],
        audit_strata_audited=[s["audited"] for s in strata],
        audit_strata_positives=[s["positives"] for s in strata],
    )
    half = float(cfg["target_half_width"])
    if strata and point is not None and point.tp > 0:
        evidence = tuple((float(s["pi"]), float(s["rows"]), float(s["audited"]),
                          float(s["positives"])) for s in strata)
        out["audit_share_needed"] = _share_needed(float(point.tp), evidence, half,
                                                  float(bounds.level))
    low, high = out["estimated_recall_ci_low"], out["estimated_recall_ci_high"]
    if low is not None and high is not None and high - low > float(cfg["max_width"]):
        need = out["audit_share_needed"]
        plan_text = (f"an audit of {need:.2%} of these rows would bring it to ±{half:g}"
                     if need is not None else f"no audit of these rows reaches ±{half:g}")
        if need is not None and bounds.positives_missed_found < FIRST_ESTIMATE_BELOW:
            plan_text += (f" (a first estimate, resting on fewer than "
                          f"{FIRST_ESTIMATE_BELOW:g} positives found: audit at that share, then "
                          "let the next run size it again)")
        out["recall_warning"] = (
            f"recall interval [{low:.3f}, {high:.3f}] is wider than recall.max_width "
            f"{float(cfg['max_width']):g}: the audit found "
            f"{count_text(bounds.positives_missed_found, 'positive')} among "
            f"{count_text(bounds.audited_missed, 'audited row')} the thresholds do not flag; "
            f"{plan_text}")
    return out
