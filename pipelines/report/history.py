"""The history of an output's recalibrations on one HTML page (``costlib report --output OUTPUT
--history``): does anything drift across the scheduled runs?

The page covers every complete recalibrate run of ``OUTPUT/runs/`` (one with ``manifest.json``;
published or held by the publish guard) in run order: the manifest's ``started_utc``, then the
run id; ``--last N`` keeps the newest ``N``. Per run it reads the decision method's record of
every group (windowed runs: the record ``costlib decide`` applies,
:func:`costlib_pipelines.report.page.applied_points`) and shows

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
palette-PNG data URIs drawn by blitting (:mod:`costlib_pipelines.report.figures`), nothing
fetched from the network.
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator

from costlib_pipelines.io.files import InputError, write_bytes_atomically
from costlib_pipelines.io.runs import latest_run_id, list_runs
from costlib_pipelines.report.figures import _Blitter
from costlib_pipelines.report.page import (
    ALL_GROUPS,
    RunData,
    _e,
    _fmt_count,
    _fmt_interval,
    _fmt_ratio,
    _fmt_threshold,
    _fmt_time,
    _group_order,
    _image,
    _page,
    _sort_value,
    _status_badge,
    _table,
    _td,
    _tr,
    _with_interval,
    applied_points,
)

__all__ = [
    "MAX_PLOTTED_GROUPS",
    "AuditShare",
    "HistoryRun",
    "build_history",
    "load_history",
    "plotted_groups",
    "threshold_movement",
    "write_history",
]

#: Groups that get a figure and a per-run table (``__all__`` and the ``--groups`` selected
#: always; then held, then most moved, up to this many); the others are rows of the group table.
MAX_PLOTTED_GROUPS = 10

#: Record fields the history reads (older records may lack some: those show as absent).
COLUMNS = ("group", "method", "classifiers", "thresholds", "status", "fallback_group",
           "point_status", "reason", "volume", "tp", "fp", "precision", "precision_ci_low",
           "precision_ci_high", "estimated_recall", "estimated_recall_ci_low",
           "estimated_recall_ci_high", "rated_positives", "rated_negatives", "window_start",
           "window_end", "pane_index")

#: The table of runs starts unfolded up to this many runs.
OPEN_RUNS = 30

_NOT_OK = ("fallback", "kept", "insufficient_data")
_POINT_NOT_OK = ("coverage_limited", "infeasible")


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


def _held_groups(runs: Sequence[HistoryRun], groups: Iterable[str]) -> dict[str, int]:
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
    held = _held_groups(runs, groups)
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
    order = _group_order(reasons)
    return {g: reasons[g] for g in [ALL_GROUPS, *order] if g in reasons}


# --------------------------------------------------------------------------- figures


def nice_count_ceiling(value: float) -> float:
    """The smallest ``m * 10**e`` (``m`` in 1, 2, 5) at least ``value`` (1 for none)."""
    if not value > 0 or math.isinf(value):
        return 1.0
    exponent = math.floor(math.log10(value))
    for e in (exponent - 1, exponent, exponent + 1):
        for m in (1.0, 2.0, 5.0):
            candidate = float(f"{m:g}e{e}")
            if candidate >= value:
                return candidate
    return float(f"1e{exponent + 2}")


def _values(points: Sequence[Mapping[str, Any] | None], field: str) -> np.ndarray:
    """One float per run (NaN where the group or the field is absent)."""
    out = np.full(len(points), np.nan)
    for i, p in enumerate(points):
        value = None if p is None else p.get(field)
        if value is not None:
            out[i] = float(value)
    return out


class HistoryFigures:
    """The small multiples of a history page: one figure of four panels, made once, blitted
    per group (:class:`costlib_pipelines.report.figures._Blitter`).

    The x axis (the runs, ticks labelled with their start dates, held runs shaded) and the
    threshold, precision and recall axes are the same for every group; only the volume panel
    has views (its y limit, :func:`nice_count_ceiling` of the group's largest volume).
    """

    def __init__(self, runs: Sequence[HistoryRun], classifiers: Sequence[str],
                 threshold_range: tuple[float, float]):
        from costlib.thresholds._plots import _COLORS

        n = len(runs)
        self.classifiers = list(classifiers)
        self.figure = Figure(figsize=(15, 2.75))
        self.figure.subplots_adjust(left=0.045, right=0.985, bottom=0.24, top=0.8, wspace=0.25)
        axes: list[Axes] = list(self.figure.subplots(1, 4, sharex=True))
        self.axes = axes
        low, high = threshold_range
        span = max(high - low, 1e-6)
        self.off_level = high + 0.12 * span
        titles = ("thresholds (decision method)", "flagged volume",
                  "precision among rated rows", "estimated recall (audit)")
        colours = list(_COLORS.values()) or ["C0", "C1", "C2", "C3"]
        for ax, title in zip(axes, titles, strict=True):
            ax.set_title(title, fontsize=9)
            ax.set_xlim(-0.5, n - 0.5)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
            for i, run in enumerate(runs):
                if run.held:
                    ax.axvspan(i - 0.5, i + 0.5, color="#f4b6b0", alpha=0.5, lw=0)
        ticks = np.unique(np.linspace(0, n - 1, min(n, 3)).round().astype(int))
        dates = [(run.started or "")[:10] for run in runs]
        distinct = len(set(dates)) == n and "" not in dates  # else dates repeat: run numbers
        labels = [f"#{i + 1}\n{dates[i]}" if distinct else f"#{i + 1}" for i in ticks]
        for ax in axes:
            ax.set_xticks(ticks, labels)
        axes[0].set_ylim(low - 0.05 * span, self.off_level + 0.08 * span)
        axes[0].axhline(self.off_level, color="gray", lw=0.6, ls=":")
        axes[0].text(-0.5, self.off_level, " off", fontsize=7, va="bottom", color="gray")
        for ax in axes[2:]:
            ax.set_ylim(0, 1.05)
            ax.yaxis.set_major_locator(MaxNLocator(5))
        axes[1].yaxis.set_major_locator(MaxNLocator(4))
        marker = "o" if n <= 60 else None
        ms = 3
        self.threshold_lines: list[Line2D] = []
        self.off_marks: list[Line2D] = []
        for j, name in enumerate(self.classifiers):
            colour = colours[j % len(colours)]
            (line,) = axes[0].plot([], [], "-", marker=marker, ms=ms, lw=1.2, color=colour,
                                   label=name)
            (off,) = axes[0].plot([], [], "^", ms=4, color=colour, label="_off")
            self.threshold_lines.append(line)
            self.off_marks.append(off)
        (self.not_ok,) = axes[0].plot([], [], "v", ms=5, color="#c06000",
                                      label="status not ok")
        (self.volume,) = axes[1].plot([], [], "-", marker=marker, ms=ms, lw=1.2, color="C0")
        (self.precision,) = axes[2].plot([], [], "-", marker=marker, ms=ms, lw=1.2,
                                         color="C0")
        (self.precision_low,) = axes[2].plot([], [], "--", lw=0.7, color="C0")
        (self.precision_high,) = axes[2].plot([], [], "--", lw=0.7, color="C0")
        (self.point_not_ok,) = axes[2].plot([], [], "v", ms=5, color="#b00000")
        (self.recall,) = axes[3].plot([], [], "-", marker=marker, ms=ms, lw=1.2, color="C2")
        (self.recall_low,) = axes[3].plot([], [], "--", lw=0.7, color="C2")
        (self.recall_high,) = axes[3].plot([], [], "--", lw=0.7, color="C2")
        self.no_recall: Text = axes[3].text(0.5, 0.5, "no audit data", ha="center",
                                            va="center", transform=axes[3].transAxes,
                                            fontsize=9, color="gray")
        handles: list[Artist] = [*self.threshold_lines,
                   Line2D([], [], ls="", marker="^", color="gray", label="off"),
                   self.not_ok,
                   Line2D([], [], ls="", marker="v", ms=5, color="#b00000",
                          label="point coverage-limited / infeasible"),
                   Line2D([], [], ls="--", lw=0.7, color="gray", label="bootstrap interval"),
                   Patch(color="#f4b6b0", alpha=0.5, label="run held by the guard")]
        self.figure.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=7,
                           frameon=False, bbox_to_anchor=(0.5, 1.0))
        artists: list[tuple[Axes, Artist]] = [
            (axes[0], a) for a in (*self.threshold_lines, *self.off_marks, self.not_ok)]
        artists += [(axes[1], self.volume)]
        artists += [(axes[2], a) for a in (self.precision, self.precision_low,
                                           self.precision_high, self.point_not_ok)]
        artists += [(axes[3], a) for a in (self.recall, self.recall_low, self.recall_high,
                                           self.no_recall)]
        self.blit = _Blitter(self.figure, artists, variable=[axes[1]])

    def uri(self, points: Sequence[Mapping[str, Any] | None]) -> str:
        """The figure of one group (``points``: its record per run, None where absent)."""
        x = np.arange(len(points), dtype=float)
        k = len(self.classifiers)
        thresholds = np.full((len(points), k), np.nan)
        for i, p in enumerate(points):
            values = None if p is None else p.get("thresholds")
            if values is not None and len(values) == k:
                thresholds[i] = values
        for j in range(k):
            column = thresholds[:, j]
            finite = np.where(np.isinf(column), np.nan, column)
            self.threshold_lines[j].set_data(x, finite)
            off = np.isposinf(column)
            self.off_marks[j].set_data(x[off], np.full(off.sum(), self.off_level))
        y0 = self.axes[0].get_ylim()[0]
        bad = np.array([p is not None and p.get("status") in _NOT_OK for p in points])
        self.not_ok.set_data(x[bad], np.full(bad.sum(), y0))
        volume = _values(points, "volume")
        self.volume.set_data(x, volume)
        top = nice_count_ceiling(float(np.nanmax(volume)) * 1.05
                                 if np.isfinite(volume).any() else 0.0)
        self.precision.set_data(x, _values(points, "precision"))
        self.precision_low.set_data(x, _values(points, "precision_ci_low"))
        self.precision_high.set_data(x, _values(points, "precision_ci_high"))
        limited = np.array([p is not None and p.get("point_status") in _POINT_NOT_OK
                            for p in points])
        self.point_not_ok.set_data(x[limited], np.full(limited.sum(), 0.0))
        recall = _values(points, "estimated_recall")
        self.recall.set_data(x, recall)
        self.recall_low.set_data(x, _values(points, "estimated_recall_ci_low"))
        self.recall_high.set_data(x, _values(points, "estimated_recall_ci_high"))
        self.no_recall.set_visible(not np.isfinite(recall).any())

        def apply_view() -> None:
            self.axes[1].set_ylim(0, top)

        return self.blit.render(top, apply_view)


def _threshold_range(runs: Sequence[HistoryRun], groups: Iterable[str]) -> tuple[float, float]:
    """Smallest and largest finite threshold of ``groups`` over the runs ((0, 1) for none)."""
    values = [t for run in runs for g in groups if g in run.points
              for t in run.points[g].get("thresholds") or () if not math.isinf(t)]
    return (min(values), max(values)) if values else (0.0, 1.0)


# --------------------------------------------------------------------------- HTML


def _publication(run: HistoryRun, latest: str | None) -> str:
    """``published`` / ``held`` (+ LATEST, override) of a run, as HTML."""
    if run.held:
        text = f'<span class="badge infeasible">held</span> {len(run.violations)} violation(s)'
    elif run.manifest.get("published") is None:
        text = '<span class="badge kept">not recorded</span>'
    else:
        override = (run.manifest.get("guard") or {}).get("override")
        text = '<span class="badge ok">published</span>' + (
            " over the guard" if override else "")
    if run.run_id == latest:
        text += " · LATEST"
    return text


def _audit_text(audit: AuditShare | None) -> str:
    if audit is None or audit.share is None:
        return "–"
    return f"{audit.share:.2%} ({audit.source})"


def _runs_section(runs: Sequence[HistoryRun], latest: str | None) -> str:
    """One row per run: times, publication, method, statuses, audit share, ``__all__``."""
    rows = []
    for i, run in enumerate(runs):
        statuses = [p.get("status") for p in run.points.values()]
        points = [p.get("point_status") for p in run.points.values()]
        summary = ", ".join(f"{statuses.count(s)} {s.replace('_', ' ')}"
                            for s in ("ok", *_NOT_OK) if s in statuses)
        limited = sum(p in _POINT_NOT_OK for p in points)
        overall = run.points.get(ALL_GROUPS)
        violations = "".join(f"<div class=\"note\">{_e(v)}</div>" for v in run.violations[:3])
        more = (f'<div class="note">… {len(run.violations) - 3} more</div>'
                if len(run.violations) > 3 else "")
        cells = [
            _td(_e(i + 1), sort=i), _td(_e(run.run_id), sort=run.run_id),
            _td(_e(_fmt_time(run.started))),
            _td(_publication(run, latest) + violations + more,
                sort="held" if run.held else "published"),
            _td(_e(run.method)), _td(_e(f"{len(run.points)}: {summary}")),
            _td(_e(limited), sort=limited),
            _td(_e(_audit_text(run.audit)),
                sort=_sort_value(None if run.audit is None else run.audit.share)),
            _td(_e(", ".join(_fmt_threshold(t) for t in (overall or {}).get("thresholds")
                             or ()) or "–")),
        ]
        rows.append(_tr(cells, run=run.run_id, published="false" if run.held else "true"))
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
    held = sum(run.held for run in runs)
    opened = " open" if len(runs) <= OPEN_RUNS else ""
    return (f'<section id="runs"><h2>Runs</h2><p class="note">{len(runs)} complete recalibrate '
            "run(s) in run order (started, then run id); held = complete but kept from LATEST "
            f"by the publish guard. {_e(audit_note)} Audit shares are per run: neither side "
            f"records them per group.</p><details{opened}><summary>{len(runs)} runs, {held} held"
            "</summary>" + _table(headers, rows, css="runs history") + "</details></section>")


def _range_text(values: Sequence[float | None], fmt: Any) -> str:
    finite = [v for v in values if v is not None and not math.isnan(v)]
    if not finite:
        return "–"
    return f"{fmt(min(finite))} – {fmt(max(finite))}"


def _groups_section(runs: Sequence[HistoryRun], groups: Sequence[str],
                    classifiers: Sequence[str], plotted: Mapping[str, Sequence[str]],
                    anchors: Mapping[str, str]) -> str:
    """One row per group over all runs: latest values and ranges, moves, statuses."""
    held = _held_groups(runs, groups)
    rows = []
    for group in groups:
        seen = [run.points[group] for run in runs if group in run.points]
        last = seen[-1]
        moves, total = threshold_movement(runs, group)
        label = (f'<a href="#{_e(anchors[group])}">{_e(group)}</a>' if group in anchors
                 else _e(group))
        cells = [_td(label, sort=group), _td(_e(len(seen)), sort=len(seen)),
                 _td(_status_badge(last["status"]), sort=last["status"]),
                 _td(_e(moves), sort=moves), _td(_e(f"{total:.4f}"), sort=repr(total))]
        for j, _name in enumerate(classifiers):
            values = [p["thresholds"][j] for p in seen
                      if p.get("thresholds") is not None and len(p["thresholds"]) > j]
            now = (last.get("thresholds") or [None] * (j + 1))[j] \
                if len(last.get("thresholds") or ()) > j else None
            finite = [v for v in values if not math.isinf(v)]
            span = _range_text(finite, _fmt_threshold) if finite else "–"
            cells.append(_td(_with_interval(_fmt_threshold(now), span),
                             sort=_sort_value(now)))
        volumes = [p.get("volume") for p in seen]
        precisions = [p.get("precision") for p in seen]
        recalls = [p.get("estimated_recall") for p in seen]
        cells += [
            _td(_with_interval(_fmt_count(last.get("volume")), _range_text(volumes, _fmt_count)),
                sort=_sort_value(last.get("volume"))),
            _td(_with_interval(_fmt_ratio(last.get("precision")),
                               _range_text(precisions, _fmt_ratio)),
                sort=_sort_value(last.get("precision"))),
            _td(_with_interval(_fmt_ratio(last.get("estimated_recall")),
                               _range_text(recalls, _fmt_ratio)),
                sort=_sort_value(last.get("estimated_recall"))),
            _td(_e(sum(p.get("status") in _NOT_OK for p in seen))),
            _td(_e(sum(p.get("point_status") in _POINT_NOT_OK for p in seen))),
            _td(_e(held.get(group, 0))),
            _td(_e(", ".join(plotted.get(group, ())))),
        ]
        rows.append(_tr(cells, group=group))
    headers = ["group", "runs", "latest status", "moves", "total movement",
               *(f"t[{c}] latest (range)" for c in classifiers),
               "volume latest (range)", "precision latest (range)",
               "est. recall latest (range)", "runs not ok", "points limited",
               "held runs naming it", "figure"]
    return ('<section id="groups"><h2>Groups over the runs</h2><p class="note">Per group: '
            "the decision method's values in the newest run that has the group, with the "
            "range over all runs in grey (thresholds: finite values; off = the classifier never "
            "fires). Moves: consecutive runs whose thresholds differ; total movement: summed "
            "absolute changes, 1 per classifier switched on or off. Runs not ok: status "
            "fallback, kept or insufficient data; points limited: coverage-limited or "
            "infeasible; – = absent in every run (estimated recall needs audit rows: "
            "columns.audit_probability).</p>"
            + _table(headers, rows, css="groups history") + "</section>")


def _group_rows(runs: Sequence[HistoryRun], group: str, classifiers: Sequence[str]
                ) -> list[str]:
    rows = []
    for i, run in enumerate(runs):
        p = run.points.get(group)
        publication = "held" if run.held else "published"
        head = [_td(_e(i + 1)), _td(_e(run.run_id)), _td(_e(publication))]
        if p is None:
            absent = f'<td colspan="{len(classifiers) + 5}" class="note">not in this run</td>'
            rows.append(_tr([*head, absent], run=run.run_id, group=group))
            continue
        thresholds = p.get("thresholds")
        cells = [_td(_status_badge(p["status"]), status=p["status"]),
                 _td(_e(p.get("point_status") or "–"))]
        for j in range(len(classifiers)):
            value = (thresholds[j] if thresholds is not None and len(thresholds) > j
                     else None)
            cells.append(_td(_e(_fmt_threshold(value)), value=_sort_value(value)))
        cells += [
            _td(_e(_fmt_count(p.get("volume"))), value=_sort_value(p.get("volume"))),
            _td(_with_interval(_fmt_ratio(p.get("precision")),
                               _fmt_interval(p.get("precision_ci_low"),
                                             p.get("precision_ci_high"), _fmt_ratio)),
                value=_sort_value(p.get("precision"))),
            _td(_with_interval(_fmt_ratio(p.get("estimated_recall")),
                               _fmt_interval(p.get("estimated_recall_ci_low"),
                                             p.get("estimated_recall_ci_high"), _fmt_ratio)),
                value=_sort_value(p.get("estimated_recall"))),
        ]
        rows.append(_tr(head + cells, run=run.run_id, group=group))
    return rows


def _group_section(runs: Sequence[HistoryRun], group: str, classifiers: Sequence[str],
                   anchor: str, reasons: Sequence[str], figure: str) -> str:
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
    rows = _group_rows(runs, group, classifiers)
    return (f'<section class="group" id="{_e(anchor)}" data-group="{_e(group)}">'
            f"<h3>{_e(title)}</h3><p class=\"note\">Shown: {_e(', '.join(reasons))}."
            + (f" Absent: {_e('; '.join(notes))}." if notes else "") + "</p>"
            f'<div class="figures">{_image(figure, f"history of group {group}", "history")}'
            "</div><details><summary>values per run</summary>"
            + _table(headers, rows, css="group-history") + "</details></section>")


_HISTORY_CSS = """<style>
.figures img.history { max-width: 100%; }
table.history td, table.group-history td { font-variant-numeric: tabular-nums; }
details summary { cursor: pointer; color: #1f5fbf; margin: .3rem 0; }
table.groups { display: block; overflow-x: auto; }
</style>"""


def build_history(runs: Sequence[HistoryRun], output: str, *, groups: Iterable[str] = (),
                  all_groups: bool = False, latest: str | None = None) -> str:
    """The history page of ``runs`` (in run order) as one HTML string.

    Raises
    ------
    InputError
        A selected group is in none of the runs.
    """
    names = _group_order(g for run in runs for g in run.points)
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
        drawer = HistoryFigures(runs, classifiers, _threshold_range(runs, plotted))
        for group, reasons in plotted.items():
            figure = drawer.uri([run.points.get(group) for run in runs])
            sections.append(_group_section(runs, group, classifiers, anchors[group], reasons,
                                           figure))
    held = sum(run.held for run in runs)
    rule = ("Figures: every group (--all-groups)." if all_groups else
            f"Figures for at most {MAX_PLOTTED_GROUPS} groups: {ALL_GROUPS}, the groups named "
            "with --groups, the groups a held run's guard violations name, then those whose "
            "thresholds moved in the most runs (then by total movement); "
            f"{len(plotted)} of {len(names)} groups here. Every group is a row of the table "
            "'Groups over the runs'.")
    body = (
        "<h1>Recalibration history</h1>"
        f'<p class="subtitle">{_e(output)} · {len(runs)} run(s) '
        f"({_e(runs[0].run_id)} → {_e(runs[-1].run_id)}) · {len(names)} groups · "
        f"{held} held</p>"
        f'<p class="note">{_e(rule)} Each figure: x = the runs in order (#n as in the '
        "table of runs, with the date they started when every run has its own), red bands "
        "= runs held by the publish guard; panels: the decision method's "
        "thresholds per classifier (triangles at the top: off; orange marks at the bottom: "
        "status fallback, kept or insufficient data), flagged volume (rated and unrated rows "
        "the thresholds flag), precision among rated rows and estimated recall from the audit "
        "sample (dashed: bootstrap intervals, when the run computed them; red marks: a "
        "coverage-limited or infeasible point). Gaps: the group is absent from a run.</p>"
        + _runs_section(runs, latest)
        + _groups_section(runs, names, classifiers, plotted, anchors)
        + '<h2 id="figures">Per group</h2>' + "".join(sections)
    )
    return _page(f"costlib report — history of {output}", _HISTORY_CSS + body)


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
    write_bytes_atomically(target, document.encode("utf-8"))
    return target
