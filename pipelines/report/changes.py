"""What the report compares: the record shown per group and method (:func:`applied_points`),
the thresholds' change since the previous run (:func:`threshold_changes`), and which groups get
a section of their own in a large report (:func:`detail_reasons`).

Windowed runs: each group is shown at the window ``costlib decide`` applies
(:func:`applied_points`: by default its latest *complete* window, see
:mod:`costlib_pipelines.decide.pipeline`) and that window's newest pane. The change from the
previous run compares those thresholds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from costlib.thresholds.loop import ALL_GROUPS
from costlib_pipelines.io.published_points import uncovered_share
from costlib_pipelines.report.runs_data import RunData

__all__ = ["Key", "ThresholdChange", "applied_points", "detail_reasons",
           "group_order", "latest_points", "shown_points", "threshold_changes"]

Key = tuple[str, str]


def _window_key(record: Mapping[str, Any]) -> tuple[float, int]:
    """Sort key: later window end, then later pane (batch records sort first)."""
    end = record["window_end"]
    return (end.timestamp() if end is not None else -math.inf, int(record["pane_index"]))


def latest_points(records: Iterable[Mapping[str, Any]]) -> dict[Key, dict[str, Any]]:
    """The record shown per ``(group, method)``: its latest window and that window's newest pane.

    In a batch run (no windows) that is simply every record.
    """
    chosen: dict[Key, dict[str, Any]] = {}
    for record in records:
        key = (record["group"], record["method"])
        if key not in chosen or _window_key(record) > _window_key(chosen[key]):
            chosen[key] = dict(record)
    return chosen


def applied_points(run: RunData) -> dict[Key, dict[str, Any]]:
    """The record shown per ``(group, method)``: the one ``costlib decide`` applies.

    Batch runs: every record. Windowed runs: with ``decide.window: latest_complete`` (the
    default) a window counts when at most ``decide.max_uncovered_share`` of it lies outside the
    event-time range the run read
    (:func:`costlib_pipelines.io.published_points.uncovered_share`); each group is shown at its
    latest such window and that window's newest pane. A group with no complete
    window is shown at its latest window with ``window_complete`` False: ``decide`` gives it
    the all-groups thresholds instead. Without a recorded range every window counts.
    """
    settings = (run.manifest.get("config") or {}).get("decide") or {}
    time_range = run.manifest.get("event_time_range")
    if not (run.windowed and time_range and settings.get("window", "latest_complete")
            != "latest"):
        return latest_points(run.records)
    tolerance = settings.get("max_uncovered_share", 0.01)
    complete = [r for r in run.records if uncovered_share(
        (r["window_start"], r["window_end"]), time_range) <= tolerance]
    chosen = latest_points(complete)
    for key, record in latest_points(run.records).items():
        if key not in chosen:
            chosen[key] = {**record, "window_complete": False}
    return chosen


@dataclass(frozen=True)
class ThresholdChange:
    """One classifier's threshold of one (group, method): previous run -> this run.

    ``difference`` is ``new - old`` when both are finite, 0.0 when both are off (+inf), and
    None otherwise; ``note`` says what happened in words.
    """

    group: str
    method: str
    classifier: str
    old: float | None
    new: float | None
    difference: float | None
    note: str


def _change_note(old: float | None, new: float | None) -> tuple[float | None, str]:
    """``(difference, note)`` for one threshold, old -> new (see ThresholdChange)."""
    if old is None and new is None:
        return None, "no thresholds in either run"
    if old is None:
        return None, "no thresholds before"
    if new is None:
        return None, "no thresholds now"
    if math.isinf(old) and math.isinf(new):
        return 0.0, "off in both runs"
    if math.isinf(old):
        return None, "switched on"
    if math.isinf(new):
        return None, "switched off"
    difference = new - old
    return difference, "unchanged" if difference == 0 else ("raised" if difference > 0
                                                             else "lowered")


def threshold_changes(
    previous: Mapping[Key, Mapping[str, Any]],
    current: Mapping[Key, Mapping[str, Any]],
    classifiers: Sequence[str],
) -> list[ThresholdChange]:
    """Per (group, method, classifier): old and new thresholds and their difference.

    Both arguments are :func:`latest_points` of a run. A (group, method) present in only one
    run gets rows with None on the missing side.
    """
    changes = []
    for group, method in sorted(set(previous) | set(current)):
        old_record = previous.get((group, method))
        new_record = current.get((group, method))
        old = (old_record or {}).get("thresholds") or [None] * len(classifiers)
        new = (new_record or {}).get("thresholds") or [None] * len(classifiers)
        for name, a, b in zip(classifiers, old, new, strict=True):
            difference, note = _change_note(a, b)
            if old_record is None:
                note = "new in this run"
            elif new_record is None:
                note = "not in this run"
            changes.append(ThresholdChange(group, method, name, a, b, difference, note))
    return changes


def group_order(groups: Iterable[str]) -> list[str]:
    """Groups sorted by name, the all-groups grid last."""
    return sorted(set(groups), key=lambda g: (g == ALL_GROUPS, g))



#: Threshold changes that count as "changed" (see :func:`_change_note`).
_MOVED = ("raised", "lowered", "switched on", "switched off", "no thresholds before",
          "no thresholds now", "new in this run")


def detail_reasons(run: RunData, shown: Mapping[str, Mapping[str, Any]],
                   changes: Sequence[ThresholdChange],
                   selected: Iterable[str] = ()) -> dict[str, list[str]]:
    """Why each group deserves a section of its own in a large report (groups without a
    reason are absent).

    Reasons: ``changed`` (a threshold of the decision method moved since the previous run,
    was switched on or off, or appeared), ``fallback`` / ``kept`` / ``insufficient data``
    (its status: thresholds not chosen on its own rated rows),
    ``coverage limited`` / ``infeasible`` (its point status), ``held`` (a publish-guard
    violation names it), ``all groups`` (the parent the fallbacks use) and ``selected``
    (named in ``selected``).
    """
    reasons: dict[str, list[str]] = {}

    def add(group: str, reason: str) -> None:
        if reason not in reasons.setdefault(group, []):
            reasons[group].append(reason)

    for change in changes:
        point = shown.get(change.group)
        if point is not None and change.method == point["method"] and change.note in _MOVED:
            add(change.group, "changed")
    violations = ((run.manifest.get("guard") or {}).get("violations") or []
                  if not run.manifest.get("published", True) else [])
    for group, point in shown.items():
        if point["status"] in ("fallback", "kept", "insufficient_data"):
            add(group, point["status"].replace("_", " "))
        if point.get("point_status") in ("coverage_limited", "infeasible",
                                         "resolution_limited"):
            add(group, point["point_status"].replace("_", " "))
        if any(f"group {group!r}" in str(v) for v in violations):
            add(group, "held")
        if group == ALL_GROUPS:
            add(group, "all groups")
    for group in selected:
        add(group, "selected")
    return reasons


def shown_points(points: Mapping[Key, Mapping[str, Any]], groups: Sequence[str],
                  method: str) -> dict[str, Mapping[str, Any]]:
    """Per group the record the overview shows: its decision-method record, else its first."""
    first: dict[str, Mapping[str, Any]] = {}
    for (group, _), point in points.items():
        first.setdefault(group, point)
    return {g: points.get((g, method)) or first[g] for g in groups}

