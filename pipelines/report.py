"""A self-contained HTML report of one recalibration run (``costlib report --run DIR``).

The report is one HTML file: text, tables and matplotlib figures embedded as base64 PNG data
URIs, with no script, no external file and nothing fetched from the network. It shows

- the run: id, times, runner, inputs, rule, target, methods, publication status, and the row
  accounting of ``manifest.json`` (read = used + unrated + dead-lettered, by reason);
- an overview of every group: status, rated rows, the decision method's thresholds and their
  change since the previous run, and its point's flagged volume, coverage and point status
  (``ok`` / ``coverage_limited`` / ``infeasible``, with the reason);
- per group: the operating point of each method with its bootstrap intervals (when the run
  computed them), flagged volume, coverage and point status with its reason, the PN curves
  with the chosen points (from ``pn_curves.parquet``), the paths in threshold-index space
  (k = 2), the fallback or insufficient-data status, and every threshold's change from the
  previous run (old -> new and the difference).

The *previous run* is the newest other complete run (one with ``manifest.json``) of the same
command under the same ``OUTPUT/runs/`` whose ``finished_utc`` is earlier than this run's;
published or not (a run held by the publish guard is complete too).

Windowed runs: each group is shown at the window ``costlib decide`` applies
(:func:`applied_points`: by default its latest *complete* window, see
:mod:`costlib_pipelines.decide`) and that window's newest pane; a table lists every window of
the run. The change from the previous run compares those thresholds.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from apache_beam.io.filesystems import FileSystems
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from costlib.target import Target
from costlib.threshold_plots import _COLORS as METHOD_COLORS
from costlib.threshold_plots import CurveSpec, draw_pn_curves
from costlib_pipelines.files import InputError, write_bytes_atomically
from costlib_pipelines.runs import load_operating_points, read_manifest, read_records

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
#: Resolution of the embedded figures (pixels per inch of the matplotlib figure size).
DPI = 80
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
    event-time range the run read (:func:`costlib_pipelines.decide.uncovered_share`); each group is
    shown at its latest such window and that window's newest pane. A group with no complete
    window is shown at its latest window with ``window_complete`` False: ``decide`` gives it
    the all-groups thresholds instead. Without a recorded range every window counts.
    """
    from costlib_pipelines.decide import uncovered_share

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
    """Threshold value at every lattice index per classifier, when the edges are fixed."""
    from costlib_pipelines.config import ConfigError, RunConfig

    try:
        edges = RunConfig.from_dict(manifest.get("config", {}), source="manifest").fixed_edges()
    except (ConfigError, KeyError, TypeError, ValueError):
        return None
    return None if edges is None else [np.append(e, np.inf) for e in edges]


# --------------------------------------------------------------------------- figures


def figure_data_uri(fig: Figure) -> str:
    """A matplotlib figure as a ``data:image/png;base64,...`` URI."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight",
                metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _curves_of(run: RunData, point: Mapping[str, Any]) -> dict[str, Any] | None:
    """The PN curve record a point was chosen on (same group, method and window)."""
    for curve in run.curves:
        if (curve["group"], curve["method"], curve["window_start"]) == (
            point["group"], point["method"], point["window_start"]
        ):
            return curve
    return None


def pn_figure(points: Sequence[Mapping[str, Any]], curves: Sequence[Mapping[str, Any]],
              title: str) -> Figure | None:
    """PN curves of each method with its chosen point (None when no method has a curve).

    ``points`` and ``curves`` are the records of one group (and window), in the same order.
    """
    specs = []
    target = None
    for point, curve in zip(points, curves, strict=True):
        if curve is None or point["thresholds"] is None:
            continue
        target = Target.from_marginal_precision(point["target_marginal_precision"])
        specs.append(CurveSpec(
            label=point["method"], method=point["method"], kind=curve["curve_kind"],
            curve_fp=np.asarray(curve["fp"], dtype=float),
            curve_tp=np.asarray(curve["tp"], dtype=float),
            fp=point["fp"], tp=point["tp"], thresholds=tuple(point["thresholds"]),
            objective=point["tp"] - target.slope * point["fp"],
        ))
    if not specs or target is None:
        return None
    return draw_pn_curves(specs, target, title=title)


def _index_of(value: float, axis: np.ndarray) -> float:
    """Fractional lattice index of a threshold value on one axis (``+inf`` = off)."""
    if math.isinf(value):
        return float(len(axis) - 1)
    finite = axis[:-1]
    return float(np.interp(value, finite, np.arange(len(finite))))


def _threshold_ticks(ax: Axes, axis: np.ndarray, which: str) -> None:
    """About six ticks on one axis, labelled with threshold values (last: off)."""
    positions = np.unique(np.linspace(0, len(axis) - 1, 6).round().astype(int))
    labels = ["off" if math.isinf(axis[i]) else f"{axis[i]:.2f}" for i in positions]
    getattr(ax, f"set_{which}ticks")(positions, labels)


def path_figure(points: Sequence[Mapping[str, Any]], curves: Sequence[Mapping[str, Any]],
                classifiers: Sequence[str],
                lattice: Sequence[np.ndarray] | None) -> Figure | None:
    """Each method's path (or frontier cells) and chosen point in threshold-index space.

    Only for k = 2 (returns None otherwise, or when no method has a curve). Paths of ``graph``
    and ``analytic`` are drawn as lines, the frontier cells of ``hull`` and ``bucket`` as dots.
    With fixed edges (``lattice``) the ticks show threshold values and the bootstrap interval
    of the thresholds is drawn as a dashed box around the chosen point.
    """
    if len(classifiers) != 2:
        return None
    drawn = [(p, c) for p, c in zip(points, curves, strict=True) if c is not None]
    if not drawn:
        return None
    fig = Figure(figsize=(9.5, 5.4), layout="constrained")
    ax = fig.add_subplot()
    for rank, (point, curve) in enumerate(drawn):
        cells = np.asarray(curve["path"], dtype=int).reshape(-1, 2)
        chosen = cells[curve["chosen_position"]]
        color = METHOD_COLORS.get(point["method"])
        if curve["curve_kind"] == "path":
            ax.plot(cells[:, 0], cells[:, 1], "-", color=color, lw=1.6, alpha=0.85,
                    label=f"{point['method']} path")
        else:
            ax.plot(cells[:, 0], cells[:, 1], "o", color=color, ms=4, alpha=0.7, mew=0,
                    label=f"{point['method']} frontier cells")
        # Methods often choose the same cell: later markers are smaller, so all stay visible.
        ax.plot(chosen[0], chosen[1], "o", color=color, ms=15 - 3 * min(rank, 3), mec="black",
                zorder=3 + rank,
                label=f"{point['method']} chosen ({_fmt_thresholds(point['thresholds'])})")
        if lattice is not None and point["threshold_ci_low"] is not None:
            low = [_index_of(v, a) for v, a in zip(point["threshold_ci_low"], lattice,
                                                     strict=True)]
            high = [_index_of(v, a) for v, a in zip(point["threshold_ci_high"], lattice,
                                                      strict=True)]
            ax.add_patch(_ci_box(low, high, color))
    if lattice is not None:
        ax.set_xlim(-0.5, len(lattice[0]) - 0.5)
        ax.set_ylim(-0.5, len(lattice[1]) - 0.5)
        _threshold_ticks(ax, lattice[0], "x")
        _threshold_ticks(ax, lattice[1], "y")
    ax.set_xlabel(f"threshold of {classifiers[0]}")
    ax.set_ylabel(f"threshold of {classifiers[1]}")
    ax.set_title("Paths in threshold space (lattice indices)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    return fig


def _ci_box(low: Sequence[float], high: Sequence[float], color: str | None) -> Rectangle:
    """A dashed rectangle from the lower to the upper interval corner (index space)."""
    pad = 0.15  # a zero-width interval still shows as a small box
    return Rectangle((low[0] - pad, low[1] - pad), high[0] - low[0] + 2 * pad,
                     high[1] - low[1] + 2 * pad, fill=False, ls="--", lw=1, ec=color,
                     alpha=0.8)


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


def _anchor(groups: Sequence[str], group: str) -> str:
    """The element id of a group's section."""
    return f"group-{groups.index(group)}"


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


def _overview_section(groups: Sequence[str], points: Mapping[Key, Mapping[str, Any]],
                      changes: Sequence[ThresholdChange], method: str,
                      classifiers: Sequence[str], previous: RunData | None) -> str:
    """One row per group: status, rated rows, the decision method's thresholds and change."""
    by_key = {(c.group, c.method, c.classifier): c for c in changes}
    windowed = any(p["window_start"] is not None for p in points.values())
    rows = []
    for group in groups:
        point = points.get((group, method)) or next(
            p for (g, _), p in points.items() if g == group)
        link = f'<a href="#{_e(_anchor(groups, group))}">{_e(group)}</a>'
        cells = [_td(link), _td(_status_badge(point["status"])),
                 _td(_e(_fmt_count(point["rated_positives"]))),
                 _td(_e(_fmt_count(point["rated_negatives"])))]
        for j, name in enumerate(classifiers):
            value = None if point["thresholds"] is None else point["thresholds"][j]
            change = by_key.get((group, point["method"], name))
            delta = ("" if change is None
                     else f' <span class="ci">Δ {_e(_fmt_difference(change))}</span>')
            cells.append(_td(_e(_fmt_threshold(value)) + delta, _change_css(change)))
        cells += [_td(c) for c in _coverage_cells(point)]
        source = point["fallback_group"] if point["status"] == "fallback" else ""
        cells.append(_td(_e(f"thresholds of {source}" if source else "")))
        if windowed:
            start, end = point["window_start"], point["window_end"]
            cells.append(_td(_e(f"{start:%Y-%m-%d} → {end:%Y-%m-%d}")))
        rows.append(_tr(cells, group=group))
    since = ("Δ = change since the previous run " + previous.run_id if previous is not None
             else "no previous run to compare with")
    headers = ["group", "status", "rated +", "rated −",
               *(f"t[{c}]" for c in classifiers), *COVERAGE_HEADERS, "note",
               *(["latest window"] if windowed else [])]
    return (f'<section id="overview"><h2>Groups</h2><p class="note">Thresholds of the decision '
            f"method ({_e(method)}); {_e(since)}; \"off\" = that classifier never fires.</p>"
            f"{_table(headers, rows)}</section>")


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


def _figures(run: RunData, points: Sequence[Mapping[str, Any]],
             lattice: Sequence[np.ndarray] | None) -> str:
    """The PN curves and the threshold-space paths of one group (HTML)."""
    group = points[0]["group"]
    curves = [_curves_of(run, p) for p in points]
    # "$" would start matplotlib mathtext in a group name.
    pn = pn_figure(points, curves, title=f"PN curves — {group}".replace("$", r"\$"))
    if pn is None:
        return ""
    parts = [_image(figure_data_uri(pn), f"PN curves of group {group}", "pn"),
             '<p class="note">Methods that chose the same point are drawn on top of each other; '
             "the table above lists every method's point.</p>"]
    k = len(run.classifiers)
    paths = path_figure(points, curves, run.classifiers, lattice)
    if paths is not None:
        parts.append(_image(figure_data_uri(paths), f"paths in threshold space of group {group}",
                            "paths"))
        axes = ("Axes: lattice index of each classifier's threshold (ticks show the threshold "
                "value; the last index is off)." if lattice is not None else
                "Axes: lattice index of each classifier's threshold (quantile edges are not "
                "stored with the run, so the ticks are indices).")
        parts.append(f'<p class="note">{_e(axes)} Lines: monotone paths (graph, analytic); '
                     f"dots: frontier cells (hull, bucket); big dots: chosen points; dashed "
                     f"boxes: bootstrap intervals of the thresholds.</p>")
    else:
        parts.append(f'<p class="note">The path in threshold space is drawn for k = 2 '
                     f"classifiers only; this run has k = {k}. The chosen thresholds are in the "
                     f"table above.</p>")
    return '<div class="figures">' + "".join(parts) + "</div>"


def _group_section(run: RunData, groups: Sequence[str], points: Sequence[Mapping[str, Any]],
                   changes: Sequence[ThresholdChange], previous: RunData | None,
                   lattice: Sequence[np.ndarray] | None) -> str:
    """Everything about one group: status, points, intervals, figures, change (HTML)."""
    first = points[0]
    group = first["group"]
    anchors = {g: _anchor(groups, g) for g in groups}
    config = run.manifest.get("config", {})
    min_rated = config.get("min_rated", {})
    title = f"{group} (all groups)" if group == ALL_GROUPS else group
    mine = [c for c in changes if c.group == group]
    return (
        f'<section class="group" id="{_e(anchors[group])}" data-group="{_e(group)}" '
        f'data-status="{_e(first["status"])}">'
        f"<h3>{_e(title)} {_status_badge(first['status'])}</h3>"
        f"{_window_label(first)}<p>{_status_text(first, anchors, min_rated)}</p>"
        f"{_points_block(points, run.classifiers, config.get('bootstrap', {}))}"
        f"{_figures(run, points, lattice)}"
        f"{_changes_table(mine, run.classifiers, [p['method'] for p in points], previous)}"
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
                            for s in ("ok", "fallback", "insufficient_data") if s in statuses)
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
.badge.coverage_limited { background: #fff1d6; color: #8a5a00; }
.badge.infeasible { background: #fde2e1; color: #9b1c1c; }
.note, .window { color: #5b6570; font-size: .85rem; }
.nochange { color: #5b6570; font-style: italic; }
td.moved { font-weight: 600; color: #8a3b00; }
.warn { background: #fff1d6; border-left: 4px solid #e0a100; padding: .4rem .9rem; }
.figures img { display: block; max-width: 100%; height: auto; margin: .6rem 0; }
.figures img.paths { max-width: 760px; }
a { color: #1f5fbf; }
"""


def _page(title: str, body: str) -> str:
    """The HTML document around ``body``, with the inline style sheet."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
            f"<body>{body}</body></html>\n")


def _status_counts(points: Mapping[Key, Mapping[str, Any]], groups: Sequence[str],
                   method: str) -> str:
    """``5 groups: 4 ok, 1 fallback`` (statuses of the decision method's records)."""
    statuses = [next(p["status"] for (g, m), p in points.items() if g == group
                     and (m == method or (group, method) not in points)) for group in groups]
    parts = [f"{statuses.count(s)} {s.replace('_', ' ')}"
             for s in ("ok", "fallback", "insufficient_data") if s in statuses]
    return f"{len(groups)} groups: {', '.join(parts)}"


def build_report(run: RunData, previous: RunData | None) -> str:
    """The whole report of ``run`` (compared with ``previous``) as one HTML string."""
    points = applied_points(run)
    old = applied_points(previous) if previous is not None else {}
    changes = threshold_changes(old, points, run.classifiers) if previous is not None else []
    config = run.manifest.get("config", {})
    methods = list(config.get("methods") or sorted({m for _, m in points}))
    method = config.get("decision_method") or methods[0]
    groups = _group_order(g for g, _ in points)
    lattice = _lattice_thresholds(run.manifest)
    order = {m: i for i, m in enumerate(methods)}
    sections = []
    for group in groups:
        mine = sorted((p for (g, _), p in points.items() if g == group),
                      key=lambda p: (order.get(p["method"], len(order)), p["method"]))
        sections.append(_group_section(run, groups, mine, changes, previous, lattice))
    body = (
        f"<h1>Recalibration report</h1><p class=\"subtitle\">run {_e(run.run_id)} · "
        f"{_e(_status_counts(points, groups, method))} · {_e(', '.join(methods))}</p>"
        + _run_summary(run, previous)
        + _accounting_section(run.manifest)
        + _overview_section(groups, points, changes, method, run.classifiers, previous)
        + (_windows_section(run.records) if run.windowed else "")
        + "<h2>Per group</h2>" + "".join(sections)
    )
    return _page(f"costlib report — {run.run_id}", body)


def write_report(run_path: str, out: str | None = None) -> str:
    """Write the report of the run at ``run_path``; returns the path written.

    Parameters
    ----------
    run_path : str
        A run directory, or a recalibrate output directory (its ``LATEST`` run).
    out : str, optional
        Where to write; by default ``report.html`` inside the run directory.

    Raises
    ------
    InputError
        See :func:`load_run`.
    """
    run = load_run(run_path)
    document = build_report(run, previous_run(run))
    target = out or f"{run.run_dir}/report.html"
    write_bytes_atomically(target, document.encode("utf-8"))
    return target
