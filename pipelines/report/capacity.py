"""The report's section on the shared review capacity (config ``capacity``).

Reads the manifest's ``capacity`` entry
(:func:`costlib_pipelines.recalibrate.capacity.capacity_summary`) and the run's records of method
``capacity``: the capacity and what was allocated, ``lambda`` and the marginal precision it stands
for, the LP bound and the integrality gap, the gain over an equal and a traffic-proportional split
of the same capacity, why capacity is left unused and why the LP bound exceeds the utility, and a
table of every group's allocated volume, share, thresholds and what holds it there (the
largest :data:`MAX_ROWS` by volume when there are more groups). :func:`capacity_view` computes
it, ``templates/capacity.html.j2`` lays it out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from costlib_pipelines.report import cells

__all__ = ["MAX_ROWS", "capacity_view"]

#: Groups listed in the allocation table (the largest allocated volumes first beyond it).
MAX_ROWS = 200


def _num(value: Any, digits: int = 2) -> str:
    """A number for the page (``inf`` and null as words)."""
    if value is None:
        return "–"
    if isinstance(value, str):
        return value  # "inf"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:,.{digits}f}"


def _thresholds(values: Sequence[float] | None) -> str:
    if values is None:
        return "none"
    return ", ".join("off" if math.isinf(v) else f"{v:.4f}" for v in values)


def _gain(total: float | None, baseline: float | None) -> str:
    if total is None or baseline is None:
        return "–"
    gain = total - baseline
    ratio = f" ({gain / abs(baseline):+.1%})" if baseline else ""
    return f"{gain:+,.2f}{ratio}"


def capacity_view(manifest: Mapping[str, Any], records: Sequence[Mapping[str, Any]]
                  ) -> dict[str, Any] | None:
    """What the section shows; None when the run allocated no capacity."""
    summary = manifest.get("capacity")
    mine = [r for r in records if r.get("method") == "capacity" and r["window_start"] is None]
    if not summary:
        return None
    objective = summary.get("objective")
    utility = "TP − r·FP" if objective == "linear" else "true positives"
    tp = summary.get("total_true_positives")
    figures = [
        ("capacity", _num(summary.get("capacity"))),
        ("allocated volume", _num(summary.get("total_volume"))),
        ("groups allocated", summary.get("groups_allocated")),
        ("statuses", ", ".join(f"{k} {v}" for k, v in (summary.get("statuses") or {}).items())),
        ("λ (marginal utility of one more review)", _num(summary.get("multiplier"), 4)),
        ("marginal precision at λ", _num(summary.get("marginal_precision"), 4)),
        (f"utility ({utility})", _num(summary.get("total_utility"))),
        ("true positives", _num(summary.get("total_true_positives"))),
        ("LP bound; integrality gap", f"{_num(summary.get('upper_bound'))}; "
                                      f"{_num(summary.get('integrality_gap'), 4)}"),
        ("exact optimum over every combination of cells", _num(summary.get("exact"))),
        ("equal split: utility, true positives",
         f"{_num(summary.get('equal_utility'))}, {_num(summary.get('equal_true_positives'))}"),
        ("gain over the equal split (utility; true positives)",
         f"{_gain(summary.get('total_utility'), summary.get('equal_utility'))}; "
         f"{_gain(tp, summary.get('equal_true_positives'))}"),
        ("traffic-proportional split: utility, true positives",
         f"{_num(summary.get('proportional_utility'))}, "
         f"{_num(summary.get('proportional_true_positives'))}"),
        ("gain over the traffic-proportional split (utility; true positives)",
         f"{_gain(summary.get('total_utility'), summary.get('proportional_utility'))}; "
         f"{_gain(tp, summary.get('proportional_true_positives'))}"),
    ]
    if summary.get("unused_why"):
        figures.append(("capacity left unused, and why", summary["unused_why"]))
    if summary.get("bound_why"):
        figures.append(("why the LP bound exceeds the utility", summary["bound_why"]))
    if summary.get("groups_not_in_run"):
        figures.append(("bounds for groups not in the run",
                        ", ".join(summary["groups_not_in_run"])))
    top = cells.table(["", "value"], [cells.row([cells.cell(k), cells.cell(v)],
                                                key=f"capacity.{i}")
                                      for i, (k, v) in enumerate(figures)], "capacity")
    ordered = sorted(mine, key=lambda r: (-(r["allocated_volume"] or 0.0), r["group"]))
    shown = ordered[:MAX_ROWS]
    rows = [cells.row([cells.cell(r["group"]), cells.cell(r["capacity_status"]),
                       cells.cell(_num(r["allocated_volume"])),
                       cells.cell(_num(None if r["capacity_share"] is None
                                       else 100 * r["capacity_share"], 1)),
                       cells.cell(_num(r["allocated_utility"])),
                       cells.cell(_num(r["volume_scale"], 4)),
                       cells.cell(_thresholds(r["thresholds"])),
                       cells.cell(r.get("reason") or "")],
                      key=f"capacity.group.{r['group']}")
            for r in shown]
    groups = cells.table(["group", "status", "allocated volume", "share of capacity (%)",
                          "utility", "volume scale", "thresholds", "what holds it there"],
                         rows, "capacity")
    return {"figures": top, "groups": groups, "shown": len(shown), "total": len(mine)}

