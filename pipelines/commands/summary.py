"""What a command chose, in a few lines for its summary: the decision method's thresholds per
group (the first groups, and where the rest are), the target, the groups whose status needs a
look, and every counted anomaly (:func:`anomaly_lines`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from costlib.text_table import format_table
from costlib_pipelines.io.units import (
    ROWS,
    UNIT_NOTES,
    fmt_rows,
    fmt_weighted,
    is_count,
    rated_rows,
)

if TYPE_CHECKING:
    from costlib_pipelines.io.plausibility import Plausibility

#: Groups a summary lists at most (the rest are in the run's operating points).
FIRST_GROUPS = 10


def target_text(target: Mapping[str, Any]) -> str:
    """The config's ``target`` as written: ``marginal precision 0.3``."""
    return ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in target.items())


def points_lines(records: Sequence[Mapping[str, Any]], classifiers: Sequence[str],
                 method: str, target: Mapping[str, Any], where: str, *, rule: str = "any",
                 first: int = FIRST_GROUPS) -> list[str]:
    """The thresholds of ``method`` per group as a table (the first ``first`` groups, the
    all-groups point ``__all__`` last), then the groups whose status needs a look."""
    chosen = sorted((r for r in records if r["method"] == method),
                    key=lambda r: (r["group"] == "__all__", r["group"]))
    shown = chosen if len(chosen) <= first else [*chosen[:first - 1], chosen[-1]]
    unit = next((r.get("weight_unit") for r in chosen if r.get("weight_unit")), ROWS)
    rows = [[r["group"], r["status"] + (f" ({r['fallback_group']})" if r.get("fallback_group")
                                         else ""),
             *(r["thresholds"] or [None] * len(classifiers)),
             None if r.get("tp") is None else fmt_weighted(r["tp"], unit),
             None if r.get("fp") is None else fmt_weighted(r["fp"], unit),
             None if r.get("precision") is None else f"{r['precision']:.3f}",
             "/".join(fmt_rows(v) for v in rated_rows(r))] for r in shown]
    precision = "precision (of the money)" if "money" in unit else "precision"
    lines = [f"thresholds of {method} per group (decision_method; target "
             f"{target_text(target)}): a row is flagged when {'every' if rule == 'all' else 'any'}"
             " classifier scores at or above its threshold ('-': the group flags nothing)",
             format_table(rows, ["group", "status", *(f"t[{c}]" for c in classifiers),
                                 f"TP ({unit})", f"FP ({unit})", precision,
                                 "rated rows +/-"])]
    if not is_count(unit):
        lines.append(f"TP, FP: {UNIT_NOTES[unit]}; rated rows +/-: rated positive/negative "
                     "rows, one each (what min_rated counts)")
    if len(shown) < len(chosen):
        lines.append(f"... {len(chosen) - len(shown)} more group(s): all {len(chosen)} in "
                     f"{where}")
    look: dict[str, list[str]] = {}
    for r in chosen:
        for status in (r["status"], r.get("point_status")):
            if status not in (None, "ok"):
                look.setdefault(status, []).append(r["group"])
    if look:
        lines.append("needs a look: " + "; ".join(
            f"{status} {len(groups)} ({_first(groups)})" for status, groups in sorted(
                look.items())) + " (docs/safe_operations.md; costlib report shows why)")
    return lines


def _first(names: Sequence[str], n: int = 5) -> str:
    more = f", and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(names[:n]) + more


#: Plausibility counter -> what it counts (the score range has its own line).
_COUNTED = {
    "duplicate_item_id": "rows repeat an item id read before in their group "
                         "(plausibility.count_duplicate_item_ids)",
    "event_time_outside_range": "rows with an event time outside plausibility.event_time_min "
                                "/ event_time_max",
}


def anomaly_lines(plausibility: Mapping[str, int], read: int) -> list[str]:
    """Every counted anomaly of a run's ``plausibility`` counters other than scores out of
    range, with its share of the rows read and the groups it is in."""
    lines = []
    for key, count in sorted(plausibility.items()):
        if "." in key or key.startswith("score_") or not count:
            continue
        what = _COUNTED.get(key, f"rows counted {key}")
        groups = sorted(((k.split(".", 1)[1], v) for k, v in plausibility.items()
                         if k.startswith(f"{key}.") and v), key=lambda kv: -kv[1])
        where = (" in " + _first([f"{g} {v:,}" for g, v in groups])) if groups else ""
        share = f" ({count / read:.1%} of {read:,} read)" if read else ""
        lines.append(f"warning: {count:,} {what}{share}{where}")
    return lines


def scores_outside(plausibility: Mapping[str, int], settings: Plausibility, *,
                   decide: bool = False) -> str:
    """The out-of-range score counters (``plausibility.score_{below,above}_range.<classifier>``)
    per classifier, and what the rows got, as one line; empty when there are none."""
    per_classifier: dict[str, list[str]] = {}
    for side in ("below", "above"):
        prefix = f"score_{side}_range."
        for key, count in plausibility.items():
            if key.startswith(prefix) and count:
                per_classifier.setdefault(key[len(prefix):], []).append(f"{count:,} {side}")
    total = plausibility.get("score_outside_range", 0)
    if not total:
        return ""
    low, high = settings.score_range or (math.nan, math.nan)
    action = ("dead-lettered (reason score_outside_range)"
              if settings.scores_outside_range == "dead_letter" else
              ("counted only: they are decided like any other row" if decide else
               "counted only: they stay in the grids, where they can switch a classifier on or "
               "off") + " (plausibility.scores_outside_range: dead_letter drops them)")
    return (f"{total:,} rows with a score outside [{low:g}, {high:g}] ("
            + "; ".join(f"{name} {', '.join(sides)}"
                        for name, sides in sorted(per_classifier.items()))
            + f"): {action}")
