"""What the section of one group shows (laid out by ``templates/group.html.j2``): its status in
words, the operating point of each method with its bootstrap intervals, flagged volume, coverage
and point status, the PN curves and the paths in threshold space, and every threshold's change
from the previous run (old -> new and the difference).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from costlib.thresholds.loop import ALL_GROUPS, NOT_SWITCHED_ON, ReasonCode
from costlib_pipelines.io.units import ROWS, fmt_weighted, is_count, rated_rows
from costlib_pipelines.report import cells
from costlib_pipelines.report.changes import ThresholdChange
from costlib_pipelines.report.figures import GroupFigures
from costlib_pipelines.report.formatting import (
    fmt_count,
    fmt_interval,
    fmt_ratio,
    fmt_threshold,
    plural,
)
from costlib_pipelines.report.run_figures import curves_of
from costlib_pipelines.report.runs_data import RunData

__all__ = ["COVERAGE_HEADERS", "change_css", "coverage_cells", "fmt_difference", "group_view",
           "proposed_parts"]

#: Columns of :func:`coverage_cells`.
COVERAGE_HEADERS = ("volume", "coverage", "point")

Index = Mapping[tuple[Any, Any, Any], dict[str, Any]]


def fmt_difference(change: ThresholdChange) -> str:
    """A threshold difference (``0``, ``+0.0435``) or what happened in words."""
    if change.difference is None:
        return change.note
    return "0" if change.difference == 0 else f"{change.difference:+.4f}"


def change_css(change: ThresholdChange | None) -> str:
    """CSS class of a threshold cell: ``moved`` when it changed."""
    return "" if change is None or change.difference == 0 else "moved"


def coverage_cells(point: Mapping[str, Any]) -> list[list[cells.Part]]:
    """The parts of the flagged volume, coverage and point status (reason as its title) cells
    of a record; records written before these fields existed show empty cells."""
    status = point.get("point_status")
    if status is None:
        return [[], [], []]
    reason = point.get("reason")
    badge = cells.reason_badge(status, reason) if reason else cells.badge(status)
    return [[cells.text(fmt_count(point.get("volume")))],
            [cells.text(fmt_ratio(point.get("coverage")))], [badge]]


#: Tooltip of a proposed threshold on the run page (the history page explains it once).
PROPOSED_TITLE = ("The method's own point; the evidence rule (in_force.evidence_z) published "
                  "other thresholds because the audit data did not yet support the whole move. "
                  "costlib decide audits the rows this point would flag "
                  "(audit.strata.proposal_stratum).")


def proposed_parts(point: Mapping[str, Any], j: int, title: str = PROPOSED_TITLE
                   ) -> list[cells.Part]:
    """The method's own threshold of classifier ``j`` when the evidence rule published another
    (``proposed_thresholds``: the thresholds in force were kept, or moved part way); nothing for
    a point that is the method's own, or for records written before the field existed."""
    proposed = point.get("proposed_thresholds")
    if proposed is None or len(proposed) <= j:
        return []
    return [cells.note(f"proposed {fmt_threshold(proposed[j])}", "note proposed", title)]


def _resolution_note(point: Mapping[str, Any]) -> list[cells.Part]:
    """The resolution check of a record: the objective against the most any finer lattice of
    the same rows could reach (``finer_bound``; nothing for records without it)."""
    bound, value = point.get("finer_bound"), point.get("objective_value")
    if bound is None or value is None:
        return []
    name = point.get("objective") or "objective"
    title = (f"{name} at the point: {value:.6g}. No threshold tuple between the candidate "
             f"thresholds (a finer lattice of the same rows) can exceed {bound:.6g}: a "
             "bound, not an estimate (costlib.thresholds.point._resolution).")
    text = ("finer lattice: no better" if bound <= value
            else f"finer lattice ≤ {bound:.4g} (here {value:.4g})")
    return [cells.note(text, "note resolution", title)]


def _estimated_recall(point: Mapping[str, Any]) -> list[cells.Part]:
    """``TP / P̂`` with its interval and ``P̂`` (audit data only), the audit evidence behind
    it (positives found among the audited rows the thresholds do not flag), the audit share a
    target width needs, and the warning of an interval wider than ``recall.max_width``."""
    recall = point.get("estimated_recall")
    if recall is None:
        return []
    low, high = point.get("estimated_recall_ci_low"), point.get("estimated_recall_ci_high")
    bracket = fmt_interval(low, high, fmt_ratio)
    total = fmt_count(point.get("estimated_total_positives"))
    source = point.get("recall_interval")
    parts = [cells.interval(fmt_ratio(recall), bracket),
             cells.note(f"of P̂ {total}" + (f" ({source} interval)" if source else ""))]
    found, audited = point.get("audit_missed_positives_found"), point.get("audit_missed_audited")
    if found is not None and audited is not None:
        strata = zip(point.get("audit_strata_pi") or [], point.get("audit_strata_rows") or [],
                     point.get("audit_strata_audited") or [],
                     point.get("audit_strata_positives") or [], strict=False)
        title = "; ".join(f"π {pi:.3g}: {pos:g} positives in {aud:g} audited of {rows:.0f} rows"
                          for pi, rows, aud, pos in strata)
        parts.append(cells.note(f"audit below: {found:g} positives in {audited:g} rated",
                                "note", title))
    need = point.get("audit_share_needed")
    if need is not None:
        parts.append(cells.note(f"audit for the target width: {need:.2%} of unflagged rows",
                                "note", "recall.target_half_width; "
                                "costlib.audit.audit_for_recall_width"))
    if point.get("recall_warning"):
        parts.append(cells.note("wide interval: the audit cannot say more yet", "note warn",
                                str(point["recall_warning"])))
    return parts


def _unit(points: Sequence[Mapping[str, Any]]) -> str:
    """The unit of the records' weighted sums (:mod:`costlib_pipelines.io.units`)."""
    return next((p.get("weight_unit") for p in points if p.get("weight_unit")), ROWS)


def _points_table(points: Sequence[Mapping[str, Any]], classifiers: Sequence[str]
                  ) -> dict[str, Any]:
    """One row per method: thresholds, TP, FP, precision (with intervals).

    TP and FP are counts of rows (integers) in plain runs and weighted sums labelled with
    their unit otherwise (``~`` marks an estimate). With audit data (any record with
    ``estimated_recall``) a last column shows the estimated recall ``TP / P̂`` with its
    interval and the Horvitz–Thompson total ``P̂``.
    """
    estimated = any(p.get("estimated_recall") is not None for p in points)
    unit = _unit(points)

    def amount(value: float | None) -> str:
        if value is None or is_count(unit):
            return fmt_count(value)
        return fmt_weighted(value, unit)

    rows = []
    for p in points:
        low, high = p["threshold_ci_low"], p["threshold_ci_high"]
        row = [cells.cell(p["method"])]
        for j in range(len(classifiers)):
            value = None if p["thresholds"] is None else p["thresholds"][j]
            bracket = ("" if low is None or high is None
                       else fmt_interval(low[j], high[j], fmt_threshold))
            row.append(cells.cell(cells.interval(fmt_threshold(value), bracket),
                                  *proposed_parts(p, j)))
        row += [
            cells.cell(cells.interval(amount(p["tp"]), fmt_interval(
                p["tp_ci_low"], p["tp_ci_high"], amount))),
            cells.cell(cells.interval(amount(p["fp"]), fmt_interval(
                p["fp_ci_low"], p["fp_ci_high"], amount))),
            cells.cell(cells.interval(fmt_ratio(p["precision"]), fmt_interval(
                p["precision_ci_low"], p["precision_ci_high"], fmt_ratio))),
            cells.cell(f"{fmt_ratio(p['marginal_precision_left'])} / "
                       f"{fmt_ratio(p['marginal_precision_right'])}"),
        ]
        coverage = coverage_cells(p)
        coverage[-1] += _resolution_note(p)
        row += [cells.cell(*parts) for parts in coverage]
        if estimated:
            row.append(cells.cell(*_estimated_recall(p)))
        rows.append(cells.row(row, group=p["group"], method=p["method"]))
    tp_fp = ["TP", "FP"] if is_count(unit) else [f"TP ({unit})", f"FP ({unit})"]
    headers = ["method", *(f"t[{c}]" for c in classifiers), *tp_fp, "precision",
               "marginal precision in / out", *COVERAGE_HEADERS,
               *(["est. recall (audit)"] if estimated else [])]
    return cells.table(headers, rows, "points")


def _intervals(points: Sequence[Mapping[str, Any]], bootstrap: Mapping[str, Any]
               ) -> dict[str, Any]:
    """What the bracketed intervals are (``shown``), or why there are none (``off``: no
    replicates; ``none``)."""
    if any(p["threshold_ci_low"] is not None for p in points):
        level = bootstrap.get("level")
        return {"kind": "shown", "share": f"{level:.0%} " if level is not None else "",
                "replicates": bootstrap.get("replicates", "?")}
    return {"kind": "none" if bootstrap.get("replicates") else "off", "share": "",
            "replicates": ""}


def _changes(changes: Sequence[ThresholdChange], classifiers: Sequence[str],
             methods: Sequence[str]) -> dict[str, Any]:
    """One group's thresholds, previous run -> this run, one row per method."""
    by_key = {(c.method, c.classifier): c for c in changes}
    rows = []
    for method in methods:
        row = [cells.cell(method)]
        for name in classifiers:
            c = by_key.get((method, name))
            if c is None:
                row += [cells.cell(), cells.cell()]
                continue
            row.append(cells.cell(f"{fmt_threshold(c.old)} → {fmt_threshold(c.new)}"))
            row.append(cells.cell(fmt_difference(c), css=change_css(c), classifier=name,
                                  difference="" if c.difference is None else repr(c.difference)))
        rows.append(cells.row(row, group=changes[0].group if changes else "", method=method))
    headers = ["method"]
    for name in classifiers:
        headers += [f"t[{name}]: old → new", "difference"]
    return cells.table(headers, rows, "changes")


def _window(point: Mapping[str, Any]) -> dict[str, Any] | None:
    """The window a windowed record is shown at (None for batch records)."""
    if point["window_start"] is None:
        return None
    return {"start": f"{point['window_start']:%Y-%m-%d %H:%M}",
            "end": f"{point['window_end']:%Y-%m-%d %H:%M}",
            "pane": int(point["pane_index"]), "complete": point.get("window_complete", True)}


def _figures(run: RunData, points: Sequence[Mapping[str, Any]], drawer: GroupFigures,
             index: Index, changes: Sequence[ThresholdChange],
             previous: RunData | None) -> dict[str, Any] | None:
    """The PN curves and the threshold-space paths of one group (None without a PN figure);
    ``changes`` are the group's, for the previous run's thresholds of the decision method."""
    curves = [curves_of(run, p, index) for p in points]
    pn = drawer.pn_uri(points, curves)
    if pn is None or drawer.last_view is None:
        return None
    view = drawer.last_view
    old = {c.classifier: c.old for c in changes if c.method == drawer.decision}
    before = [old.get(name) for name in run.classifiers] if old else None
    paths = drawer.path_uri(points, curves, before)
    axes = ("Axes: lattice index of each classifier's threshold (ticks show the threshold "
            "value; the last index is off)." if drawer.lattice is not None else
            "Axes: lattice index of each classifier's threshold (the run's lattice cannot "
            "be rebuilt: quantile edges, or edges added from thresholds in force of a run "
            "that is gone; so the ticks are indices).")
    marked = ""
    if paths is not None and drawer.lattice is not None and previous is not None:
        marked = (f" Black cross: the previous run's ({previous.run_id}) thresholds of "
                  f"{drawer.decision}, at their place in this run's lattice"
                  + ("." if before and None not in before else " (none for this group)."))
    unit = _unit(points)
    estimated = any(p.get("estimated_recall") is not None for p in points)
    if is_count(unit):
        negatives, positives = plural(view.n, "rated negative"), plural(view.p, "rated positive")
    else:
        negatives = f"{fmt_weighted(view.n, unit)} ({unit}, rated negatives)"
        positives = f"{fmt_weighted(view.p, unit)} ({unit}, rated positives)"
    recall = ("With audit data P is P̂, the estimated total of positives, so TP / P is the "
              "estimated recall (its interval is in the table: the curve shows the point "
              "estimate only)." if estimated else
              "P holds the rated positives only, so TP / P is not recall: positives nobody "
              "rated are not in P.")
    return {"pn": Markup(pn), "n": repr(view.n), "p": repr(view.p),
            "negatives": negatives, "positives": positives, "recall": recall,
            "zoom_x": f"{view.zoom_x:g}",
            "paths": None if paths is None else Markup(paths),
            "axes": axes, "marked": marked,
            "k": len(run.classifiers)}


def _not_switched_on(record: Mapping[str, Any]) -> bool:
    """The record's method did not switch its group on (``reason_code``; records written
    before the field existed say so only in their reason)."""
    if "reason_code" in record:
        return record["reason_code"] == ReasonCode.NOT_SWITCHED_ON.value
    return (record.get("reason") or "").startswith(NOT_SWITCHED_ON)


def group_view(run: RunData, anchors: Mapping[str, str], points: Sequence[Mapping[str, Any]],
               changes: Sequence[ThresholdChange], previous: RunData | None,
               drawer: GroupFigures, index: Index, reasons: Sequence[str] = ()
               ) -> dict[str, Any]:
    """Everything about one group: status, points, intervals, figures, change.

    ``anchors`` holds the section ids of the groups that have a section; ``changes`` are this
    group's; ``reasons`` say why the group is shown in detail (large reports only).
    """
    first = points[0]
    group = first["group"]
    config = run.manifest.get("config", {})
    min_rated = config.get("min_rated", {})
    positive_rows, negative_rows = rated_rows(first)
    unit = _unit(points)
    weighted = "" if is_count(unit) else (
        f"; weighted: {fmt_weighted(first['rated_positives'], unit)} and "
        f"{fmt_weighted(first['rated_negatives'], unit)} {unit}")
    parent = first["fallback_group"] or ALL_GROUPS
    has_thresholds = not all(p["thresholds"] is None for p in points)
    return {
        "group": group, "anchor": anchors[group], "status": first["status"],
        "title": f"{group} (all groups)" if group == ALL_GROUPS else group,
        "reasons": ", ".join(reasons), "window": _window(first),
        "own": (f"{plural(positive_rows, 'rated positive row')} and "
                f"{plural(negative_rows, 'rated negative row')} of its own{weighted}"),
        "needed": (f"min_rated: {min_rated.get('positives', '?')} positive and "
                   f"{min_rated.get('negatives', '?')} negative rows"),
        "parent": parent, "parent_anchor": anchors.get(parent), "reason": first.get("reason"),
        "not_switched_on": _not_switched_on(first),
        "points": _points_table(points, run.classifiers) if has_thresholds else None,
        "intervals": _intervals(points, config.get("bootstrap", {})),
        "figures": _figures(run, points, drawer, index, changes, previous),
        "previous": None if previous is None else previous.run_id,
        "changes": _changes(changes, run.classifiers, [p["method"] for p in points]),
    }
