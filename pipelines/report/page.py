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

The *previous run* is the newest other complete run (one with ``manifest.json``) of the same
command under the same ``OUTPUT/runs/`` whose ``finished_utc`` is earlier than this run's;
published or not (a run held by the publish guard is complete too).

Windowed runs: each group is shown at the window ``costlib decide`` applies
(:func:`applied_points`: by default its latest *complete* window, see
:mod:`costlib_pipelines.decide.pipeline`)
and that window's newest pane; a table lists every window of the run. The change from the
previous run compares those thresholds.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from apache_beam.io.filesystems import FileSystems

from costlib_pipelines.io.files import InputError, write_bytes_atomically
from costlib_pipelines.io.runs import load_operating_points, read_manifest, read_records
from costlib_pipelines.report.capacity import capacity_section
from costlib_pipelines.report.figures import GroupFigures

__all__ = [
    "RunData",
    "ThresholdChange",
    "build_report",
    "latest_points",
    "load_run",
    "previous_run",
    "threshold_changes",
    "write_report",
]

ALL_GROUPS = "__all__"
Key = tuple[str, str]


# --------------------------------------------------------------------------- reading a run


@dataclass(frozen=True)
class RunData:
    """What the report reads from one complete run directory.

    Attributes
    ----------
    run_dir : str
        The run directory (``OUTPUT/runs/<run_id>``).
    manifest : dict
        Its ``manifest.json``.
    records : list of dict
        Every operating point record (``schemas/operating_point.json``), all windows.
    curves : list of dict
        Every PN curve record of ``pn_curves.parquet`` (all windows).
    """

    run_dir: str
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    curves: list[dict[str, Any]]

    @property
    def run_id(self) -> str:
        """The run id of the manifest (the directory name if the manifest has none)."""
        return str(self.manifest.get("run_id") or self.run_dir.rsplit("/", 1)[-1])

    @property
    def classifiers(self) -> list[str]:
        """Classifier names in threshold order."""
        if self.records:
            return list(self.records[0]["classifiers"])
        return list(self.manifest.get("config", {}).get("classifiers", []))

    @property
    def windowed(self) -> bool:
        """True when the records are per event-time window."""
        return any(r["window_start"] is not None for r in self.records)


def _match(pattern: str) -> list[str]:
    """Paths matching a glob, sorted."""
    return sorted(m.path for result in FileSystems.match([pattern]) for m in result.metadata_list)


def _read_curves(run_dir: str) -> list[dict[str, Any]]:
    """Every PN curve record of the run (top level, or all windows)."""
    top = f"{run_dir}/pn_curves.parquet"
    paths = [top] if FileSystems.exists(top) else _match(f"{run_dir}/windows/*/pn_curves.parquet")
    curves: list[dict[str, Any]] = []
    for path in paths:
        curves += read_records(path)
    return curves


def load_run(path: str) -> RunData:
    """Read a complete recalibration run.

    Parameters
    ----------
    path : str
        A run directory (``OUTPUT/runs/<run_id>``) or a recalibrate output directory (its
        ``LATEST`` run).

    Returns
    -------
    RunData

    Raises
    ------
    InputError
        The path does not exist, is not a run directory, or the run is incomplete (no
        ``manifest.json``: interrupted or failed).
    """
    path = path.rstrip("/")
    if not FileSystems.exists(path):
        raise InputError(f"{path}: run directory not found")
    records, run_dir = load_operating_points(path)
    manifest = read_manifest(run_dir)
    if manifest.get("command", "recalibrate") != "recalibrate":
        raise InputError(f"{run_dir}: a {manifest['command']!r} run, not a recalibrate run")
    return RunData(run_dir=run_dir, manifest=manifest, records=records,
                   curves=_read_curves(run_dir))


def _finished(manifest: Mapping[str, Any]) -> dt.datetime | None:
    """The manifest's ``finished_utc`` as an aware datetime (None if absent)."""
    value = manifest.get("finished_utc")
    return dt.datetime.fromisoformat(value) if value else None


def previous_run(run: RunData) -> RunData | None:
    """The newest other complete recalibrate run under the same ``runs/`` that finished earlier.

    Returns None when there is none (the first run, or the only complete one).
    """
    finished = _finished(run.manifest)
    parent = run.run_dir.rsplit("/", 1)[0]
    candidates = []
    for manifest_path in _match(f"{parent}/*/manifest.json"):
        run_dir = manifest_path.rsplit("/", 1)[0]
        if run_dir.rstrip("/") == run.run_dir.rstrip("/"):
            continue
        manifest = read_manifest(run_dir)
        other = _finished(manifest)
        if manifest.get("command", "recalibrate") != "recalibrate" or other is None:
            continue
        if finished is None or other < finished:
            candidates.append((other, run_dir))
    if not candidates:
        return None
    return load_run(max(candidates)[1])


# --------------------------------------------------------------------------- what to show


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
    event-time range the run read (:func:`costlib_pipelines.decide.selection.uncovered_share`); each
    group is shown at its latest such window and that window's newest pane. A group with no complete
    window is shown at its latest window with ``window_complete`` False: ``decide`` gives it
    the all-groups thresholds instead. Without a recorded range every window counts.
    """
    from costlib_pipelines.decide.selection import uncovered_share

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


def _group_order(groups: Iterable[str]) -> list[str]:
    """Groups sorted by name, the all-groups grid last."""
    return sorted(set(groups), key=lambda g: (g == ALL_GROUPS, g))


def _lattice_thresholds(manifest: Mapping[str, Any]) -> list[np.ndarray] | None:
    """Threshold value at every lattice index per classifier.

    The manifest's ``grid_edges`` when recorded (every recipe). Older runs: the lattice is the
    config's fixed edges plus, when the run added them (``in_force.edges_added`` of the manifest),
    the thresholds in force, rebuilt from the run they came from as recalibrate built them
    (:func:`costlib_pipelines.recalibrate.in_force.edges_with_in_force`). None when the edges are
    not fixed or cannot be rebuilt (the source run is gone, or it now adds other edges than the
    manifest says).
    """
    from costlib_pipelines.config import ConfigError, RunConfig
    from costlib_pipelines.recalibrate.in_force import edges_with_in_force, read_in_force
    from costlib_pipelines.recalibrate.publish import Baseline

    recorded = (manifest.get("grid_edges") or {}).get("edges")
    if isinstance(recorded, list) and recorded:  # runs since the manifest records them
        try:
            return [np.append(np.asarray(e, dtype=np.float64), np.inf) for e in recorded]
        except (TypeError, ValueError):
            return None
    try:
        config = RunConfig.from_dict(manifest.get("config", {}), source="manifest")
        edges = config.fixed_edges()
        in_force = manifest.get("in_force") or {}
        added = {k: int(v) for k, v in (in_force.get("edges_added") or {}).items()}
        if edges is not None and any(added.values()):
            thresholds, _ = read_in_force(config, in_force["source"], Baseline(None, None),
                                          "")
            edges, rebuilt = edges_with_in_force(edges, thresholds, config)
            if rebuilt != added:
                return None
    except (ConfigError, InputError, KeyError, TypeError, ValueError):
        return None
    return None if edges is None else [np.append(e, np.inf) for e in edges]


def _lattice_fits(lattice: Sequence[np.ndarray] | None, run: RunData,
                  points: Mapping[Key, Mapping[str, Any]],
                  index: Mapping[tuple[Any, Any, Any], dict[str, Any]]) -> bool:
    """Whether every chosen cell of every curve indexes its record's thresholds in
    ``lattice`` (the check that the figure's threshold ticks are the run's)."""
    if lattice is None:
        return False
    k = len(lattice)
    for point in points.values():
        curve = index.get((point["group"], point["method"], point["window_start"]))
        if curve is None or point["thresholds"] is None or not curve["path"]:
            continue
        cell = np.asarray(curve["path"], dtype=int).reshape(-1, k)[curve["chosen_position"]]
        if any(c >= len(axis) or axis[c] != t
               for c, axis, t in zip(cell, lattice, point["thresholds"], strict=True)):
            return False
    return True


# --------------------------------------------------------------------------- figures


def _curve_index(run: RunData) -> dict[tuple[Any, Any, Any], dict[str, Any]]:
    """The run's PN curve records by (group, method, window start) (first one wins)."""
    index: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for curve in run.curves:
        index.setdefault((curve["group"], curve["method"], curve["window_start"]), curve)
    return index


def _curves_of(run: RunData, point: Mapping[str, Any],
               index: Mapping[tuple[Any, Any, Any], dict[str, Any]] | None = None
               ) -> dict[str, Any] | None:
    """The PN curve record a point was chosen on (same group, method and window)."""
    index = _curve_index(run) if index is None else index
    return index.get((point["group"], point["method"], point["window_start"]))


def group_figures(run: RunData, methods: Sequence[str],
                  points: Mapping[Key, Mapping[str, Any]] | None = None,
                  index: Mapping[tuple[Any, Any, Any], dict[str, Any]] | None = None,
                  ) -> GroupFigures:
    """The figures of the run's group sections: the methods' curve kinds, the lattice (fixed
    edges, when every chosen cell indexes its thresholds in it) and the largest lattice index
    of any curve (quantile edges, or a lattice that does not fit). ``points`` and ``index``:
    the run's :func:`applied_points` and :func:`_curve_index` when the caller has them."""
    kinds: dict[str, str] = {}
    for curve in run.curves:
        kinds.setdefault(curve["method"], curve["curve_kind"])
    lattice = _lattice_thresholds(run.manifest)
    if not _lattice_fits(lattice, run, applied_points(run) if points is None else points,
                         _curve_index(run) if index is None else index):
        lattice = None
    config = run.manifest.get("config", {})
    decision = config.get("decision_method") or (list(methods) or [None])[0]
    return GroupFigures(methods, kinds, run.classifiers, lattice,
                        _path_extent(run.curves, len(run.classifiers)), decision)


def _path_extent(curves: Iterable[Mapping[str, Any]], k: int) -> tuple[int, ...] | None:
    """The largest lattice index per classifier over every curve's path (None for none)."""
    extent = np.full(k, -1)
    for curve in curves:
        cells = np.asarray(curve["path"], dtype=int).reshape(-1, k)
        if cells.size:
            extent = np.maximum(extent, cells.max(axis=0))
    return None if (extent < 0).any() else tuple(int(e) for e in extent)


# --------------------------------------------------------------------------- HTML pieces


def _e(value: Any) -> str:
    """Escaped text for HTML content and attribute values."""
    return html.escape(str(value), quote=True)


def _fmt_threshold(value: float | None) -> str:
    """A threshold: 4 decimals, ``off`` for +inf, a dash for none."""
    if value is None:
        return "–"
    return "off" if math.isinf(value) else f"{value:.4f}"


def _fmt_thresholds(values: Sequence[float] | None) -> str:
    """Thresholds in classifier order, comma-separated."""
    if values is None:
        return "none"
    return ", ".join(_fmt_threshold(v) for v in values)


def _fmt_count(value: float | None) -> str:
    """A (weighted) count: thousands separators, decimals only when fractional."""
    if value is None:
        return "–"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _fmt_ratio(value: float | None) -> str:
    """A precision: 3 decimals, a dash for none or NaN."""
    return "–" if value is None or value != value else f"{value:.3f}"


def _fmt_difference(change: ThresholdChange) -> str:
    """A threshold difference (``0``, ``+0.0435``) or what happened in words."""
    if change.difference is None:
        return change.note
    return "0" if change.difference == 0 else f"{change.difference:+.4f}"


def _fmt_time(value: str | None) -> str:
    """An ISO timestamp as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if not value:
        return "?"
    return f"{dt.datetime.fromisoformat(value).astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"


def _fmt_interval(low: float | None, high: float | None, fmt: Callable[[float], str]) -> str:
    """``[low, high]`` with ``fmt`` applied, or an empty string."""
    if low is None or high is None:
        return ""
    return f"[{fmt(low)}, {fmt(high)}]"


def _with_interval(value: str, interval: str) -> str:
    """A value with its interval in a muted span (HTML)."""
    if not interval:
        return _e(value)
    return f'{_e(value)} <span class="ci">{_e(interval)}</span>'


def _table(headers: Sequence[str], rows: Sequence[str], *, css: str = "") -> str:
    """A table from escaped header texts and already-built ``<tr>`` rows."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    klass = f' class="{_e(css)}"' if css else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _attrs(css: str = "", **data: Any) -> str:
    """``class`` and ``data-*`` attributes, escaped (underscores in names become dashes)."""
    klass = f' class="{_e(css)}"' if css else ""
    return klass + "".join(f' data-{k.replace("_", "-")}="{_e(v)}"' for k, v in data.items())


def _td(content: str, css: str = "", **data: Any) -> str:
    """A ``<td>`` around already-built HTML."""
    return f"<td{_attrs(css, **data)}>{content}</td>"


def _tr(cells: Sequence[str], **data: Any) -> str:
    """A ``<tr>`` of already-built ``<td>`` elements."""
    return f"<tr{_attrs(**data)}>" + "".join(cells) + "</tr>"


def _row(cells: Sequence[str], **data: Any) -> str:
    """A ``<tr>`` of already-built cell HTML, with ``data-*`` attributes (escaped)."""
    return _tr([_td(c) for c in cells], **data)


def _image(uri: str, alt: str, css: str) -> str:
    """An ``<img>`` with a data URI."""
    return f'<img class="{_e(css)}" src="{uri}" alt="{_e(alt)}">'


def _status_badge(status: str) -> str:
    """A coloured status label (HTML)."""
    return f'<span class="badge {_e(status)}">{_e(status.replace("_", " "))}</span>'


def _plural(count: float, noun: str) -> str:
    """``1 rated positive``, ``3 rated positives``."""
    return f"{_fmt_count(count)} {noun}{'' if count == 1 else 's'}"


def _status_text(point: Mapping[str, Any], anchors: Mapping[str, str],
                 min_rated: Mapping[str, Any]) -> str:
    """What the status of a group means, in one or two sentences (HTML)."""
    own = (f"{_plural(point['rated_positives'], 'rated positive')} and "
           f"{_plural(point['rated_negatives'], 'rated negative')} of its own")
    needed = (f"min_rated: {min_rated.get('positives', '?')} positives and "
              f"{min_rated.get('negatives', '?')} negatives")
    if point["status"] == "fallback":
        parent = point["fallback_group"] or ALL_GROUPS
        link = (f'<a href="#{_e(anchors[parent])}">{_e(parent)}</a>' if parent in anchors
                else _e(parent))
        return (f"Too few rated rows ({_e(own)}; {_e(needed)}): this group "
                f"<strong>falls back</strong> to the thresholds of {link}. The table shows "
                f"{link}'s operating points (TP, FP and precision on its grid); there is no PN "
                f"curve of this group's own.")
    if point["status"] == "kept" and point.get("reason"):
        return (f"Thresholds chosen on this group's own grid ({_e(own)}), but this group "
                f"<strong>keeps the thresholds in force</strong>: {_e(point['reason'])}.")
    if point["status"] == "kept":
        return (f"Too few rated rows ({_e(own)}; {_e(needed)}) and no usable parent: this "
                f"group <strong>keeps the thresholds in force</strong> (TP, FP and precision "
                f"are theirs on its grid) until enough of its rows are rated.")
    if point["status"] == "insufficient_data":
        return (f"Too few rated rows ({_e(own)}; {_e(needed)}) and no usable parent: "
                f"<strong>no thresholds</strong>; decisions for this group are null.")
    return f"Thresholds chosen on this group's own grid ({_e(own)})."


def _inputs_text(inputs: Sequence[str | Mapping[str, Any]]) -> str:
    """``N file(s) in DIR: a, b, c … (R rows)`` (the common directory once, then file names).

    Entries are ``{"path", "rows", "row_groups"}`` (older manifests: plain paths).
    """
    if not inputs:
        return "none recorded"
    rows = [entry.get("rows") for entry in inputs if isinstance(entry, Mapping)]
    total = f" ({_fmt_count(sum(rows))} rows)" if rows and None not in rows else ""
    inputs = [entry["path"] if isinstance(entry, Mapping) else entry for entry in inputs]
    directories = {path.rsplit("/", 1)[0] if "/" in path else "" for path in inputs}
    names = [path.rsplit("/", 1)[-1] for path in inputs] if len(directories) == 1 else inputs
    where = f" in {next(iter(directories))}" if len(directories) == 1 else ""
    more = f" … ({len(inputs) - 4} more)" if len(inputs) > 4 else ""
    return f"{len(inputs)} file(s){where}: {', '.join(names[:4])}{more}{total}"


def _publication_text(manifest: Mapping[str, Any]) -> str:
    """Whether the publish guard let the run become ``LATEST``, and who overrode it."""
    guard = manifest.get("guard") or {}
    override = guard.get("override")
    publications = manifest.get("publications") or []
    if not manifest.get("published"):
        compared = guard.get("compared_with_run")
        return "held by the publish guard" + (f" (compared with {compared})" if compared else "")
    if override:
        return (f"published over the guard by {override.get('by', '?')}: "
                f"{override.get('reason', '')}")
    if publications:
        last = publications[-1]
        return f"published by {last.get('by', '?')}: {last.get('reason', '')}"
    return "published (LATEST moved to it)"


def _run_summary(run: RunData, previous: RunData | None) -> str:
    """Facts about the run: ids, times, inputs, config, previous run, publication."""
    m = run.manifest
    config = m.get("config", {})
    target = config.get("target", {})
    inputs = m.get("inputs", [])
    published = m.get("published")
    guard = m.get("guard") or {}
    facts = [
        ("run id", run.run_id),
        ("run directory", run.run_dir),
        ("started", _fmt_time(m.get("started_utc"))),
        ("finished", f"{_fmt_time(m.get('finished_utc'))} ({m.get('seconds', '?')} s on "
                     f"{m.get('runner', '?')})"),
        ("inputs", _inputs_text(inputs)),
        ("classifiers, rule", f"{', '.join(run.classifiers)}; rule '{config.get('rule', '?')}'"),
        ("target", f"marginal precision {target.get('marginal_precision', '?')}"),
        ("methods", f"{', '.join(config.get('methods', []))} (decisions use "
                    f"'{config.get('decision_method', '?')}')"),
        ("previous run", "no previous run" if previous is None else
         f"{previous.run_id} (finished {_fmt_time(previous.manifest.get('finished_utc'))})"),
    ]
    if published is not None:
        facts.append(("publication", _publication_text(m)))
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    violations = guard.get("violations") or []
    held = ""
    if violations:
        items = "".join(f"<li>{_e(v)}</li>" for v in violations)
        held = f'<div class="warn"><p>Publish guard violations:</p><ul>{items}</ul></div>'
    notes = guard.get("notes") or []
    if notes:
        items = "".join(f"<li>{_e(n)}</li>" for n in notes)
        held += f'<div class="notes"><p>Publish guard notes:</p><ul>{items}</ul></div>'
    return f'<section id="run"><h2>Run</h2><table class="facts">{rows}</table>{held}</section>'


def _accounting_section(manifest: Mapping[str, Any]) -> str:
    """The row accounting of ``manifest.json`` (HTML)."""
    acc = manifest.get("row_accounting") or {}
    reasons = acc.get("dead_letter_reasons") or {}
    rows = [
        _row([_e("read"), _e(_fmt_count(acc.get("read")))], key="read"),
        _row([_e("used (rated)"), _e(_fmt_count(acc.get("used")))], key="used"),
        _row([_e("unrated"), _e(_fmt_count(acc.get("unrated")))], key="unrated"),
        _row([_e("dead-lettered"), _e(_fmt_count(acc.get("dead_lettered")))],
             key="dead_lettered"),
    ]
    rows += [
        _row([f"&nbsp;&nbsp;{_e(reason)}", _e(_fmt_count(count))], key=f"dead_letter.{reason}")
        for reason, count in sorted(reasons.items())
    ]
    check = ("read = used + unrated + dead-lettered" if not reasons
             else "read = used + unrated + dead-lettered; dead-lettered rows by reason are "
                  "in the run's dead_letter/ files")
    return (f'<section id="accounting"><h2>Row accounting</h2>'
            f'{_table(["rows", "count"], rows, css="accounting")}'
            f'<p class="note">{_e(check)} (from manifest.json).</p>'
            f'{_plausibility_block(manifest)}</section>')


def _plausibility_block(manifest: Mapping[str, Any]) -> str:
    """The plausibility counters of ``manifest.json`` (HTML; a line when all are zero)."""
    counts = manifest.get("plausibility")
    if counts is None:  # a manifest written before plausibility checks existed
        return ""
    if not any(counts.values()):
        return ('<p class="note" data-key="plausibility">Plausibility checks: no row failed '
                '(scores within range, event times plausible, no duplicate item id counted).'
                '</p>')
    read = (manifest.get("row_accounting") or {}).get("read") or 0
    rows = [
        _row([_e(name), _e(_fmt_count(count)),
              _e(f"{count / read:.2%}" if read else "")], key=f"plausibility.{name}")
        for name, count in sorted(counts.items())
    ]
    return ('<h3>Plausibility checks</h3>'
            f'{_table(["check", "rows", "share of read"], rows, css="accounting")}'
            '<p class="note">Extra counters, not buckets: a counted row stays used or unrated '
            'unless the config dead-letters it (plausibility section of the run config).</p>')


def _change_css(change: ThresholdChange | None) -> str:
    """CSS class of a threshold cell: ``moved`` when it changed."""
    return "" if change is None or change.difference == 0 else "moved"


#: Columns of :func:`_coverage_cells`.
COVERAGE_HEADERS = ("volume", "coverage", "point")


def _coverage_cells(point: Mapping[str, Any]) -> list[str]:
    """Flagged volume, coverage and point status (reason as its title) of a record (HTML).

    Records written before these fields existed show empty cells.
    """
    status = point.get("point_status")
    if status is None:
        return ["", "", ""]
    badge = _status_badge(status)
    reason = point.get("reason")
    if reason:
        badge = f'<span title="{_e(reason)}">{badge}</span><div class="note">{_e(reason)}</div>'
    return [_e(_fmt_count(point.get("volume"))), _e(_fmt_ratio(point.get("coverage"))), badge]


def _resolution_note(point: Mapping[str, Any]) -> str:
    """The resolution check of a record: the objective against the most any finer lattice of
    the same rows could reach (``finer_bound``; HTML, empty for records without it)."""
    bound, value = point.get("finer_bound"), point.get("objective_value")
    if bound is None or value is None:
        return ""
    name = point.get("objective") or "objective"
    title = (f"{name} at the point: {value:.6g}. No threshold tuple between the candidate "
             f"thresholds (a finer lattice of the same rows) can exceed {bound:.6g}: a "
             "bound, not an estimate (costlib.thresholds._resolution).")
    text = "finer lattice: no better" if bound <= value else f"finer lattice ≤ {bound:.4g}"
    return f'<div class="note resolution" title="{_e(title)}">{_e(text)}</div>'



def _sort_value(value: float | None) -> str:
    """A cell's ``data-sort`` value: the number (``inf`` for off), empty when there is none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return "Infinity" if math.isinf(value) else repr(float(value))


def _overview_section(groups: Sequence[str], shown: Mapping[str, Mapping[str, Any]],
                      changes: Sequence[ThresholdChange], classifiers: Sequence[str],
                      previous: RunData | None, method: str, anchors: Mapping[str, str],
                      reasons: Mapping[str, Sequence[str]], detailed_all: bool) -> str:
    """One row per group: status, rated rows, the decision method's thresholds and change,
    coverage, and whether (and why) the group has a section below; with a search box and
    sortable columns (:data:`_OVERVIEW_SCRIPT`, no network).

    ``shown`` holds per group the record the row shows (its decision-method record, else its
    first); ``anchors`` the section ids of the groups that have a section.
    """
    by_key = {(c.group, c.method, c.classifier): c for c in changes}
    windowed = any(p["window_start"] is not None for p in shown.values())
    rows = []
    for group in groups:
        point = shown[group]
        label = (f'<a href="#{_e(anchors[group])}">{_e(group)}</a>' if group in anchors
                 else _e(group))
        cells = [_td(label, sort=group), _td(_status_badge(point["status"]), sort=point["status"]),
                 _td(_e(_fmt_count(point["rated_positives"])),
                     sort=_sort_value(point["rated_positives"])),
                 _td(_e(_fmt_count(point["rated_negatives"])),
                     sort=_sort_value(point["rated_negatives"]))]
        for j, name in enumerate(classifiers):
            value = None if point["thresholds"] is None else point["thresholds"][j]
            change = by_key.get((group, point["method"], name))
            delta = ("" if change is None
                     else f' <span class="ci">Δ {_e(_fmt_difference(change))}</span>')
            cells.append(_td(_e(_fmt_threshold(value)) + delta, _change_css(change),
                             sort=_sort_value(value)))
        coverage = _coverage_cells(point)
        cells += [_td(coverage[0], sort=_sort_value(point.get("volume"))),
                  _td(coverage[1], sort=_sort_value(point.get("coverage"))),
                  _td(coverage[2], sort=point.get("point_status") or "")]
        source = point["fallback_group"] if point["status"] == "fallback" else ""
        cells.append(_td(_e(f"thresholds of {source}" if source else "")))
        if windowed:
            start, end = point["window_start"], point["window_end"]
            cells.append(_td(_e(f"{start:%Y-%m-%d} → {end:%Y-%m-%d}")))
        if not detailed_all:
            cells.append(_td(_e(", ".join(reasons.get(group, ())))))
        rows.append(_tr(cells, group=group))
    since = ("Δ = change since the previous run " + previous.run_id if previous is not None
             else "no previous run to compare with")
    headers = ["group", "status", "rated +", "rated −",
               *(f"t[{c}]" for c in classifiers), *COVERAGE_HEADERS, "note",
               *(["latest window"] if windowed else []),
               *([] if detailed_all else ["details"])]
    details = ("" if detailed_all else
               f" Only {len(anchors)} of {len(groups)} groups have a section below: those "
               f"that changed since the previous run, fell back or have no thresholds, have a "
               f"coverage-limited, resolution-limited or infeasible point, are named by the "
               f"publish guard, or were selected (costlib report --groups); the column "
               f"\"details\" says why.")
    search = (f'<p class="search"><input id="group-search" type="search" '
              f'placeholder="search groups, statuses, notes" aria-label="search groups"> '
              f'<span id="group-count" class="note">{len(groups)} groups</span> '
              f'<span class="note">Click a column title to sort.</span></p>')
    return (f'<section id="overview"><h2>Groups</h2><p class="note">Thresholds of the decision '
            f"method ({_e(method)}); {_e(since)}; \"off\" = that classifier never fires."
            f"{_e(details)}</p>{search}{_table(headers, rows, css='overview')}"
            f"<script>{_OVERVIEW_SCRIPT}</script></section>")


#: Search and sort for the overview table: plain DOM code, inline, nothing fetched. Search
#: keeps the rows whose text contains every word typed (case-insensitive); a click on a column
#: title sorts by it (numbers by their ``data-sort`` value, then text; again: reversed).
_OVERVIEW_SCRIPT = """
(() => {
  const table = document.querySelector("table.overview");
  const input = document.getElementById("group-search");
  const count = document.getElementById("group-count");
  if (!table || !input) return;
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const texts = new Map(rows.map(r => [r, r.textContent.toLowerCase()]));
  const filter = () => {
    const words = input.value.toLowerCase().split(/\\s+/).filter(w => w);
    let shown = 0;
    for (const row of rows) {
      const text = texts.get(row);
      row.hidden = !words.every(w => text.includes(w));
      if (!row.hidden) shown += 1;
    }
    count.textContent = shown + " of " + rows.length + " groups";
  };
  input.addEventListener("input", filter);
  const key = (row, i) => {
    const cell = row.cells[i];
    const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    const number = raw === "" ? NaN : Number(raw);
    return Number.isNaN(number) ? [1, raw] : [0, number];
  };
  const compare = (a, b) => a[0] - b[0] || (a[0] === 0 ? a[1] - b[1] || 0
                                               : a[1].localeCompare(b[1]));
  Array.from(table.tHead.rows[0].cells).forEach((th, i) => {
    th.classList.add("sortable");
    th.addEventListener("click", () => {
      const order = th.dataset.order === "ascending" ? "descending" : "ascending";
      for (const other of table.tHead.rows[0].cells) delete other.dataset.order;
      th.dataset.order = order;
      const sign = order === "ascending" ? 1 : -1;
      const sorted = rows.map(r => [key(r, i), r])
        .sort((a, b) => sign * compare(a[0], b[0]))
        .map(pair => pair[1]);
      const fragment = document.createDocumentFragment();
      for (const row of sorted) fragment.appendChild(row);
      body.appendChild(fragment);
    });
  });
})();
"""


def _points_table(points: Sequence[Mapping[str, Any]], classifiers: Sequence[str]) -> str:
    """One row per method: thresholds, TP, FP, precision (with intervals).

    With audit data (any record with ``estimated_recall``) a last column shows the estimated
    recall ``TP / P̂`` with its interval and the Horvitz–Thompson total ``P̂``.
    """
    estimated = any(p.get("estimated_recall") is not None for p in points)
    rows = []
    for p in points:
        low, high = p["threshold_ci_low"], p["threshold_ci_high"]
        cells = [_e(p["method"])]
        for j in range(len(classifiers)):
            value = None if p["thresholds"] is None else p["thresholds"][j]
            interval = ("" if low is None or high is None
                        else _fmt_interval(low[j], high[j], _fmt_threshold))
            cells.append(_with_interval(_fmt_threshold(value), interval))
        cells += [
            _with_interval(_fmt_count(p["tp"]),
                           _fmt_interval(p["tp_ci_low"], p["tp_ci_high"], _fmt_count)),
            _with_interval(_fmt_count(p["fp"]),
                           _fmt_interval(p["fp_ci_low"], p["fp_ci_high"], _fmt_count)),
            _with_interval(_fmt_ratio(p["precision"]),
                           _fmt_interval(p["precision_ci_low"], p["precision_ci_high"],
                                         _fmt_ratio)),
            _e(f"{_fmt_ratio(p['marginal_precision_left'])} / "
               f"{_fmt_ratio(p['marginal_precision_right'])}"),
            *_coverage_cells(p),
        ]
        cells[-1] += _resolution_note(p)
        if estimated:
            cells.append(_estimated_recall_cell(p))
        rows.append(_row(cells, group=p["group"], method=p["method"]))
    headers = ["method", *(f"t[{c}]" for c in classifiers), "TP", "FP", "precision",
               "marginal precision in / out", *COVERAGE_HEADERS,
               *(["est. recall (audit)"] if estimated else [])]
    return _table(headers, rows, css="points")


def _estimated_recall_cell(point: Mapping[str, Any]) -> str:
    """``TP / P̂`` with its bootstrap interval and ``P̂`` (audit data only; HTML)."""
    recall = point.get("estimated_recall")
    if recall is None:
        return ""
    interval = _fmt_interval(point.get("estimated_recall_ci_low"),
                             point.get("estimated_recall_ci_high"), _fmt_ratio)
    total = _fmt_count(point.get("estimated_total_positives"))
    note = f'<div class="note">of P̂ {_e(total)}</div>'
    return _with_interval(_fmt_ratio(recall), interval) + note



def _interval_note(points: Sequence[Mapping[str, Any]], bootstrap: Mapping[str, Any]) -> str:
    """Says what the bracketed intervals are, or why there are none (HTML)."""
    if any(p["threshold_ci_low"] is not None for p in points):
        level = bootstrap.get("level")
        share = f"{level:.0%} " if level is not None else ""
        return (f'<p class="note">In brackets: {_e(share)}bootstrap intervals '
                f"({_e(bootstrap.get('replicates', '?'))} Poisson bootstrap replicates of the "
                f"rated rows).</p>")
    if not bootstrap.get("replicates"):
        return ('<p class="note">No bootstrap intervals: the run\'s bootstrap.replicates '
                "is 0.</p>")
    return '<p class="note">No bootstrap intervals for these points.</p>'


def _points_block(points: Sequence[Mapping[str, Any]], classifiers: Sequence[str],
                  bootstrap: Mapping[str, Any]) -> str:
    """The table of operating points with its interval note; nothing without thresholds."""
    if all(p["thresholds"] is None for p in points):
        return ""
    return _points_table(points, classifiers) + _interval_note(points, bootstrap)


def _changes_table(changes: Sequence[ThresholdChange], classifiers: Sequence[str],
                   methods: Sequence[str], previous: RunData | None) -> str:
    """One group's thresholds, previous run -> this run, one row per method (HTML)."""
    if previous is None:
        return '<p class="nochange">Change from the previous run: no previous run.</p>'
    by_key = {(c.method, c.classifier): c for c in changes}
    rows = []
    for method in methods:
        cells = [_td(_e(method))]
        for name in classifiers:
            c = by_key.get((method, name))
            if c is None:
                cells += [_td(""), _td("")]
                continue
            cells.append(_td(_e(f"{_fmt_threshold(c.old)} → {_fmt_threshold(c.new)}")))
            cells.append(_td(_e(_fmt_difference(c)), _change_css(c), classifier=name,
                             difference="" if c.difference is None else repr(c.difference)))
        rows.append(_tr(cells, group=changes[0].group if changes else "", method=method))
    headers = ["method"]
    for name in classifiers:
        headers += [f"t[{name}]: old → new", "difference"]
    return (f"<h4>Change from the previous run ({_e(previous.run_id)})</h4>"
            + _table(headers, rows, css="changes"))


def _window_label(point: Mapping[str, Any]) -> str:
    """``Applied window ... pane N`` for windowed records, else nothing."""
    if point["window_start"] is None:
        return ""
    start = f"{point['window_start']:%Y-%m-%d %H:%M}"
    end = f"{point['window_end']:%Y-%m-%d %H:%M}"
    if point.get("window_complete", True):
        return (f'<p class="window">Applied window {_e(start)} → {_e(end)} UTC, '
                f'pane {int(point["pane_index"])}.</p>')
    return (f'<p class="window">Latest window {_e(start)} → {_e(end)} UTC, pane '
            f'{int(point["pane_index"])}: partial, so costlib decide does not apply it; this '
            f"group gets the all-groups thresholds.</p>")


def _figures(run: RunData, points: Sequence[Mapping[str, Any]], drawer: GroupFigures,
             index: Mapping[tuple[Any, Any, Any], dict[str, Any]],
             changes: Sequence[ThresholdChange] = (),
             previous: RunData | None = None) -> str:
    """The PN curves and the threshold-space paths of one group (HTML); ``changes`` are the
    group's, for the previous run's thresholds of the decision method."""
    group = points[0]["group"]
    curves = [_curves_of(run, p, index) for p in points]
    pn = drawer.pn_uri(points, curves)
    if pn is None or drawer.last_view is None:
        return ""
    view = drawer.last_view
    parts = [_image(pn, f"PN curves of group {group}", "pn"),
             f'<p class="note pn-scale" data-n="{_e(repr(view.n))}" data-p="{_e(repr(view.p))}">'
             f"PN curves of {_e(group)} in shares of its rated rows: N = "
             f"{_e(_plural(view.n, 'rated negative'))}, P = "
             f"{_e(_plural(view.p, 'rated positive'))}, so a point at (x, y) flags FP = x · N "
             f"and TP = y · P. The right panel shows FP / N ≤ {view.zoom_x:g}. Methods that "
             "chose the same point are drawn on top of each other; the table above lists every "
             "method's point in counts.</p>"]
    k = len(run.classifiers)
    old = {c.classifier: c.old for c in changes if c.method == drawer.decision}
    before = [old.get(name) for name in run.classifiers] if old else None
    paths = drawer.path_uri(points, curves, before)
    if paths is not None:
        parts.append(_image(paths, f"paths in threshold space of group {group}", "paths"))
        axes = ("Axes: lattice index of each classifier's threshold (ticks show the threshold "
                "value; the last index is off)." if drawer.lattice is not None else
                "Axes: lattice index of each classifier's threshold (the run's lattice cannot "
                "be rebuilt: quantile edges, or edges added from thresholds in force of a run "
                "that is gone; so the ticks are indices).")
        marked = ""
        if drawer.lattice is not None and previous is not None:
            marked = (f" Black cross: the previous run's ({previous.run_id}) thresholds of "
                      f"{drawer.decision}, at their place in this run's lattice"
                      + ("." if before and None not in before else " (none for this group)."))
        parts.append(f'<p class="note">{_e(axes)} Lines: monotone paths (graph, analytic); '
                     f"dots: frontier cells (hull, bucket); big dots: chosen points; dashed "
                     f"boxes: bootstrap intervals of the thresholds.{_e(marked)}</p>")
    else:
        parts.append(f'<p class="note">The path in threshold space is drawn for k = 2 '
                     f"classifiers only; this run has k = {k}. The chosen thresholds are in the "
                     f"table above.</p>")
    return '<div class="figures">' + "".join(parts) + "</div>"


def _group_section(run: RunData, anchors: Mapping[str, str],
                   points: Sequence[Mapping[str, Any]], changes: Sequence[ThresholdChange],
                   previous: RunData | None, drawer: GroupFigures,
                   index: Mapping[tuple[Any, Any, Any], dict[str, Any]],
                   reasons: Sequence[str] = ()) -> str:
    """Everything about one group: status, points, intervals, figures, change (HTML).

    ``anchors`` holds the section ids of the groups that have a section; ``changes`` are this
    group's; ``reasons`` say why the group is shown in detail (large reports only).
    """
    first = points[0]
    group = first["group"]
    config = run.manifest.get("config", {})
    min_rated = config.get("min_rated", {})
    title = f"{group} (all groups)" if group == ALL_GROUPS else group
    why = (f'<p class="note">Shown in detail: {_e(", ".join(reasons))}.</p>' if reasons
           else "")
    return (
        f'<section class="group" id="{_e(anchors[group])}" data-group="{_e(group)}" '
        f'data-status="{_e(first["status"])}">'
        f"<h3>{_e(title)} {_status_badge(first['status'])}</h3>{why}"
        f"{_window_label(first)}<p>{_status_text(first, anchors, min_rated)}</p>"
        f"{_points_block(points, run.classifiers, config.get('bootstrap', {}))}"
        f"{_figures(run, points, drawer, index, changes, previous)}"
        f"{_changes_table(changes, run.classifiers, [p['method'] for p in points], previous)}"
        f"</section>"
    )


def _windows_section(records: Sequence[Mapping[str, Any]]) -> str:
    """Windowed runs: every window of the run, with its groups' statuses (HTML)."""
    windows: dict[tuple[Any, Any], dict[str, tuple[str, int]]] = {}
    for r in records:
        windows.setdefault((r["window_start"], r["window_end"]), {})[r["group"]] = (
            r["status"], int(r["pane_index"]))
    rows = []
    for (start, end), groups in sorted(windows.items()):
        statuses = [s for s, _ in groups.values()]
        summary = ", ".join(f"{statuses.count(s)} {s.replace('_', ' ')}"
                            for s in ("ok", "fallback", "kept", "insufficient_data")
                            if s in statuses)
        rows.append(_row([_e(f"{start:%Y-%m-%d %H:%M}"), _e(f"{end:%Y-%m-%d %H:%M}"),
                          _e(len(groups)), _e(summary),
                          _e(max(p for _, p in groups.values()))]))
    return ('<section id="windows"><h2>Windows</h2><p class="note">Each group below is shown at '
            "the window costlib decide applies (by default its latest complete window) and that "
            "window's newest pane.</p>"
            + _table(["start (UTC)", "end (UTC)", "groups", "statuses", "newest pane"], rows)
            + "</section>")


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1180px; padding: 1.5rem 2rem 4rem; color: #1d2126; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { font-size: 1.25rem; border-bottom: 2px solid #d8dde3; padding-bottom: .2rem;
     margin-top: 2.2rem; }
h3 { font-size: 1.15rem; margin: 0 0 .4rem; }
h4 { font-size: 1rem; margin: 1.2rem 0 .3rem; }
.subtitle { color: #5b6570; margin-top: 0; }
section.group { border: 1px solid #d8dde3; border-radius: 8px; padding: 1rem 1.2rem;
                margin: 1.4rem 0; background: #fff; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .9rem; }
th, td { border-bottom: 1px solid #e4e7eb; padding: .3rem .7rem; text-align: left;
         vertical-align: top; }
thead th { background: #f3f5f7; font-weight: 600; }
table.facts th { background: none; color: #5b6570; font-weight: 500; white-space: nowrap; }
table.points td, table.changes td, table.accounting td { font-variant-numeric: tabular-nums; }
.ci { color: #5b6570; font-size: .85em; white-space: nowrap; }
.badge { display: inline-block; font-size: .75rem; font-weight: 600; padding: .1rem .5rem;
         border-radius: 999px; vertical-align: middle; text-transform: uppercase;
         letter-spacing: .03em; }
.badge.ok { background: #dff3e4; color: #1e6b34; }
.badge.fallback { background: #fff1d6; color: #8a5a00; }
.badge.insufficient_data { background: #fde2e1; color: #9b1c1c; }
.badge.kept { background: #e8eefc; color: #1e3a8a; }
.badge.coverage_limited { background: #fff1d6; color: #8a5a00; }
.badge.infeasible { background: #fde2e1; color: #9b1c1c; }
.badge.resolution_limited { background: #fff1d6; color: #8a5a00; }
.note, .window { color: #5b6570; font-size: .85rem; }
.nochange { color: #5b6570; font-style: italic; }
td.moved { font-weight: 600; color: #8a3b00; }
.warn { background: #fff1d6; border-left: 4px solid #e0a100; padding: .4rem .9rem; }
.figures img { display: block; max-width: 100%; height: auto; margin: .6rem 0; }
.figures img.paths { max-width: 760px; }
table.overview th.sortable { cursor: pointer; user-select: none; }
table.overview th[data-order="ascending"]::after { content: " ▲"; }
table.overview th[data-order="descending"]::after { content: " ▼"; }
.search input { font: inherit; padding: .25rem .5rem; min-width: 22rem; }
a { color: #1f5fbf; }
"""


def _page(title: str, body: str) -> str:
    """The HTML document around ``body``, with the inline style sheet."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
            f"<body>{body}</body></html>\n")


def _status_counts(shown: Mapping[str, Mapping[str, Any]]) -> str:
    """``5 groups: 4 ok, 1 fallback`` (statuses of the records the overview shows)."""
    statuses = [p["status"] for p in shown.values()]
    parts = [f"{statuses.count(s)} {s.replace('_', ' ')}"
             for s in ("ok", "fallback", "kept", "insufficient_data") if s in statuses]
    return f"{len(shown)} groups: {', '.join(parts)}"


#: Up to this many groups every group gets its section; above it only the groups
#: :func:`detail_reasons` names (and those selected), the rest are rows of the overview.
MAX_DETAILED_GROUPS = 200

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


def _shown_points(points: Mapping[Key, Mapping[str, Any]], groups: Sequence[str],
                  method: str) -> dict[str, Mapping[str, Any]]:
    """Per group the record the overview shows: its decision-method record, else its first."""
    first: dict[str, Mapping[str, Any]] = {}
    for (group, _), point in points.items():
        first.setdefault(group, point)
    return {g: points.get((g, method)) or first[g] for g in groups}


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
    names = _group_order(g for g, _ in points)
    selected = list(dict.fromkeys(groups))
    unknown = [g for g in selected if g not in set(names)]
    if unknown:
        raise InputError(f"{run.run_dir}: no group {', '.join(map(repr, unknown))} in this run "
                         f"({len(names)} groups)")
    shown = _shown_points(points, names, method)
    detailed_all = all_details or len(names) <= MAX_DETAILED_GROUPS
    reasons = {} if detailed_all else detail_reasons(run, shown, changes, selected)
    detailed = names if detailed_all else [g for g in names if g in reasons]
    position = {g: i for i, g in enumerate(names)}
    anchors = {g: f"group-{position[g]}" for g in detailed}
    index = _curve_index(run)
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
        sections.append(_group_section(run, anchors, mine, changes_of.get(group, []),
                                       previous, drawer, index, reasons.get(group, ())))
    body = (
        f"<h1>Recalibration report</h1><p class=\"subtitle\">run {_e(run.run_id)} · "
        f"{_e(_status_counts(shown))} · {_e(', '.join(methods))}</p>"
        + _run_summary(run, previous)
        + _accounting_section(run.manifest)
        + capacity_section(run.manifest, run.records)
        + _overview_section(names, shown, changes, run.classifiers, previous, method,
                            anchors, reasons, detailed_all)
        + (_windows_section(run.records) if run.windowed else "")
        + "<h2>Per group</h2>" + "".join(sections)
    )
    return _page(f"costlib report — {run.run_id}", body)


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
    write_bytes_atomically(target, document.encode("utf-8"))
    return target
