"""Reading an output's runs for the history page (:func:`load_history`), and which groups get a
figure (:func:`plotted_groups`: ``__all__``, the selected groups, the groups a held run's guard
violations name, then those whose thresholds moved most, :func:`threshold_movement`).

Audit share of a run: with ``--decisions DECIDE_OUTPUT`` the rows the decide runs that applied
the run's operating points sent to audit, per row decided (``audit.audited`` / ``decided`` of
their manifests); otherwise the rated audit-sample rows (audit probability < 1) per row read,
from the recalibrate manifest's row accounting (``audit.audited`` / ``read``).
"""

from __future__ import annotations

import ast
import datetime as dt
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from costlib.thresholds.loop import ALL_GROUPS
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.runs import list_runs
from costlib_pipelines.report.changes import applied_points, group_order
from costlib_pipelines.report.runs_data import RunData

__all__ = [
    "COLUMNS",
    "MAX_PLOTTED_GROUPS",
    "NOT_OK",
    "POINT_NOT_OK",
    "AuditShare",
    "HistoryRun",
    "held_groups",
    "load_history",
    "plotted_groups",
    "threshold_movement",
]

#: Groups that get a figure and a per-run table (``__all__`` and the ``--groups`` selected
#: always; then held, then most moved, up to this many); the others are rows of the group table.
MAX_PLOTTED_GROUPS = 10

#: Record fields the history reads (older records may lack some: those show as absent).
COLUMNS = ("group", "method", "classifiers", "thresholds", "status", "fallback_group",
           "point_status", "reason", "volume", "tp", "fp", "precision", "precision_ci_low",
           "precision_ci_high", "estimated_recall", "estimated_recall_ci_low",
           "estimated_recall_ci_high", "rated_positives", "rated_negatives", "window_start",
           "window_end", "pane_index", "proposed_thresholds", "audit_missed_positives_found",
           "audit_missed_audited", "recall_warning")


NOT_OK = ("fallback", "kept", "insufficient_data")
POINT_NOT_OK = ("coverage_limited", "infeasible")


# --------------------------------------------------------------------------- reading the runs


@dataclass(frozen=True)
class AuditShare:
    """A run's audit share ``numerator / denominator`` and where it comes from.

    ``source`` is ``"decide"`` (rows sent to audit per row decided, over the decide runs that
    applied the run) or ``"recalibrate"`` (rated audit-sample rows per row read).
    """

    numerator: int
    denominator: int
    source: str

    @property
    def share(self) -> float | None:
        """The share (None when nothing was read or decided)."""
        return self.numerator / self.denominator if self.denominator else None


@dataclass(frozen=True)
class HistoryRun:
    """One complete recalibrate run as the history shows it.

    ``points`` holds per group the decision method's record (its applied window in windowed
    runs); ``audit`` the run's audit share (None when neither side records one).
    """

    run_id: str
    run_dir: str
    manifest: dict[str, Any]
    method: str
    classifiers: list[str]
    points: dict[str, dict[str, Any]]
    audit: AuditShare | None

    @property
    def held(self) -> bool:
        """True when the publish guard held the run (never published)."""
        return self.manifest.get("published") is False

    @property
    def violations(self) -> list[str]:
        """The guard's violations of a held run (empty otherwise)."""
        return list((self.manifest.get("guard") or {}).get("violations") or []) if self.held \
            else []

    @property
    def started(self) -> str | None:
        """The manifest's ``started_utc``."""
        return self.manifest.get("started_utc")


def _started(manifest: Mapping[str, Any]) -> float:
    """``started_utc`` as a timestamp for sorting (runs without one sort first)."""
    value = manifest.get("started_utc")
    try:
        when = dt.datetime.fromisoformat(value) if value else None
    except ValueError:
        when = None
    if when is None:
        return -math.inf
    return (when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)).timestamp()


def _decision_method(manifest: Mapping[str, Any]) -> str | None:
    config = manifest.get("config") or {}
    methods = config.get("methods") or []
    return config.get("decision_method") or (methods[0] if methods else None)


def _read_points(run_dir: str, manifest: dict[str, Any], method: str | None
                 ) -> tuple[str, list[dict[str, Any]]]:
    """The decision method's records of a run (all windows) and that method's name.

    Only :data:`COLUMNS` are read; fields an older record lacks are None.
    """
    top = f"{run_dir}/operating_points.parquet"
    paths = [top] if FileSystems.exists(top) else sorted(
        m.path for r in FileSystems.match([f"{run_dir}/windows/*/operating_points.parquet"])
        for m in r.metadata_list)
    if not paths:
        raise InputError(f"{run_dir}: complete run without operating_points.parquet")
    tables = []
    for path in paths:
        try:
            with FileSystems.open(path) as fh:
                names = pq.read_schema(fh).names
            with FileSystems.open(path) as fh:
                table = pq.read_table(fh, columns=[c for c in COLUMNS if c in names])
        except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
            raise InputError(f"{path}: not a readable operating points file ({exc})") from exc
        if "group" not in table.column_names or "method" not in table.column_names:
            raise InputError(f"{path}: not an operating points file (no group or method)")
        tables.append(table)
    table = pa.concat_tables(tables, promote_options="permissive")
    if method is None or method not in set(table.column("method").to_pylist()):
        method = table.column("method")[0].as_py() if table.num_rows else (method or "?")
    table = table.filter(pc.equal(table.column("method"), method))
    records = table.to_pylist()
    for record in records:
        for column in COLUMNS:
            record.setdefault(column, None)
        if record["pane_index"] is None:
            record["pane_index"] = 0
    return str(method), records


def _decide_audits(decisions: str) -> dict[str, tuple[int, int]]:
    """Per recalibrate run id: rows sent to audit and rows decided, summed over the complete
    decide runs of ``decisions`` whose operating points came from it."""
    decisions = decisions.rstrip("/")
    if not FileSystems.exists(decisions):
        raise InputError(f"{decisions}: decide output directory not found")
    complete, _ = list_runs(decisions)
    if not any(m.get("command") == "decide" for m in complete.values()):
        raise InputError(f"--decisions {decisions}: no complete decide run under runs/ "
                         "(expected a costlib decide output directory)")
    sums: dict[str, tuple[int, int]] = {}
    for manifest in complete.values():
        if manifest.get("command") != "decide":
            continue
        audit = manifest.get("audit") or {}
        if not audit.get("enabled"):
            continue
        audited = int(audit.get("audited") or 0)
        decided = int((manifest.get("row_accounting") or {}).get("decided") or 0)
        for run_id in (manifest.get("operating_points") or {}).get("run_ids") or []:
            a, d = sums.get(run_id, (0, 0))
            sums[run_id] = (a + audited, d + decided)
    return sums


def _manifest_audit(manifest: Mapping[str, Any]) -> AuditShare | None:
    """Rated audit-sample rows per row read, from the row accounting (None without them)."""
    accounting = manifest.get("row_accounting") or {}
    if "audit.audited" not in accounting:
        return None
    return AuditShare(int(accounting["audit.audited"]), int(accounting.get("read") or 0),
                      "recalibrate")


def load_history(output: str, *, last: int | None = None, decisions: str | None = None
                 ) -> list[HistoryRun]:
    """Every complete recalibrate run of ``output`` in run order (``started_utc``, run id).

    Parameters
    ----------
    output : str
        A recalibrate output directory (holding ``runs/``).
    last : int, optional
        Keep only the newest ``last`` runs.
    decisions : str, optional
        A decide output directory: audit shares from its runs (see the module doc).

    Raises
    ------
    InputError
        The path does not exist, holds no complete recalibrate run, ``last`` is not positive,
        or a run's operating points cannot be read.
    """
    output = output.rstrip("/")
    if last is not None and last < 1:
        raise InputError(f"--last {last}: must be a positive number of runs")
    if not output or not FileSystems.exists(output):
        raise InputError(f"{output or output!r}: output directory not found")
    complete, incomplete = list_runs(output)
    manifests = {run_id: m for run_id, m in complete.items()
                 if m.get("command", "recalibrate") == "recalibrate"}
    if not manifests:
        what = f" ({len(incomplete)} incomplete)" if incomplete else ""
        raise InputError(f"{output}: no complete recalibrate run under runs/{what}: "
                         "expected a recalibrate output directory")
    order = sorted(manifests, key=lambda r: (_started(manifests[r]), r))
    if last is not None:
        order = order[-last:]
    audits = _decide_audits(decisions) if decisions else {}
    runs = []
    for run_id in order:
        manifest = manifests[run_id]
        run_dir = f"{output}/runs/{run_id}"
        method, records = _read_points(run_dir, manifest, _decision_method(manifest))
        data = RunData(run_dir=run_dir, manifest=manifest, records=records, curves=[])
        points = {group: record for (group, _), record in applied_points(data).items()}
        classifiers = (list(records[0]["classifiers"]) if records else
                       list((manifest.get("config") or {}).get("classifiers") or []))
        audit = (AuditShare(*audits[run_id], "decide") if run_id in audits
                 else _manifest_audit(manifest))
        runs.append(HistoryRun(run_id, run_dir, manifest, method, classifiers, points, audit))
    return runs


# --------------------------------------------------------------------------- what to plot


def _movement(old: Sequence[float] | None, new: Sequence[float] | None) -> float:
    """How far thresholds moved between two runs: the sum of finite differences, 1 per
    classifier switched on or off, 1 when thresholds appeared or vanished."""
    if old is None and new is None:
        return 0.0
    if old is None or new is None or len(old) != len(new):
        return 1.0
    total = 0.0
    for a, b in zip(old, new, strict=True):
        if math.isinf(a) != math.isinf(b):
            total += 1.0
        elif not math.isinf(a):
            total += abs(b - a)
    return total


def threshold_movement(runs: Sequence[HistoryRun], group: str) -> tuple[int, float]:
    """``(moves, total)``: in how many consecutive run pairs the group's decision thresholds
    changed, and the summed movement (:func:`_movement`) over the runs that have the group."""
    seen = [run.points[group].get("thresholds") for run in runs if group in run.points]
    moves, total = 0, 0.0
    for old, new in itertools.pairwise(seen):
        step = _movement(old, new)
        moves += step > 0
        total += step
    return moves, total


def held_groups(runs: Sequence[HistoryRun], groups: Iterable[str]) -> dict[str, int]:
    """Per group: how many held runs' guard violations name it (``group 'name'``)."""
    named: dict[str, int] = {}
    quoted = re.compile(r"group ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
    wanted = set(groups)
    for run in runs:
        found = set()
        for violation in run.violations:
            for match in quoted.finditer(str(violation)):
                try:
                    name = ast.literal_eval(match.group(1))
                except (ValueError, SyntaxError):
                    continue
                if name in wanted:
                    found.add(name)
        for name in found:
            named[name] = named.get(name, 0) + 1
    return named


def plotted_groups(runs: Sequence[HistoryRun], groups: Sequence[str], *,
                   selected: Sequence[str] = (), limit: int | None = MAX_PLOTTED_GROUPS
                   ) -> dict[str, list[str]]:
    """The groups that get a figure, with why, in the page's order.

    ``__all__`` and the ``selected`` groups always; then the groups named by a held run's
    guard violations (most often named first), then those whose thresholds moved most
    (:func:`threshold_movement`, moves then total), until ``limit`` groups (None: every group).
    """
    reasons: dict[str, list[str]] = {}
    if ALL_GROUPS in groups:
        reasons[ALL_GROUPS] = ["all groups"]
    for group in selected:
        reasons.setdefault(group, []).append("selected")
    bound = len(groups) if limit is None else max(limit, len(reasons))
    held = held_groups(runs, groups)
    for group in sorted(held, key=lambda g: (-held[g], g)):
        if group in reasons:
            reasons[group].append("held")
        elif len(reasons) < bound:
            reasons[group] = ["held"]
    movement = {g: threshold_movement(runs, g) for g in groups}
    for group in sorted(groups, key=lambda g: (-movement[g][0], -movement[g][1], g)):
        if len(reasons) >= bound:
            break
        if group not in reasons:
            moved = movement[group]
            reasons[group] = ([f"moved in {moved[0]} of {len(runs) - 1} run changes"]
                              if moved[0] else ["listed (every group fits)"])
    order = group_order(reasons)
    return {g: reasons[g] for g in [ALL_GROUPS, *order] if g in reasons}

