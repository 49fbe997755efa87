"""The history of an output's recalibrations on one HTML page (``costlib report --output OUTPUT
--history``): does anything drift across the scheduled runs?

The page covers every complete recalibrate run of ``OUTPUT/runs/`` (one with ``manifest.json``;
published or held by the publish guard) in run order: the manifest's ``started_utc``, then the
run id; ``--last N`` keeps the newest ``N``. Per run it reads the decision method's record of
every group (windowed runs: the record ``costlib decide`` applies,
:func:`costlib_pipelines.report.changes.applied_points`) and shows

- a table of the runs: times, published or held (with the guard's violations), the decision
  method, the groups' statuses and the audit share;
- a table of every group over the runs: latest thresholds with their range, how often they
  moved, flagged volume, precision among rated rows, estimated recall, statuses;
- for a bounded number of groups (:data:`MAX_PLOTTED_GROUPS`, chosen by
  :func:`plotted_groups`: ``__all__``, the groups named by ``--groups``, the groups a guard
  violation of a held run names, then the groups whose thresholds moved most) a figure of four
  small panels (thresholds per classifier, flagged volume, precision among rated rows with its
  bootstrap interval, estimated recall with its bootstrap interval) and one table row per run.

Audit share of a run: with ``--decisions DECIDE_OUTPUT`` the rows the decide runs that applied
the run's operating points sent to audit, per row decided (``audit.audited`` / ``decided`` of
their manifests); otherwise the rated audit-sample rows (audit probability < 1) per row read,
from the recalibrate manifest's row accounting (``audit.audited`` / ``read``). Neither is
recorded per group, so the share is per run; the page says which source each run's share comes
from, and where a figure is absent.

Same conventions as :mod:`costlib_pipelines.report.page`: one self-contained file, figures as
palette-PNG data URIs drawn by blitting (:mod:`costlib_pipelines.report.history_figures`), nothing
fetched from the network. The runs are read by :mod:`costlib_pipelines.report.history_data`; this
module computes what the page shows and ``templates/history.html.j2`` lays it out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from markupsafe import Markup

from costlib.thresholds.loop import ALL_GROUPS
from costlib_pipelines.io.files import InputError, write_output_file
from costlib_pipelines.io.runs import latest_run_id
from costlib_pipelines.report import cells
from costlib_pipelines.report.changes import group_order
from costlib_pipelines.report.formatting import (
    fmt_count,
    fmt_interval,
    fmt_ratio,
    fmt_threshold,
    fmt_time,
    sort_value,
)
from costlib_pipelines.report.group_section import proposed_parts
from costlib_pipelines.report.history_data import (
    MAX_PLOTTED_GROUPS,
    NOT_OK,
    POINT_NOT_OK,
    AuditShare,
    HistoryRun,
    held_groups,
    load_history,
    plotted_groups,
    threshold_movement,
)
from costlib_pipelines.report.history_figures import HistoryFigures, threshold_range
from costlib_pipelines.report.templates import render

__all__ = ["MAX_PLOTTED_GROUPS", "build_history", "write_history"]

#: The table of runs starts unfolded up to this many runs.
OPEN_RUNS = 30


def _publication(run: HistoryRun, latest: str | None) -> list[cells.Part]:
    """``published`` / ``held`` (+ LATEST, override) of a run."""
    if run.held:
        parts = [cells.badge("infeasible", "held"),
                 cells.text(f" {len(run.violations)} violation(s)")]
    elif run.manifest.get("published") is None:
        parts = [cells.badge("kept", "not recorded")]
    else:
        override = (run.manifest.get("guard") or {}).get("override")
        parts = [cells.badge("ok", "published")]
        if override:
            parts.append(cells.text(" over the guard"))
    if run.run_id == latest:
        parts.append(cells.text(" · LATEST"))
    return parts


def _audit_text(audit: AuditShare | None) -> str:
    if audit is None or audit.share is None:
        return "–"
    return f"{audit.share:.2%} ({audit.source})"


def _runs_view(runs: Sequence[HistoryRun], latest: str | None) -> dict[str, Any]:
    """One row per run: times, publication, method, statuses, audit share, ``__all__``."""
    rows = []
    for i, run in enumerate(runs):
        statuses = [p.get("status") for p in run.points.values()]
        points = [p.get("point_status") for p in run.points.values()]
        summary = ", ".join(f"{statuses.count(s)} {s.replace('_', ' ')}"
                            for s in ("ok", *NOT_OK) if s in statuses)
        limited = sum(p in POINT_NOT_OK for p in points)
        overall = run.points.get(ALL_GROUPS)
        violations = [cells.note(v) for v in run.violations[:3]]
        if len(run.violations) > 3:
            violations.append(cells.note(f"… {len(run.violations) - 3} more"))
        row = [
            cells.cell(i + 1, sort=i), cells.cell(run.run_id, sort=run.run_id),
            cells.cell(fmt_time(run.started)),
            cells.cell(*_publication(run, latest), *violations,
                       sort="held" if run.held else "published"),
            cells.cell(run.method), cells.cell(f"{len(run.points)}: {summary}"),
            cells.cell(limited, sort=limited),
            cells.cell(_audit_text(run.audit),
                       sort=sort_value(None if run.audit is None else run.audit.share)),
            cells.cell(", ".join(fmt_threshold(t) for t in (overall or {}).get("thresholds")
                                 or ()) or "–"),
        ]
        rows.append(cells.row(row, run=run.run_id, published="false" if run.held else "true"))
    headers = ["#", "run id", "started", "publication", "method", "groups: statuses",
               "points coverage-limited / infeasible", "audit share",
               f"thresholds of {ALL_GROUPS}"]
    sources = {run.audit.source for run in runs if run.audit is not None}
    audit_note = {
        frozenset(): "No run records an audit share: no audit_probability column in the "
                     "recalibrations (and no --decisions output with audited decide runs).",
        frozenset({"recalibrate"}): "Audit share (recalibrate): rated audit-sample rows "
                                    "(audit probability < 1) per row read, from each run's "
                                    "row accounting.",
        frozenset({"decide"}): "Audit share (decide): rows the decide runs applying this run "
                               "sent to audit, per row decided (--decisions).",
    }.get(frozenset(sources), "Audit share: (decide) rows sent to audit per row decided by "
                              "the decide runs applying the run (--decisions); (recalibrate) "
                              "rated audit-sample rows per row read.")
    absent = [run.run_id for run in runs if run.audit is None]
    if absent and sources:
        audit_note += f" No audit share for {len(absent)} run(s) (–)."
    return {"count": len(runs), "held": sum(run.held for run in runs), "audit_note": audit_note,
            "open": len(runs) <= OPEN_RUNS, "table": cells.table(headers, rows, "runs history")}


def _range_text(values: Sequence[float | None], fmt: Any) -> str:
    finite = [v for v in values if v is not None and not math.isnan(v)]
    if not finite:
        return "–"
    return f"{fmt(min(finite))} – {fmt(max(finite))}"


def _groups_table(runs: Sequence[HistoryRun], groups: Sequence[str],
                  classifiers: Sequence[str], plotted: Mapping[str, Sequence[str]],
                  anchors: Mapping[str, str]) -> dict[str, Any]:
    """One row per group over all runs: latest values and ranges, moves, statuses."""
    held = held_groups(runs, groups)
    rows = []
    for group in groups:
        seen = [run.points[group] for run in runs if group in run.points]
        last = seen[-1]
        moves, total = threshold_movement(runs, group)
        row = [cells.cell(cells.link(group, anchors.get(group)), sort=group),
               cells.cell(len(seen), sort=len(seen)),
               cells.cell(cells.badge(last["status"]), sort=last["status"]),
               cells.cell(moves, sort=moves), cells.cell(f"{total:.4f}", sort=repr(total))]
        for j, _name in enumerate(classifiers):
            values = [p["thresholds"][j] for p in seen
                      if p.get("thresholds") is not None and len(p["thresholds"]) > j]
            now = (last.get("thresholds") or [None] * (j + 1))[j] \
                if len(last.get("thresholds") or ()) > j else None
            finite = [v for v in values if not math.isinf(v)]
            span = _range_text(finite, fmt_threshold) if finite else "–"
            row.append(cells.cell(cells.interval(fmt_threshold(now), span),
                                  sort=sort_value(now)))
        volumes = [p.get("volume") for p in seen]
        precisions = [p.get("precision") for p in seen]
        recalls = [p.get("estimated_recall") for p in seen]
        row += [
            cells.cell(cells.interval(fmt_count(last.get("volume")),
                                      _range_text(volumes, fmt_count)),
                       sort=sort_value(last.get("volume"))),
            cells.cell(cells.interval(fmt_ratio(last.get("precision")),
                                      _range_text(precisions, fmt_ratio)),
                       sort=sort_value(last.get("precision"))),
            cells.cell(cells.interval(fmt_ratio(last.get("estimated_recall")),
                                      _range_text(recalls, fmt_ratio)),
                       sort=sort_value(last.get("estimated_recall"))),
            cells.cell(sum(p.get("status") in NOT_OK for p in seen)),
            cells.cell(sum(p.get("point_status") in POINT_NOT_OK for p in seen)),
            cells.cell(held.get(group, 0)),
            cells.cell(", ".join(plotted.get(group, ()))),
        ]
        rows.append(cells.row(row, group=group))
    headers = ["group", "runs", "latest status", "moves", "total movement",
               *(f"t[{c}] latest (range)" for c in classifiers),
               "volume latest (range)", "precision latest (range)",
               "est. recall latest (range)", "runs not ok", "points limited",
               "held runs naming it", "figure"]
    return cells.table(headers, rows, "groups history")


def _group_rows(runs: Sequence[HistoryRun], group: str, classifiers: Sequence[str]
                ) -> list[dict[str, Any]]:
    rows = []
    for i, run in enumerate(runs):
        p = run.points.get(group)
        publication = "held" if run.held else "published"
        head = [cells.cell(i + 1), cells.cell(run.run_id), cells.cell(publication)]
        if p is None:
            absent = cells.cell("not in this run", css="note", colspan=len(classifiers) + 5)
            rows.append(cells.row([*head, absent], run=run.run_id, group=group))
            continue
        thresholds = p.get("thresholds")
        row = [cells.cell(cells.badge(p["status"]), status=p["status"]),
               cells.cell(p.get("point_status") or "–")]
        for j in range(len(classifiers)):
            value = (thresholds[j] if thresholds is not None and len(thresholds) > j
                     else None)
            row.append(cells.cell(fmt_threshold(value), *proposed_parts(p, j, title=""),
                                  value=sort_value(value)))
        row += [
            cells.cell(fmt_count(p.get("volume")), value=sort_value(p.get("volume"))),
            cells.cell(cells.interval(fmt_ratio(p.get("precision")), fmt_interval(
                p.get("precision_ci_low"), p.get("precision_ci_high"), fmt_ratio)),
                value=sort_value(p.get("precision"))),
            cells.cell(cells.interval(fmt_ratio(p.get("estimated_recall")), fmt_interval(
                p.get("estimated_recall_ci_low"), p.get("estimated_recall_ci_high"),
                fmt_ratio)), *_recall_evidence(p), value=sort_value(p.get("estimated_recall"))),
        ]
        rows.append(cells.row(head + row, run=run.run_id, group=group))
    return rows


def _recall_evidence(point: Mapping[str, Any]) -> list[cells.Part]:
    """The audit evidence behind a run's recall interval (positives found among the audited
    rows the thresholds do not flag), flagged when the interval is wider than
    ``recall.max_width`` (the record's ``recall_warning`` as its tooltip)."""
    found, audited = point.get("audit_missed_positives_found"), point.get("audit_missed_audited")
    if found is None or audited is None:
        return []
    warning = point.get("recall_warning")
    return [cells.note(f"{found:g} found in {audited:g} audited" + (" · wide" if warning else ""),
                       "note warn" if warning else "note", warning or "")]


def _group_view(runs: Sequence[HistoryRun], group: str, classifiers: Sequence[str],
                anchor: str, reasons: Sequence[str], figure: str) -> dict[str, Any]:
    points = [run.points.get(group) for run in runs]
    notes = []
    if all(p is None or p.get("estimated_recall") is None for p in points):
        notes.append("no estimated recall in any run (no audit rows: "
                     "columns.audit_probability)")
    if all(p is None or p.get("precision_ci_low") is None for p in points):
        notes.append("no bootstrap interval of precision (bootstrap.replicates 0)")
    if all(p is None or p.get("volume") is None for p in points):
        notes.append("no flagged volume (records written before volume existed)")
    missing = sum(p is None for p in points)
    if missing:
        notes.append(f"absent from {missing} run(s)")
    title = f"{group} (all groups)" if group == ALL_GROUPS else group
    headers = ["#", "run id", "publication", "status", "point",
               *(f"t[{c}]" for c in classifiers), "volume", "precision [CI]",
               "est. recall [CI]"]
    return {"group": group, "anchor": anchor, "title": title, "reasons": ", ".join(reasons),
            "absent": "; ".join(notes), "figure": Markup(figure),
            "table": cells.table(headers, _group_rows(runs, group, classifiers),
                                 "group-history")}


def build_history(runs: Sequence[HistoryRun], output: str, *, groups: Iterable[str] = (),
                  all_groups: bool = False, latest: str | None = None) -> str:
    """The history page of ``runs`` (in run order) as one HTML string.

    Raises
    ------
    InputError
        A selected group is in none of the runs.
    """
    names = group_order(g for run in runs for g in run.points)
    selected = list(dict.fromkeys(groups))
    unknown = [g for g in selected if g not in set(names)]
    if unknown:
        raise InputError(f"{output}: no group {', '.join(map(repr, unknown))} in any of the "
                         f"{len(runs)} run(s) ({len(names)} groups)")
    classifiers = list(dict.fromkeys(c for run in runs for c in run.classifiers))
    plotted = plotted_groups(runs, names, selected=selected,
                             limit=None if all_groups else MAX_PLOTTED_GROUPS)
    anchors = {g: f"history-{i}" for i, g in enumerate(plotted)}
    sections = []
    if plotted:
        drawer = HistoryFigures(runs, classifiers, threshold_range(runs, plotted))
        for group, reasons in plotted.items():
            figure = drawer.uri([run.points.get(group) for run in runs])
            sections.append(_group_view(runs, group, classifiers, anchors[group], reasons,
                                        figure))
    rule = ("Figures: every group (--all-groups)." if all_groups else
            f"Figures for at most {MAX_PLOTTED_GROUPS} groups: {ALL_GROUPS}, the groups named "
            "with --groups, the groups a held run's guard violations name, then those whose "
            "thresholds moved in the most runs (then by total movement); "
            f"{len(plotted)} of {len(names)} groups here. Every group is a row of the table "
            "'Groups over the runs'.")
    return render(
        "history.html.j2", title=f"costlib report — history of {output}", output=output,
        count=len(runs), first=runs[0].run_id, last=runs[-1].run_id, groups=len(names),
        held=sum(run.held for run in runs), rule=rule, runs=_runs_view(runs, latest),
        groups_table=_groups_table(runs, names, classifiers, plotted, anchors),
        sections=sections)


def write_history(output: str, out: str | None = None, *, groups: Iterable[str] = (),
                  last: int | None = None, all_groups: bool = False,
                  decisions: str | None = None) -> str:
    """Write the history page of ``output``; returns the path written.

    Parameters
    ----------
    output : str
        A recalibrate output directory.
    out : str, optional
        Where to write; by default ``OUTPUT/history.html``.
    groups : iterable of str
        Groups that get a figure in any case.
    last : int, optional
        Only the newest ``last`` runs.
    all_groups : bool
        A figure for every group, however many.
    decisions : str, optional
        A decide output directory, for audit shares (see the module doc).

    Raises
    ------
    InputError
        See :func:`load_history`; or a selected group is in no run.
    """
    output = output.rstrip("/")
    runs = load_history(output, last=last, decisions=decisions)
    try:
        latest = latest_run_id(output)
    except InputError:
        latest = None
    document = build_history(runs, output, groups=groups, all_groups=all_groups,
                             latest=latest)
    target = out or f"{output}/history.html"
    write_output_file(target, document.encode("utf-8"), what="the report")
    return target
