"""A self-contained HTML report of one recalibration run (``costlib report --run DIR``).

The report is one HTML file: text, tables, matplotlib figures embedded as base64 PNG data
URIs and one small inline script (search and sort of the group table), with no external file
and nothing fetched from the network. It shows

- the run: id, times, runner, inputs, rule, target, methods, publication status, and the row
  accounting of ``manifest.json`` (read = used + unrated + dead-lettered, by reason);
- an overview of every group: status, rated rows, the decision method's thresholds and their
  change since the previous run, and its point's flagged volume, coverage and point status
  (``ok`` / ``coverage_limited`` / ``infeasible``, with the reason); a search box keeps the
  rows containing every word typed, and a click on a column title sorts by it;
- per group: the operating point of each method with its bootstrap intervals (when the run
  computed them), flagged volume, coverage and point status with its reason, the PN curves
  with the chosen points (from ``pn_curves.parquet``; in shares ``FP / N`` and ``TP / P`` of
  the group's rated negatives and positives, which the note under the figure states), the
  paths in threshold-index space (k = 2), the fallback or insufficient-data status, and every
  threshold's change from the previous run (old -> new and the difference).

Up to :data:`MAX_DETAILED_GROUPS` groups every group has its section. Above, only the groups
that need a look (:func:`detail_reasons`: changed since the previous run, fell back, kept the
thresholds in force or have none, coverage-limited, resolution-limited or infeasible point,
named by the publish guard, ``__all__``) and those selected (``--groups``) have one;
``--all-groups`` restores every section. The figures are blitted
(:mod:`costlib_pipelines.report.figures`): two figures per
report whose axes, ticks and legends are drawn once per view, and per group only its data,
stored as small palette PNGs (100 groups: about a ninth of the time of drawing each figure
whole; ``tests/benchmarks/bench_report.py``).

The *previous run* and windowed runs: :mod:`.runs_data` and :mod:`.changes`. The page is laid
out by ``templates/run.html.j2`` from what :mod:`.sections` and :mod:`.group_section`
compute (:mod:`.templates`: the Jinja2 environment).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from costlib_pipelines.io.files import InputError, write_output_file
from costlib_pipelines.report.capacity import capacity_view
from costlib_pipelines.report.changes import (
    ThresholdChange,
    applied_points,
    detail_reasons,
    group_order,
    shown_points,
    threshold_changes,
)
from costlib_pipelines.report.group_section import group_view
from costlib_pipelines.report.run_figures import curve_index, group_figures
from costlib_pipelines.report.runs_data import RunData, load_run, previous_run
from costlib_pipelines.report.sections import (
    accounting_view,
    overview_view,
    run_view,
    status_counts,
    windows_view,
)
from costlib_pipelines.report.templates import render

__all__ = ["MAX_DETAILED_GROUPS", "build_report", "write_report"]

#: Up to this many groups every group gets its section; above it only the groups
#: :func:`detail_reasons` names (and those selected), the rest are rows of the overview.
MAX_DETAILED_GROUPS = 200


def build_report(run: RunData, previous: RunData | None, *, groups: Iterable[str] = (),
                 all_details: bool = False) -> str:
    """The whole report of ``run`` (compared with ``previous``) as one HTML string.

    Up to :data:`MAX_DETAILED_GROUPS` groups (or with ``all_details``) every group gets a
    section with its figures; above, only the groups :func:`detail_reasons` names and the
    ``groups`` selected, and the overview table (search, sort) lists every group.

    Raises
    ------
    InputError
        A selected group is not in the run.
    """
    points = applied_points(run)
    old = applied_points(previous) if previous is not None else {}
    changes = threshold_changes(old, points, run.classifiers) if previous is not None else []
    config = run.manifest.get("config", {})
    methods = list(config.get("methods") or sorted({m for _, m in points}))
    method = config.get("decision_method") or methods[0]
    names = group_order(g for g, _ in points)
    selected = list(dict.fromkeys(groups))
    unknown = [g for g in selected if g not in set(names)]
    if unknown:
        raise InputError(f"{run.run_dir}: no group {', '.join(map(repr, unknown))} in this run "
                         f"({len(names)} groups)")
    shown = shown_points(points, names, method)
    detailed_all = all_details or len(names) <= MAX_DETAILED_GROUPS
    reasons = {} if detailed_all else detail_reasons(run, shown, changes, selected)
    detailed = names if detailed_all else [g for g in names if g in reasons]
    position = {g: i for i, g in enumerate(names)}
    anchors = {g: f"group-{position[g]}" for g in detailed}
    index = curve_index(run)
    drawer = group_figures(run, methods, points, index)
    order = {m: i for i, m in enumerate(methods)}
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for (group, _), point in points.items():
        by_group.setdefault(group, []).append(point)
    changes_of: dict[str, list[ThresholdChange]] = {}
    for change in changes:
        changes_of.setdefault(change.group, []).append(change)
    sections = []
    for group in detailed:
        mine = sorted(by_group[group],
                      key=lambda p: (order.get(p["method"], len(order)), p["method"]))
        sections.append(group_view(run, anchors, mine, changes_of.get(group, []), previous,
                                   drawer, index, reasons.get(group, ())))
    return render(
        "run.html.j2", title=f"costlib report — {run.run_id}", run_id=run.run_id,
        counts=status_counts(shown), methods=", ".join(methods),
        run=run_view(run, previous), accounting=accounting_view(run.manifest),
        capacity=capacity_view(run.manifest, run.records),
        overview=overview_view(names, shown, changes, run.classifiers, previous, method,
                               anchors, reasons, detailed_all),
        windows=windows_view(run.records) if run.windowed else None, groups=sections)


def write_report(run_path: str, out: str | None = None, *, groups: Iterable[str] = (),
                 all_details: bool = False) -> str:
    """Write the report of the run at ``run_path``; returns the path written.

    Parameters
    ----------
    run_path : str
        A run directory, or a recalibrate output directory (its ``LATEST`` run).
    out : str, optional
        Where to write; by default ``report.html`` inside the run directory.
    groups : iterable of str
        Groups that get a section in any case (see :func:`build_report`).
    all_details : bool
        A section for every group, however many.

    Raises
    ------
    InputError
        See :func:`load_run`; or a selected group is not in the run.
    """
    run = load_run(run_path)
    document = build_report(run, previous_run(run), groups=groups, all_details=all_details)
    target = out or f"{run.run_dir}/report.html"
    write_output_file(target, document.encode("utf-8"), what="the report")
    return target
