"""The publish guard per event-time window of a windowed recalibration run.

A windowed run writes one set of operating points per window (``windows/<start>_<end>/``).
When the run has finished, every window is checked, in the order of its end, against the
points in force *for each of its groups* just before it, with the batch guard's rules
(:func:`~costlib_pipelines.recalibrate.publish.guard_violations`: ``max_threshold_change``,
``min_rated``, infeasible points; the same function, so batch and windowed runs agree on the same
rows):

- the points in force at the start are the published run's (``LATEST`` when the run started;
  :func:`~costlib_pipelines.recalibrate.publish.points_in_force`): a batch run's points, or what a
  windowed run applied. They are copied into the run as ``points_in_force.parquet``, so the run
  is self-contained: ``costlib decide`` applies them to a group no applied window covers.
- a window is *applied* when it has no violation: its groups' points become the points in force
  for the windows after it. A window with a violation is *held*: written, listed with its
  reasons in the manifest (``guard.windows``), never applied; the windows after it are compared
  with the points in force before it, so ``costlib decide`` keeps applying the last applied
  window of each group (or the points in force before the run).
- only the windows ``costlib decide`` could apply take part (``decide.window`` of the run's
  config: with ``latest_complete``, the complete windows); the others (partial windows at the
  ends of the data) are checked for the record, with state ``not_eligible``, and change
  nothing.
- a group missing from a window is no violation (a window replaces only the points of the
  groups it holds).
- late panes: the guard runs on each window's final records, the newest pane of each group
  (``pane_index``), once the run has finished; ``costlib decide`` refuses a run before that
  (no manifest), so no unchecked pane is ever applied.

A person can release a held window or withdraw an applied one (:func:`publish_window`, ``costlib
publish --window``): only that window's state changes, with who, why and when recorded in its
``decision`` and ``history``. The verdicts of the windows after it stand: each was made against
what was in force before it, as a stream applies windows in turn, so a review of an old window
never rolls ``costlib decide`` back to older points by surprise. ``costlib decide`` applies per
group the latest applied window, so releasing the newest held window applies it, and
withdrawing the newest applied one rolls its groups back to the window before.
Run-level problems hold the whole run as for batch runs (``LATEST`` stays): a published run
that cannot be read, ``LATEST`` moving while the run ran.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.files import InputError, write_json, write_parquet
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.published_points import uncovered_share
from costlib_pipelines.io.records import arrow_schema
from costlib_pipelines.io.runs import (
    POINTS_IN_FORCE,
    check_run_id,
    manifest_lock,
    read_manifest,
    read_operating_points,
)
from costlib_pipelines.recalibrate.publish import (
    GuardSettings,
    Override,
    guard_notes,
    guard_violations,
)

__all__ = [
    "APPLIED",
    "HELD",
    "NOT_ELIGIBLE",
    "WINDOW_NAME_PATTERN",
    "WITHDRAWN",
    "check_window_name",
    "eligible_windows",
    "guard_windows",
    "held_eligible",
    "publish_window",
    "read_windows",
    "window_entries_summary",
    "write_points_in_force",
]

#: Window states in the manifest's ``guard.windows``.
APPLIED, HELD, WITHDRAWN, NOT_ELIGIBLE = "applied", "held", "withdrawn", "not_eligible"

#: A window's name: its directory, ``<start>_<end>`` in UTC to the second.
WINDOW_NAME_PATTERN = re.compile(r"[0-9]{8}T[0-9]{6}_[0-9]{8}T[0-9]{6}")


def check_window_name(name: object) -> str:
    """``name`` if it is a window name (``20261101T000000_20261108T000000``); else
    :class:`InputError` (checked before any filesystem call: never a path)."""
    if isinstance(name, str) and WINDOW_NAME_PATTERN.fullmatch(name):
        return name
    raise InputError(f"window {name!r} is not a window name: use <start>_<end> as the run's "
                     "windows/ directories name them, e.g. 20261101T000000_20261108T000000")


def _name_of(directory_path: str) -> str:
    return directory_path.rstrip("/").rsplit("/", 1)[1]


def read_windows(run_dir: str) -> dict[str, list[dict[str, Any]]]:
    """Every window's records (all methods), by window name, in the order of window end."""
    paths = sorted(m.path for result in
                   FileSystems.match([f"{run_dir}/windows/*/operating_points.parquet"])
                   for m in result.metadata_list)
    by_name = {_name_of(p.rsplit("/", 1)[0]): read_operating_points(p) for p in paths}
    return dict(sorted(by_name.items(), key=lambda item: (item[0][16:], item[0][:15])))


def _bounds(name: str) -> tuple[dt.datetime, dt.datetime]:
    start, end = name.split("_")
    parse = lambda text: dt.datetime.strptime(text, "%Y%m%dT%H%M%S").replace(tzinfo=dt.UTC)  # noqa: E731
    return parse(start), parse(end)


def eligible_windows(names: Sequence[str], decide: Mapping[str, Any],
                     time_range: Mapping[str, str] | None) -> dict[str, float | None]:
    """The windows ``costlib decide`` could apply under the config's ``decide`` section, with
    their uncovered share (None when the event-time range is unknown): all with ``latest``,
    the complete ones with ``latest_complete``."""
    shares: dict[str, float | None] = {}
    for name in names:
        share = (None if time_range is None
                 else round(uncovered_share(_bounds(name), dict(time_range)), 6))
        if decide["window"] == "latest" or (share is not None
                                            and share <= decide["max_uncovered_share"]):
            shares[name] = share
    return shares


def _source(record: dict[str, Any]) -> str:
    """Where a point in force before the run came from (for ``compared_with``)."""
    if record["window_start"] is None:
        return f"run {record['run_id']}"
    return (f"run {record['run_id']} window {record['window_start']:%Y%m%dT%H%M%S}_"
            f"{record['window_end']:%Y%m%dT%H%M%S}")


def guard_windows(
    windows: Mapping[str, Sequence[dict[str, Any]]],
    in_force: Sequence[dict[str, Any]] | None,
    settings: GuardSettings,
    eligible: Mapping[str, float | None],
    *,
    decisions: Mapping[str, dict[str, Any]] | None = None,
    override: Override | None = None,
    sources: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The guard's verdict on every window, in the order of ``windows`` (by end).

    Parameters
    ----------
    windows : mapping of str to list of dict
        Each window's records (``schemas/operating_point.json``), by window name.
    in_force : list of dict or None
        The points in force before the first window (one record per group and method), or
        None (nothing published: the first window is compared with nothing, as a first run).
    settings : GuardSettings
        The batch guard's settings (method, ``max_threshold_change``, ``min_rated``).
    eligible : mapping of str to float or None
        The windows ``costlib decide`` could apply (:func:`eligible_windows`); the others are
        checked but never applied.
    decisions : mapping, optional
        A person's last decision per window name: ``{"action": "release" | "withdraw", ...}``.
    override : Override, optional
        ``--override-guard``: held windows are applied, and the override recorded with them.
    sources : mapping of str to str, optional
        Where a group's point in force came from, when not from its record (a window of the
        same run, judged before: ``"window <name>"``, as for the windows judged here).

    Returns
    -------
    list of dict
        Per window: ``window``, ``window_start``, ``window_end``, ``uncovered_share``,
        ``state`` (applied, held, withdrawn, not_eligible), ``violations`` (against the points
        in force before it), ``notes``, ``compared_with`` (where each compared group's points
        in force came from: source -> number of groups), ``decision`` (a person's, or the
        override).
    """
    decisions = decisions or {}
    current = {r["group"]: r for r in in_force or [] if r["method"] == settings.method}
    source = {group: _source(r) for group, r in current.items()}
    source.update({g: text for g, text in (sources or {}).items() if g in source})
    entries = []
    for name, records in windows.items():
        groups = sorted({r["group"] for r in records if r["method"] == settings.method})
        previous = [current[g] for g in groups if g in current]
        violations = guard_violations(previous, records, settings)
        compared: dict[str, int] = {}
        for record in previous:
            compared[source[record["group"]]] = compared.get(source[record["group"]], 0) + 1
        decision = decisions.get(name)
        if name not in eligible:
            state = NOT_ELIGIBLE
        elif decision is not None:
            state = APPLIED if decision["action"] == "release" else WITHDRAWN
        elif violations and override is not None:
            state, decision = APPLIED, {"action": "override", **override.record()}
        else:
            state = HELD if violations else APPLIED
        if state == APPLIED:
            for record in records:
                if record["method"] == settings.method:
                    current[record["group"]], source[record["group"]] = record, f"window {name}"
        start, end = _bounds(name)
        entries.append({
            "window": name, "window_start": start.isoformat(), "window_end": end.isoformat(),
            "uncovered_share": eligible.get(name), "state": state, "violations": violations,
            "notes": guard_notes(records, settings), "compared_with": compared,
            "decision": decision,
        })
    return entries


def held_eligible(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The held windows among ``entries`` (the guard's; not withdrawn or not-eligible ones)."""
    return [e for e in entries if e["state"] == HELD]


def window_entries_summary(entries: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many windows are in each state."""
    counts = {APPLIED: 0, HELD: 0, WITHDRAWN: 0, NOT_ELIGIBLE: 0}
    for entry in entries:
        counts[entry["state"]] += 1
    return counts


def write_points_in_force(run_dir: str, records: Sequence[dict[str, Any]] | None) -> bool:
    """Copy the points in force before the run into ``run_dir/points_in_force.parquet`` (so
    the run is self-contained for ``costlib decide``); False when there are none."""
    if not records:
        return False
    schema = arrow_schema("operating_point.json")
    rows = [{f.name: r.get(f.name) for f in schema} for r in records]
    write_parquet(f"{run_dir}/{POINTS_IN_FORCE}", pa.Table.from_pylist(rows, schema=schema))
    return True


def publish_window(output: str, run_id: str, window: str, *, by: str, reason: str,
                   withdraw: bool = False) -> dict[str, Any]:
    """Release a held window of a windowed run, or withdraw an applied one (a rollback).

    Only that window's state changes; the decision (who, why, when, the state before) is
    recorded with the window in the run's manifest (see the module). ``LATEST`` does not move:
    publishing the run is ``costlib publish`` without ``--window``.

    Raises
    ------
    InputError
        An invalid run id or window name, a run that is not a guarded windowed run, a window
        the run does not hold, or one in a state the action does not apply to.
    """
    output = output.rstrip("/")
    run_dir = f"{output}/runs/{check_run_id(run_id)}"
    name = check_window_name(window)
    override = Override(by=by, reason=reason)
    with manifest_lock(run_dir):  # a followed stream may be recording a verdict
        return _decide_window(run_dir, name, override, withdraw)


def _decide_window(run_dir: str, name: str, override: Override, withdraw: bool
                   ) -> dict[str, Any]:
    """:func:`publish_window`'s change of the manifest (under its lock)."""
    manifest = read_manifest(run_dir)
    guard = manifest.get("guard")
    if not isinstance(guard, dict) or not isinstance(guard.get("windows"), list):
        raise InputError(f"{run_dir}: not a windowed run with a window guard; --window applies "
                         "to those only (publish a batch run without --window)")
    entries = {e["window"]: e for e in guard["windows"]}
    if name not in entries:
        raise InputError(f"{run_dir}: no window {name} (it has {len(entries)}: see "
                         "guard.windows in its manifest, or costlib status)")
    state = entries[name]["state"]
    wanted = (APPLIED,) if withdraw else (HELD, WITHDRAWN)
    if state not in wanted:
        action = "withdraw" if withdraw else "release"
        raise InputError(f"{run_dir}: window {name} is {state}; only a window that is "
                         f"{' or '.join(wanted)} can be {action}d")
    entry = entries[name]
    decision = {"action": "withdraw" if withdraw else "release", **override.record()}
    entry["decision"] = decision
    entry["history"] = [*entry.get("history", []), {**decision, "previous_state": state}]
    entry["state"] = WITHDRAWN if withdraw else APPLIED
    guard["window_states"] = window_entries_summary(guard["windows"])
    write_json(f"{run_dir}/manifest.json", manifest)
    return manifest


def build_guard_entry(config: RunConfig, settings: GuardSettings, baseline_run: str | None,
                      baseline_problem: str | None, violations: list[str],
                      entries: list[dict[str, Any]], override: Override | None,
                      carried: int, notes: list[str] | None = None) -> dict[str, Any]:
    """The manifest's ``guard`` of a windowed run (the batch guard's keys, plus ``windows``).

    ``notes``: the run's own notes (each window's are in its entry)."""
    return {
        "kind": "windows",
        "max_threshold_change": settings.max_threshold_change,
        "min_rated": settings.min_rated,
        "off": settings.off,
        "method": settings.method,
        "compared_with_run": baseline_run,
        "previous_run_unreadable": baseline_problem,
        "violations": violations,
        "notes": list(notes or []),
        "override": override.record() if override is not None and (
            violations or held_eligible(entries) or any(
                (e.get("decision") or {}).get("action") == "override" for e in entries))
        else None,
        "eligible_windows": config.decide["window"],
        "points_in_force_groups": carried,
        "window_states": window_entries_summary(entries),
        "windows": entries,
    }
