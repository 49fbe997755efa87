"""What the run-wide sections of the report show (laid out by ``templates/run.html.j2``): the
run's facts and publication, the row accounting and plausibility counters of
``manifest.json``, the overview of every group (searchable, sortable) and the windows of a
windowed run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.units import ROWS, UNIT_NOTES, fmt_rows, is_count, rated_rows
from costlib_pipelines.report import cells
from costlib_pipelines.report.changes import ThresholdChange
from costlib_pipelines.report.formatting import (
    fmt_count,
    fmt_threshold,
    fmt_time,
    inputs_text,
    publication_text,
    sort_value,
)
from costlib_pipelines.report.group_section import (
    COVERAGE_HEADERS,
    change_css,
    coverage_cells,
    fmt_difference,
)
from costlib_pipelines.report.runs_data import RunData

__all__ = ["accounting_view", "overview_view", "run_view", "status_counts", "windows_view"]

_STATUSES = ("ok", "fallback", "kept", "insufficient_data")


def target_description(target: Mapping[str, Any]) -> str:
    """The config's ``target`` in any of its forms, as written and as the slope ``r`` and
    marginal precision ``m = r / (1 + r)`` it resolves to, e.g. ``fp_per_tp 2.33 (slope r =
    0.4292, marginal precision 0.3003)``."""
    if not target:
        return "not recorded"
    try:
        slope = RunConfig.target_of(target).slope
    except (KeyError, TypeError, ValueError) as exc:
        return f"{target} (unreadable: {exc})"
    written = "; ".join(f"{key} {value}" for key, value in target.items())
    return f"{written} (slope r = {slope:.4g}, marginal precision {slope / (1 + slope):.4g})"


def run_view(run: RunData, previous: RunData | None) -> dict[str, Any]:
    """Facts about the run (ids, times, inputs, config, previous run, publication) and the
    publish guard's violations and notes."""
    m = run.manifest
    config = m.get("config", {})
    target = config.get("target", {})
    guard = m.get("guard") or {}
    facts = [
        ("run id", run.run_id),
        ("run directory", run.run_dir),
        ("started", fmt_time(m.get("started_utc"))),
        ("finished", f"{fmt_time(m.get('finished_utc'))} ({m.get('seconds', '?')} s on "
                     f"{m.get('runner', '?')})"),
        ("inputs", inputs_text(m.get("inputs", []))),
        ("classifiers, rule", f"{', '.join(run.classifiers)}; rule '{config.get('rule', '?')}'"),
        ("target", target_description(target)),
        ("methods", f"{', '.join(config.get('methods', []))} (decisions use "
                    f"'{config.get('decision_method', '?')}')"),
        ("previous run", "no previous run" if previous is None else
         f"{previous.run_id} (finished {fmt_time(previous.manifest.get('finished_utc'))})"),
    ]
    if m.get("published") is not None:
        facts.append(("publication", publication_text(m)))
    return {"facts": facts, "violations": list(guard.get("violations") or []),
            "notes": list(guard.get("notes") or [])}


def accounting_view(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The row accounting of ``manifest.json`` and its plausibility counters (``plausibility``:
    None for a manifest written before they existed; its ``table`` None when none failed)."""
    acc = manifest.get("row_accounting") or {}
    reasons = acc.get("dead_letter_reasons") or {}
    rows = [cells.row([cells.cell(name), cells.cell(fmt_count(acc.get(key)))], key=key)
            for name, key in (("read", "read"), ("used (rated)", "used"),
                              ("unrated", "unrated"), ("dead-lettered", "dead_lettered"))]
    rows += [cells.row([cells.cell(cells.indented(reason)), cells.cell(fmt_count(count))],
                       key=f"dead_letter.{reason}")
             for reason, count in sorted(reasons.items())]
    zero = {k: v for k, v in acc.items() if k.startswith("min_risk.negative_regret.") and v}
    rows += [cells.row([cells.cell(f"weigh 0, negative cost regret: "
                                   f"{key.rsplit('.', 1)[1].replace('_', ' ')}"),
                        cells.cell(fmt_count(count))], key=key)
             for key, count in sorted(zero.items())]
    check = ("read = used + unrated + dead-lettered" if not reasons
             else "read = used + unrated + dead-lettered; dead-lettered rows by reason are "
                  "in the run's dead_letter/ files")
    if zero:
        check += ("; rows that weigh 0 (min_risk.weight_rated_rows: a cost regret below 0, "
                  "e.g. an amount below the review cost, is never worth flagging for cost) "
                  "are used or unrated rows too, not an extra bucket")
    counts = manifest.get("plausibility")
    plausibility = None
    if counts is not None:
        read = acc.get("read") or 0
        failed = None if not any(counts.values()) else cells.table(
            ["check", "rows", "share of read"],
            [cells.row([cells.cell(name), cells.cell(fmt_count(count)),
                        cells.cell(f"{count / read:.2%}" if read else "")],
                       key=f"plausibility.{name}") for name, count in sorted(counts.items())],
            "accounting")
        plausibility = {"table": failed}
    return {"table": cells.table(["rows", "count"], rows, "accounting"), "check": check,
            "plausibility": plausibility}


def status_counts(shown: Mapping[str, Mapping[str, Any]]) -> str:
    """``5 groups: 4 ok, 1 fallback`` (statuses of the records the overview shows)."""
    statuses = [p["status"] for p in shown.values()]
    parts = [f"{statuses.count(s)} {s.replace('_', ' ')}" for s in _STATUSES if s in statuses]
    return f"{len(shown)} groups: {', '.join(parts)}"


def overview_view(groups: Sequence[str], shown: Mapping[str, Mapping[str, Any]],
                  changes: Sequence[ThresholdChange], classifiers: Sequence[str],
                  previous: RunData | None, method: str, anchors: Mapping[str, str],
                  reasons: Mapping[str, Sequence[str]], detailed_all: bool) -> dict[str, Any]:
    """One row per group: status, rated rows, the decision method's thresholds and change,
    coverage, and whether (and why) the group has a section below; the template adds a
    search box and sortable columns (``overview.js.j2``, no network).

    ``shown`` holds per group the record the row shows (its decision-method record, else its
    first); ``anchors`` the section ids of the groups that have a section.
    """
    by_key = {(c.group, c.method, c.classifier): c for c in changes}
    windowed = any(p["window_start"] is not None for p in shown.values())
    rows = []
    for group in groups:
        point = shown[group]
        row = [cells.cell(cells.link(group, anchors.get(group)), sort=group),
               cells.cell(cells.badge(point["status"]), sort=point["status"]),
               *(cells.cell(fmt_rows(rows), sort=sort_value(rows))
                 for rows in rated_rows(point))]
        for j, name in enumerate(classifiers):
            value = None if point["thresholds"] is None else point["thresholds"][j]
            change = by_key.get((group, point["method"], name))
            delta = "" if change is None else f"Δ {fmt_difference(change)}"
            row.append(cells.cell(cells.interval(fmt_threshold(value), delta),
                                  css=change_css(change), sort=sort_value(value)))
        coverage = coverage_cells(point)
        row += [cells.cell(*coverage[0], sort=sort_value(point.get("volume"))),
                cells.cell(*coverage[1], sort=sort_value(point.get("coverage"))),
                cells.cell(*coverage[2], sort=point.get("point_status") or "")]
        source = point["fallback_group"] if point["status"] == "fallback" else ""
        row.append(cells.cell(f"thresholds of {source}" if source else ""))
        if windowed:
            start, end = point["window_start"], point["window_end"]
            row.append(cells.cell(f"{start:%Y-%m-%d} → {end:%Y-%m-%d}"))
        if not detailed_all:
            row.append(cells.cell(", ".join(reasons.get(group, ()))))
        rows.append(cells.row(row, group=group))
    since = ("Δ = change since the previous run " + previous.run_id if previous is not None
             else "no previous run to compare with")
    headers = ["group", "status", "rated + (rows)", "rated − (rows)",
               *(f"t[{c}]" for c in classifiers), *COVERAGE_HEADERS, "note",
               *(["latest window"] if windowed else []),
               *([] if detailed_all else ["details"])]
    details = ("" if detailed_all else
               f" Only {len(anchors)} of {len(groups)} groups have a section below: those "
               f"that changed since the previous run, fell back or have no thresholds, have a "
               f"coverage-limited, resolution-limited or infeasible point, are named by the "
               f"publish guard, or were selected (costlib report --groups); the column "
               f"\"details\" says why.")
    unit = next((p.get("weight_unit") for p in shown.values() if p.get("weight_unit")), ROWS)
    volume = "" if is_count(unit) else f"; volume is in {UNIT_NOTES[unit]}"
    units = (" rated + / rated −: the group's rated positive / negative rows, one each whatever "
             f"they weigh (what min_rated counts){volume}.")
    return {"method": method, "since": since, "details": units + details, "count": len(groups),
            "table": cells.table(headers, rows, "overview")}


def windows_view(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Windowed runs: every window of the run, with its groups' statuses."""
    windows: dict[tuple[Any, Any], dict[str, tuple[str, int]]] = {}
    for r in records:
        windows.setdefault((r["window_start"], r["window_end"]), {})[r["group"]] = (
            r["status"], int(r["pane_index"]))
    rows = []
    for (start, end), groups in sorted(windows.items()):
        statuses = [s for s, _ in groups.values()]
        summary = ", ".join(f"{statuses.count(s)} {s.replace('_', ' ')}"
                            for s in _STATUSES if s in statuses)
        rows.append(cells.row([cells.cell(f"{start:%Y-%m-%d %H:%M}"),
                               cells.cell(f"{end:%Y-%m-%d %H:%M}"), cells.cell(len(groups)),
                               cells.cell(summary),
                               cells.cell(max(p for _, p in groups.values()))]))
    return {"table": cells.table(["start (UTC)", "end (UTC)", "groups", "statuses",
                                  "newest pane"], rows)}
