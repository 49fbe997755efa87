"""Which operating point every group of a decide run uses (also the publish guard's baseline).

:func:`select_operating_points` turns the operating point records of a recalibrate run into the
:class:`DecisionThresholds` the decide stage applies (one :class:`GroupThresholds` per group);
the rules (batch records or the latest complete window, statuses, the ``"__all__"`` default)
are in :mod:`costlib_pipelines.decide.pipeline`. The window helpers tell complete windows from
partial ones (:func:`uncovered_share` of the event times the recalibration read,
:func:`recalibration_time_range`) and list the windows its guard held (:func:`held_windows`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.loop import ALL_GROUPS
from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.recall_floor import misses_only_min_recall
from costlib_pipelines.io.runs import CARRIED, read_manifest

__all__ = [
    "DecisionThresholds",
    "GroupThresholds",
    "select_operating_points",
]


# --------------------------------------------------------------------------- operating points
@dataclass(frozen=True)
class GroupThresholds:
    """The thresholds one group decides with (``thresholds is None``: null decision)."""

    thresholds: tuple[float, ...] | None
    operating_point_group: str | None
    method: str | None
    window_end: dt.datetime | None = None  # end of the record's window (None: batch record)
    #: The method's own point when the evidence rule published other thresholds (the record's
    #: ``proposed_thresholds``, config order); decide audits the rows it would flag more.
    proposed: tuple[float, ...] | None = None


NO_THRESHOLDS = GroupThresholds(None, None, None)


@dataclass(frozen=True)
class DecisionThresholds:
    """Thresholds per group, in the config's classifier order; small, pickled into DoFns.

    Parameters
    ----------
    by_group : dict of str to GroupThresholds
        Groups that have an operating point record.
    default : GroupThresholds
        For groups without a record: the ``"__all__"`` thresholds when usable, else none.
    k : int
        Number of classifiers.
    """

    by_group: dict[str, GroupThresholds]
    default: GroupThresholds
    k: int
    details: dict[str, Any] = field(default_factory=dict)

    def get(self, group: str) -> GroupThresholds:
        """The thresholds of ``group`` (the default for groups without a record)."""
        return self.by_group.get(group, self.default)

    def lookup(
        self, groups: Sequence[str]
    ) -> tuple[NDArray[np.float64], NDArray[np.bool_], list[GroupThresholds]]:
        """Per group of ``groups``: thresholds (m, k) (``+inf`` rows where none), usable mask,
        and the :class:`GroupThresholds` entries (method, group and window of the point)."""
        entries = [self.get(g) for g in groups]
        table = np.full((len(entries), self.k), np.inf)
        usable = np.zeros(len(entries), dtype=bool)
        for i, entry in enumerate(entries):
            if entry.thresholds is not None:
                table[i] = entry.thresholds
                usable[i] = True
        return table, usable, entries


# --------------------------------------------------------------------------- windows
Window = tuple[dt.datetime, dt.datetime]


def _utc_time(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def uncovered_share(window: Window, time_range: dict[str, str]) -> float:
    """Share of the window ``[start, end)`` outside the event times read, ``[min_utc, max_utc]``.

    0 when the recalibration read events at or before the window's start and at or after its
    end; 1 when the window and the range do not overlap.
    """
    start, end = window
    low, high = _utc_time(time_range["min_utc"]), _utc_time(time_range["max_utc"])
    covered = max(dt.timedelta(0), min(end, high) - max(start, low))
    return 1.0 - covered / (end - start)


def recalibration_time_range(source: str) -> dict[str, str] | None:
    """The event-time range a windowed recalibration run read (its manifest's
    ``event_time_range``); None for a single file, or a run that did not record it."""
    if source.endswith(".parquet"):
        return None
    return read_manifest(source).get("event_time_range")


def held_windows(source: str) -> list[dict[str, Any]]:
    """The windows the window guard of a windowed recalibration run did not apply (held or
    withdrawn by a person), from its manifest, with why; ``[]`` for other sources."""
    if source.endswith(".parquet"):
        return []
    guard = read_manifest(source).get("guard")
    if not isinstance(guard, dict) or not isinstance(guard.get("windows"), list):
        return []
    return [{"window": w["window"], "state": w["state"], "violations": w["violations"]}
            for w in guard["windows"] if w["state"] in ("held", "withdrawn")]


def _window_text(window: Window) -> str:
    return f"[{window[0].isoformat()}, {window[1].isoformat()})"


def _eligible_windows(
    windows: list[Window], settings: dict[str, Any], time_range: dict[str, str] | None,
    source: str, *, fallback: bool = False,
) -> list[Window]:
    """The windows ``decide.window`` allows: all (``latest``), or the complete ones.

    ``fallback``: the groups have points in force from before the run (carried by the window
    guard), so no complete window is no error: every group keeps those.

    Raises
    ------
    InputError
        ``latest_complete`` and the event-time range is unknown, or no window is complete
        (and no ``fallback``).
    """
    if settings["window"] == "latest":
        return windows
    how = "set decide.window: latest to apply the latest window even when it is partial"
    if time_range is None:
        raise InputError(
            f"{source}: windowed operating points without the event-time range the "
            "recalibration read (a single file, or a run from before costlib recorded it), so "
            f"complete windows cannot be told from partial ones: pass the run directory of a "
            f"current recalibrate run, or {how}")
    tolerance = settings["max_uncovered_share"]
    complete = [w for w in windows if uncovered_share(w, time_range) <= tolerance]
    if not complete and not fallback:
        latest = windows[-1]
        raise InputError(
            f"{source}: no complete window: the recalibration read event times "
            f"{time_range['min_utc']} .. {time_range['max_utc']}, and every window has more "
            f"than {tolerance:.1%} of its span outside them (the latest, "
            f"{_window_text(latest)}, {uncovered_share(latest, time_range):.1%}); recalibrate "
            f"over at least one whole window, or {how}")
    return complete


def _latest_records(
    records: list[dict[str, Any]], settings: dict[str, Any],
    time_range: dict[str, str] | None, source: str,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Batch records if there are any; else per group the latest eligible window and its
    newest pane, and for a group without one its carried record (:data:`CARRIED`): the points
    in force before a windowed run, when the window guard applied no window of the group.

    Returns the chosen records and what was chosen (None for batch records).
    """
    batch = [r for r in records if r["window_start"] is None and not r.get(CARRIED)]
    if batch:  # a batch run's records (they win over windowed ones, should both be given)
        return batch, None
    others = [r for r in records if r.get(CARRIED)]
    windowed = [r for r in records if not r.get(CARRIED)]
    windows = sorted({(r["window_start"], r["window_end"]) for r in windowed},
                     key=lambda w: (w[1], w[0]))
    eligible = set(_eligible_windows(windows, settings, time_range, source,
                                     fallback=bool(others))) if windows else set()
    best: dict[str, dict[str, Any]] = {}
    for record in windowed:
        if (record["window_start"], record["window_end"]) not in eligible:
            continue
        current = best.get(record["group"])
        key = (record["window_end"], record["pane_index"])
        if current is None or key > (current["window_end"], current["pane_index"]):
            best[record["group"]] = record
    carried: dict[str, str] = {}
    for record in others:
        if record["group"] not in best:
            best[record["group"]] = record
            carried[record["group"]] = record.get(CARRIED) or record["run_id"]
    used: dict[Window, list[str]] = {}
    for group, record in sorted(best.items()):
        if group not in carried:
            used.setdefault((record["window_start"], record["window_end"]), []).append(group)
    details = {
        "selection": settings["window"],
        "max_uncovered_share": settings["max_uncovered_share"],
        "event_time_range": time_range,
        "latest_window": _window_details(windows[-1], time_range) if windows else None,
        "windows_used": [{**_window_details(w, time_range), "groups": groups}
                         for w, groups in sorted(used.items(), key=lambda item: item[0][1])],
        "groups_in_force_before": carried,
    }
    return list(best.values()), details


def _window_details(window: Window, time_range: dict[str, str] | None) -> dict[str, Any]:
    share = None if time_range is None else round(uncovered_share(window, time_range), 6)
    return {"window_start": window[0].isoformat(), "window_end": window[1].isoformat(),
            "uncovered_share": share}


#: ``point_status`` of operating point records (:mod:`costlib.thresholds.point._operating_point`).
POINT_STATUSES = ("ok", "coverage_limited", "infeasible", "resolution_limited")


def _point_statuses(records: list[dict[str, Any]], status: str) -> list[str]:
    """Groups whose chosen record has ``point_status`` ``status``."""
    return sorted(r["group"] for r in records if r.get("point_status") == status)


def _group_thresholds(
    record: dict[str, Any], config: RunConfig, source: str
) -> GroupThresholds:
    group = record["group"]
    where = f"{source}: operating point of group {group!r} (method {record['method']!r})"
    if record["rule"] != config.rule:
        raise InputError(f"{where} was optimised for rule {record['rule']!r}, but the config's "
                         f"rule is {config.rule!r}")
    names = list(record["classifiers"])
    if sorted(names) != sorted(config.classifiers):
        raise InputError(f"{where} is for classifiers {names}, but the config has "
                         f"{list(config.classifiers)}")
    status = record["status"]
    if status == "insufficient_data" or record["thresholds"] is None:
        return NO_THRESHOLDS
    if status not in ("ok", "fallback", "kept"):
        raise InputError(f"{where} has unknown status {status!r}")
    point_status = record.get("point_status") or "ok"  # records without the field: ok
    if point_status not in POINT_STATUSES:
        raise InputError(f"{where} has unknown point_status {point_status!r}")
    if point_status == "infeasible" and not misses_only_min_recall(record):
        return NO_THRESHOLDS  # fail closed: the nearest point breaks a constraint
    values = np.asarray(record["thresholds"], dtype=np.float64)
    if values.shape != (len(names),):
        raise InputError(f"{where} has {values.size} thresholds for {len(names)} classifiers")
    ordered = _ordered_thresholds(values, names, config, where, "thresholds")
    proposed = None
    if record.get("proposed_thresholds") is not None:
        given = np.asarray(record["proposed_thresholds"], dtype=np.float64)
        if given.shape != (len(names),):
            raise InputError(f"{where} has {given.size} proposed_thresholds for {len(names)} "
                             "classifiers")
        proposed = _ordered_thresholds(given, names, config, where, "proposed_thresholds")
    op_group = group if status != "fallback" else (record["fallback_group"] or ALL_GROUPS)
    return GroupThresholds(ordered, op_group, record["method"], record["window_end"], proposed)


def _ordered_thresholds(values: NDArray[np.float64], names: list[str], config: RunConfig,
                        where: str, field_name: str) -> tuple[float, ...]:
    """A record's thresholds in the config's classifier order, each finite or ``+inf``."""
    if np.isnan(values).any() or (values == -np.inf).any():
        raise InputError(f"{where} has {field_name} {values.tolist()}; each must be a finite "
                         f"number or +inf (classifier off)")
    return tuple(float(values[names.index(c)]) for c in config.classifiers)


def select_operating_points(
    records: list[dict[str, Any]], config: RunConfig, *, source: str = "operating points",
    event_time_range: dict[str, str] | None = None,
) -> DecisionThresholds:
    """The thresholds every group decides with (the rules are in the docstring of
    :mod:`costlib_pipelines.decide.pipeline`).

    Parameters
    ----------
    records : list of dict
        Operating point records (``schemas/operating_point.json``).
    config : RunConfig
        ``decision_method``, ``rule``, ``classifiers`` and the ``decide`` section.
    source : str
        Where the records came from (for messages).
    event_time_range : dict, optional
        ``min_utc`` / ``max_utc`` the windowed recalibration read (its manifest's
        ``event_time_range``); needed for windowed records with ``decide.window:
        latest_complete``.

    Raises
    ------
    InputError
        No record of ``config.decision_method``, two records for one group, a record that
        does not fit the config (rule, classifiers, malformed thresholds), or windowed records
        of which none is complete (or completeness cannot be told).
    """
    method = config.decision_method
    chosen = [r for r in records if r["method"] == method]
    if not chosen:
        held = sorted({r["method"] for r in records})
        hint = ("; recalibrate with capacity.total set (or --capacity N) to allocate a "
                "shared capacity" if method == "capacity" else "")
        raise InputError(f"{source}: no operating point for method {method!r} (the config's "
                         f"decision_method); it holds methods {held}{hint}")
    windowed = any(r["window_start"] is not None and not r.get(CARRIED) for r in chosen)
    chosen, window = _latest_records(chosen, config.decide, event_time_range, source)
    by_group: dict[str, GroupThresholds] = {}
    for record in sorted(chosen, key=lambda r: r["group"]):
        if record["group"] in by_group:
            raise InputError(f"{source}: two operating points of method {method!r} for group "
                             f"{record['group']!r} (records of several runs mixed?)")
        by_group[record["group"]] = _group_thresholds(record, config, source)
    parent = by_group.get(ALL_GROUPS, NO_THRESHOLDS)
    default = (
        GroupThresholds(parent.thresholds, ALL_GROUPS, parent.method, parent.window_end,
                        parent.proposed)
        if parent.thresholds is not None else NO_THRESHOLDS
    )
    details = {
        "method": method,
        "windowed": windowed,
        "window": window,
        "run_ids": sorted({r["run_id"] for r in chosen}),
        "groups": len(by_group),
        "groups_without_thresholds": sorted(g for g, t in by_group.items()
                                            if t.thresholds is None),
        "groups_infeasible": _point_statuses(chosen, "infeasible"),
        "groups_below_min_recall": sorted(r["group"] for r in chosen
                                          if misses_only_min_recall(r)),
        "groups_coverage_limited": _point_statuses(chosen, "coverage_limited"),
        "groups_resolution_limited": _point_statuses(chosen, "resolution_limited"),
        "default_group": default.operating_point_group,
        "capacity_ignored": method != "capacity" and any(r["method"] == "capacity"
                                                         for r in records),
    }
    return DecisionThresholds(by_group, default, len(config.classifiers), details)
