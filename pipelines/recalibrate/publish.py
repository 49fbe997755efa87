"""Publishing operating points: the guard that holds suspicious runs for a human.

A recalibration run is *published* when ``OUTPUT/LATEST`` points at it; readers (``costlib
decide``, schedulers, reports) follow ``LATEST``. Before moving it, the guard compares the new
run's thresholds of the decision method with those of the run ``LATEST`` points at and holds
the run back when

- a group's threshold moved by more than ``max_threshold_change`` (absolute, on any classifier;
  a classifier switched on or off counts as an infinite move), or
- a group's thresholds rest on fewer than ``min_rated`` rated rows (positive + negative rows of
  the grid they were chosen on, one each whatever they weigh,
  :func:`~costlib_pipelines.io.units.rated_rows`: the group's own, or the parent's under
  fallback; a group with no
  thresholds, status ``insufficient_data``, rests on none; a group that ``kept`` the published
  thresholds unchanged is only noted), or
- a group's point of the decision method is ``infeasible`` (``point_status``: no covered point
  meets the run's constraints; ``costlib decide`` would give it null decisions, or, for a point
  that misses ``min_recall`` only, apply that nearest point: the reason says which), or
- (``publish.on_volume_change: hold``) the flagged volume of the new points differs from that
  of the points in force on the run's rows by more than ``publish.max_volume_change``
  (:mod:`costlib_pipelines.recalibrate.volume_guard`; by default only a note).

Points that are ``coverage_limited`` (the best point inside the rated region; a better one flags
more unrated rows than allowed) are no violation, nor are ``resolution_limited`` points (the
lattice's best; a coarse stretch of it could hide a better one); they are listed in the manifest's
``guard.notes`` (:func:`guard_notes`), as are points that flag unrated rows when coverage is not
enforced (``coverage.max_unrated_share: null``), and a run in which no group has a point decide
can apply (:func:`no_point_note`).

Both settings are off by default (``max_threshold_change: null``, ``min_rated: 0``,
:attr:`GuardSettings.off`): then only infeasible points, the baseline checks below, implausible
shares and capacity overruns hold a run; the manifest's ``guard.off`` says so.

The guard fails closed: when the published run cannot be read (``LATEST`` names a missing,
incomplete or unreadable run, or ``LATEST`` is gone while ``runs/`` holds published runs), or
when ``LATEST`` moved while the run ran (another run published meanwhile), the run is held with
that reason; there is nothing it could be compared with.

A held run is complete (its manifest says ``"published": false`` and lists the violations) but
``LATEST`` does not move. A person can publish it with an override that records who and why, or
roll ``LATEST`` back to any earlier complete run with :func:`publish_run`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from costlib.message_text import thresholds_text
from costlib.thresholds.loop import ALL_GROUPS
from costlib_pipelines.flags import UsageError
from costlib_pipelines.io.files import InputError, write_bytes_atomically, write_json
from costlib_pipelines.io.recall_floor import misses_only_min_recall
from costlib_pipelines.io.runs import (
    CARRIED,
    NothingInForce,
    check_run_id,
    latest_run_id,
    list_runs,
    load_operating_points,
    read_manifest,
)
from costlib_pipelines.io.units import fmt_rows, rated_rows

__all__ = [
    "Baseline",
    "GuardSettings",
    "Override",
    "PublishRefused",
    "baseline_violations",
    "guard_notes",
    "guard_violations",
    "infeasible_overrides",
    "no_point_note",
    "points_in_force",
    "publish_run",
    "read_baseline",
]



class PublishRefused(RuntimeError):
    """The guard held the run back; the message lists every violation. ``run_dir``: the held
    run's directory, when known (its records are complete)."""

    def __init__(self, message: str, run_dir: str | None = None) -> None:
        super().__init__(message)
        self.run_dir = run_dir


@dataclass(frozen=True)
class GuardSettings:
    """``max_threshold_change``: None = no limit; ``min_rated``: 0 = no minimum.

    Both are the defaults of the config's ``publish`` section: the guard's own checks are off
    (:attr:`off`) unless a config or the command line sets one of them.
    """

    max_threshold_change: float | None = None
    min_rated: float = 0.0
    method: str = "graph"

    @property
    def off(self) -> bool:
        """True when neither threshold moves nor rated rows are checked (the defaults): only
        infeasible points, the baseline, plausibility and capacity can hold a run."""
        return self.max_threshold_change is None and not self.min_rated > 0


@dataclass(frozen=True)
class Override:
    """A person's decision to publish despite the guard (recorded in the manifest)."""

    by: str
    reason: str

    def __post_init__(self) -> None:
        if not self.by.strip() or not self.reason.strip():

            raise UsageError("an override or a publication needs both who (--override-by / "
                             "--by) and why (--override-reason / --reason)")

    def record(self) -> dict[str, str]:
        return {"by": self.by, "reason": self.reason,
                "at_utc": dt.datetime.now(dt.UTC).isoformat()}


def _threshold_move(old: Sequence[float], new: Sequence[float]) -> float:
    moves = []
    for a, b in zip(old, new, strict=True):
        if math.isinf(a) or math.isinf(b):
            moves.append(0.0 if a == b else math.inf)
        else:
            moves.append(abs(a - b))
    return max(moves)


def _by_group(records: Sequence[dict[str, Any]], method: str) -> dict[str, dict[str, Any]]:
    """``method``'s record per group. ``records`` hold one per group and method: a batch run's,
    one window's, or points in force (:func:`points_in_force`)."""
    return {r["group"]: r for r in records if r["method"] == method}


def points_in_force(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``costlib decide`` applies from a published run's records, one per group and method.

    Batch records are returned as they are. Windowed records (of the windows the guard applied,
    plus the points carried in force, as ``load_operating_points(..., windows="applied")``
    reads them): per group and method the record of the window with the largest end (newest
    pane); a group no window covers keeps its carried (or batch) record.
    """
    chosen: dict[tuple[str, str], dict[str, Any]] = {}

    def rank(record: dict[str, Any]) -> tuple:
        if record["window_start"] is None or record.get(CARRIED):
            return (0,)
        return (1, record["window_end"], record["pane_index"] or 0)

    for record in records:
        key = (record["group"], record["method"])
        if key not in chosen or rank(record) > rank(chosen[key]):
            chosen[key] = record
    return [chosen[key] for key in sorted(chosen)]


def _unchanged(record: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """A record whose thresholds are the published ones (``kept``, or ``ok`` at a point that is
    the point in force): nothing changes for the group, so the few rated rows it rests on are
    no reason to hold the run (a kept group is noted instead)."""
    if old is None or old["thresholds"] is None or record["thresholds"] is None:
        return False
    if old.get("rule", record.get("rule")) != record.get("rule"):
        return False  # the same thresholds flag other rows under another rule
    if sorted(old["classifiers"]) != sorted(record["classifiers"]):
        return False
    before = dict(zip(old["classifiers"], old["thresholds"], strict=True))
    return [before[c] for c in record["classifiers"]] == list(record["thresholds"])


def _own_rows(record: dict[str, Any]) -> str:
    """``22 rated rows (12 positives, 10 negatives)``: a record's own grid, in rows whatever
    they weigh (:func:`~costlib_pipelines.io.units.rated_rows`)."""
    pos, neg = rated_rows(record)
    return (f"{fmt_rows(pos + neg)} rated rows ({fmt_rows(pos)} positives, "
            f"{fmt_rows(neg)} negatives)")


def _rated_violation(group: str, record: dict[str, Any],
                     new_by_group: Mapping[str, dict[str, Any]],
                     settings: GuardSettings) -> str | None:
    """The ``min_rated`` violation of one group's record, naming the grid its thresholds were
    chosen on and that grid's rated rows, or why it has no thresholds; None when it holds
    enough.

    Three cases, each with the numbers of the data that caused it:

    - no thresholds (status ``insufficient_data``, a method that did not switch the group on,
      or a group the capacity allocation left out): ``costlib decide`` gives it null decisions;
      the message says why (the record's ``reason``, else its status) and how many rated rows
      the group's own grid holds (a group without thresholds rests on none, whatever it holds);
    - ``fallback``: the thresholds are the parent's, so the parent's rated rows count;
    - otherwise the group's own rated rows.
    """
    minimum = settings.min_rated
    if record["thresholds"] is None:
        why = record.get("reason") or f"status {record['status']}"
        if record.get("capacity_status"):
            why = f"capacity_status {record['capacity_status']}: {why}"
        elif record["status"] == "fallback":
            why = (f"status fallback to {record['fallback_group']}, which has no point of "
                   f"method {settings.method}; {why}")
        return (f"group {group!r}: no thresholds of method {settings.method}, so decide gives "
                f"it null decisions ({why}); its own grid holds {_own_rows(record)}; a group "
                f"without thresholds is held under min_rated={minimum:g}")
    parent = record["fallback_group"] if record["status"] == "fallback" else None
    source = new_by_group.get(parent) if parent else None
    if source is not None:
        rated = sum(rated_rows(source))  # rows, whatever they weigh (estimates, money)
        if rated >= minimum:
            return None
        return (f"group {group!r}: thresholds are those of {parent} (status fallback: its own "
                f"grid holds {_own_rows(record)}), which rest on {_own_rows(source)}, fewer "
                f"than min_rated={minimum:g}")
    rated = sum(rated_rows(record))
    if rated >= minimum:
        return None
    if parent:  # the parent's record is not in the run: its rows cannot be counted
        return (f"group {group!r}: thresholds are those of {parent} (status fallback), whose "
                f"record is not in the run; its own grid holds {_own_rows(record)}, fewer "
                f"than min_rated={minimum:g}")
    return (f"group {group!r}: thresholds rest on the {_own_rows(record)} of its own grid "
            f"(status {record['status']}), fewer than min_rated={minimum:g}")


def _fmt_thresholds(values: Sequence[float]) -> str:
    return "(" + ", ".join("inf" if math.isinf(v) else f"{v:.4g}" for v in values) + ")"


def _decide_applies(record: dict[str, Any]) -> str:
    """What ``costlib decide`` does with an infeasible point once the run is published
    (:func:`~costlib_pipelines.io.recall_floor.misses_only_min_recall`)."""
    if misses_only_min_recall(record):
        recall = record.get("estimated_recall")
        shown = "" if recall is None else f", estimated recall {recall:.4g}"
        return (f"decide applies this nearest point, thresholds "
                f"{_fmt_thresholds(record['thresholds'])}{shown}: the highest recall the rated "
                "region allows (not the min_recall asked for)")
    return "decide gives the group null decisions (nothing flagged)"


def _if_published(record: dict[str, Any]) -> str:
    return f"; if published anyway, {_decide_applies(record)}"


def infeasible_overrides(records: Sequence[dict[str, Any]], method: str) -> list[str]:
    """One warning per group of ``method`` whose point is infeasible, saying what ``costlib
    decide`` applies now that a person published the run."""
    return [f"group {r['group']!r}: the point is infeasible; {_decide_applies(r)}"
            for r in _by_group(records, method).values()
            if r.get("point_status") == "infeasible"]


def guard_violations(
    previous: Sequence[dict[str, Any]] | None,
    new: Sequence[dict[str, Any]],
    settings: GuardSettings,
) -> list[str]:
    """Reasons to hold ``new`` back (empty: publish). Records are ``operating_point.json``.

    Thresholds are compared classifier by classifier, by name; a changed set of classifiers and
    a group that had thresholds and has no record any more are violations of their own.
    """
    new_by_group = _by_group(new, settings.method)
    old_by_group = _by_group(previous or [], settings.method)
    violations = []
    for group in sorted(new_by_group):
        record = new_by_group[group]
        old = old_by_group.get(group)
        if settings.min_rated > 0 and not _unchanged(record, old):
            thin = _rated_violation(group, record, new_by_group, settings)
            if thin is not None:
                violations.append(thin)
        if record.get("point_status") == "infeasible":
            violations.append(f"group {group!r}: the {settings.method} point is infeasible: "
                              f"{record.get('reason') or 'no point meets the constraints'}"
                              + _if_published(record))
        if settings.max_threshold_change is None or old is None:
            continue
        if sorted(old["classifiers"]) != sorted(record["classifiers"]):
            violations.append(
                f"group {group!r}: the classifiers changed from {old['classifiers']} to "
                f"{record['classifiers']}; thresholds cannot be compared"
            )
            continue
        if old["thresholds"] is None or record["thresholds"] is None:
            continue
        before = dict(zip(old["classifiers"], old["thresholds"], strict=True))
        names = record["classifiers"]
        aligned = [before[c] for c in names]
        move = _threshold_move(aligned, record["thresholds"])
        if move > settings.max_threshold_change:
            pairs = ", ".join(
                f"{c}: {a:g} -> {b:g}" for c, a, b in zip(names, aligned, record["thresholds"],
                                                         strict=True)
            )
            violations.append(
                f"group {group!r}: thresholds moved by {move:g} "
                f"(> max_threshold_change={settings.max_threshold_change:g}; {pairs})"
            )
    if settings.max_threshold_change is not None:
        for group in sorted(set(old_by_group) - set(new_by_group)):
            if old_by_group[group]["thresholds"] is not None:
                violations.append(f"group {group!r}: had thresholds and is missing from the run")
    return violations


def unmatched_label_violation(records: Sequence[dict[str, Any]],
                               positive: Any) -> str | None:
    """A violation when ``columns.label_positive`` is set and not one rated row of the run
    carries it: every rating was read as a negative, which is almost surely a misspelt value
    (the comparison is exact, case included), never a stream to publish thresholds from.

    Counted on the all-groups records (every group's rows); None when the value is unset, the
    run has no rated rows, or some rated row is positive.
    """
    if positive is None:
        return None
    whole = [r for r in records if r["group"] == ALL_GROUPS]
    if not whole:
        return None
    pos, neg = rated_rows(whole[0])
    if pos > 0 or neg == 0:
        return None
    return (f"labels: no rated row's label equals columns.label_positive {str(positive)!r}, so "
            f"all {fmt_rows(neg)} rated rows were read as negatives; the comparison is exact "
            "(case and spaces included): set columns.label_positive to the value your stream "
            "writes for a positive rating")


def guard_notes(new: Sequence[dict[str, Any]], settings: GuardSettings) -> list[str]:
    """What the guard lets pass but a reviewer should see (decision method's points).

    ``coverage_limited`` points (with the refused point's thresholds), ``resolution_limited``
    points (a coarse stretch of the lattice could hide a better one), and points that flag
    unrated rows while coverage is not enforced (``max_unrated_share`` null).
    """
    notes = []
    for group, record in sorted(_by_group(new, settings.method).items()):
        if record["status"] == "kept":
            why = record.get("reason") or (
                "kept the thresholds in force: {} rated positive and {} rated negative rows are "
                "too few to recalibrate".format(*map(fmt_rows, rated_rows(record))))
            notes.append(f"group {group!r}: thresholds {thresholds_text(record['thresholds'])}: "
                         f"{why}")
        elif record.get("point_status") == "coverage_limited":
            notes.append(
                f"group {group!r}: coverage_limited: thresholds "
                f"{thresholds_text(record['thresholds'])} are the "
                f"best covered point; {record.get('reason') or ''}".rstrip("; ")
            )
        elif record.get("point_status") == "resolution_limited":
            notes.append(
                f"group {group!r}: resolution_limited: thresholds "
                f"{thresholds_text(record['thresholds'])} are the "
                f"lattice's best; {record.get('reason') or ''}".rstrip("; ")
            )
        elif (record.get("max_unrated_share") is None and record.get("unrated")
              and record["status"] == "ok"):
            notes.append(
                f"group {group!r}: the point flags {record['unrated']:g} unrated of "
                f"{record['volume']:g} (coverage {record['coverage']:.1%}); coverage is not "
                "enforced (coverage.max_unrated_share is null)"
            )
    return notes


def no_point_note(new: Sequence[dict[str, Any]], settings: GuardSettings) -> str | None:
    """A note when no group of the run, ``__all__`` included, has a point ``costlib decide``
    can apply (thresholds null, or the point infeasible on another constraint than
    ``min_recall`` alone): the run is no violation (decide gives
    null decisions), but it flags nothing. None when some group has one (or there are no
    records of the decision method)."""
    records = _by_group(new, settings.method)
    if not records or any(r["thresholds"] is not None and (
            r.get("point_status") != "infeasible" or misses_only_min_recall(r))
            for r in records.values()):
        return None
    statuses = Counter("infeasible" if r.get("point_status") == "infeasible" else r["status"]
                       for r in records.values())
    return ("no group has an operating point: decide will flag nothing except floor audits "
            f"({len(records)} group(s) of method {settings.method}, {ALL_GROUPS} included: "
            + ", ".join(f"{status} {n}" for status, n in sorted(statuses.items())) + ")")


@dataclass(frozen=True)
class Baseline:
    """What the guard compares a new run with: the published run's points in force
    (:func:`points_in_force`), or why it cannot be read.

    ``run_id`` None and ``problem`` None: nothing was ever published (a first run).
    """

    records: list[dict[str, Any]] | None
    run_id: str | None
    problem: str | None = None


def _published_runs(output: str) -> list[str]:
    """Run ids under ``OUTPUT/runs/`` whose recalibrate manifest says they were published."""
    complete, _ = list_runs(output)
    return [run_id for run_id, manifest in complete.items() if manifest.get("published")
            and manifest.get("command", "recalibrate") == "recalibrate"]


def read_baseline(output: str) -> Baseline:
    """The published run of ``output`` for the guard; never raises for a broken output.

    A ``LATEST`` that names a missing, incomplete or unreadable run, or a missing ``LATEST``
    next to published runs, gives a :class:`Baseline` with ``problem`` set (the guard then
    holds the new run: it fails closed). A published windowed run whose guard applied no
    window, with no points in force before it, gives no records (``[]``): nothing is in
    force, and the guard compares the new run with nothing, as a first run (the windows it held
    stay held in it, and nothing of it reaches ``costlib decide``).
    """
    output = output.rstrip("/")
    try:
        run_id = latest_run_id(output)
    except InputError as exc:
        return Baseline(None, None, str(exc))
    if run_id is None:
        published = _published_runs(output)
        if published:
            return Baseline(None, None, (
                f"{output}/LATEST is missing, but runs/ holds published runs "
                f"({', '.join(published[-3:])}); restore it with costlib publish"))
        return Baseline(None, None)
    try:
        records, _ = load_operating_points(f"{output}/runs/{run_id}", windows="applied")
    except NothingInForce:  # a windowed run that applied no window and carried no points:
        return Baseline([], run_id)  # nothing is in force, as before a first run
    except (InputError, OSError, ValueError) as exc:
        return Baseline(None, run_id, f"the published run {run_id} cannot be read: {exc}")
    return Baseline(points_in_force(records), run_id)


def baseline_violations(baseline: Baseline, latest_now: str | None) -> list[str]:
    """Violations that come from the baseline itself (the guard fails closed on them).

    Parameters
    ----------
    baseline : Baseline
        The published run when the run started.
    latest_now : str or None
        The run id ``LATEST`` names when the run is about to publish.
    """
    violations = []
    if baseline.problem:
        violations.append(f"the guard cannot compare with the published run: {baseline.problem}")
    if latest_now != baseline.run_id:
        violations.append(
            f"LATEST moved from {baseline.run_id} to {latest_now} while this run ran (another "
            "run published meanwhile); this run was checked against the old one"
        )
    return violations


def publish_run(output: str, run_id: str, *, by: str, reason: str) -> dict[str, Any]:
    """Point ``OUTPUT/LATEST`` at a complete run (rollback, or publishing a held run).

    The run's manifest gets a ``publications`` entry (who, why, when, and which run ``LATEST``
    pointed at before), so every move of ``LATEST`` by a person is on record.
    """
    output = output.rstrip("/")
    run_dir = f"{output}/runs/{check_run_id(run_id)}"
    manifest = read_manifest(run_dir)
    override = Override(by=by, reason=reason)
    previous = latest_run_id(output)  # only its name: LATEST may be broken, e.g. to roll back
    entry = {**override.record(), "previous_latest": previous}
    manifest.setdefault("publications", []).append(entry)
    manifest["published"] = True
    write_json(f"{run_dir}/manifest.json", manifest)
    write_bytes_atomically(f"{output}/LATEST", (run_id + "\n").encode())
    return manifest
