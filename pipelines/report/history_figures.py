"""The small multiples of a history page: per group one figure of four panels (thresholds per
classifier, flagged volume, precision among rated rows, estimated recall), drawn by blitting.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator

from costlib.thresholds.plots import METHOD_COLORS
from costlib_pipelines.report.figures import _Blitter
from costlib_pipelines.report.history_data import NOT_OK, POINT_NOT_OK, HistoryRun

__all__ = ["HistoryFigures", "nice_count_ceiling", "threshold_range"]


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

        n = len(runs)
        self.classifiers = list(classifiers)
        # as wide as the page's column at figures.DPI (shown unscaled: 8-point text, 11 px)
        self.figure = Figure(figsize=(11.0, 2.75))
        self.figure.subplots_adjust(left=0.055, right=0.985, bottom=0.24, top=0.8, wspace=0.3)
        axes: list[Axes] = list(self.figure.subplots(1, 4, sharex=True))
        self.axes = axes
        low, high = threshold_range
        span = max(high - low, 1e-6)
        self.off_level = high + 0.12 * span
        titles = ("thresholds (decision method)", "flagged volume",
                  "precision among rated rows", "estimated recall (audit)")
        colours = list(METHOD_COLORS.values()) or ["C0", "C1", "C2", "C3"]
        for ax, title in zip(axes, titles, strict=True):
            ax.set_title(title, fontsize=9)
            ax.set_xlim(-0.5, n - 0.5)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=8)
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
        self.proposed_marks: list[Line2D] = []
        for j, name in enumerate(self.classifiers):
            colour = colours[j % len(colours)]
            (line,) = axes[0].plot([], [], "-", marker=marker, ms=ms, lw=1.2, color=colour,
                                   label=name)
            (off,) = axes[0].plot([], [], "^", ms=4, color=colour, label="_off")
            (proposed,) = axes[0].plot([], [], "o", ms=5, mfc="none", mew=1.0, color=colour,
                                       label="_proposed")
            self.threshold_lines.append(line)
            self.off_marks.append(off)
            self.proposed_marks.append(proposed)
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
                   Line2D([], [], ls="", marker="o", ms=5, mfc="none", color="gray",
                          label="method's point pending evidence"),
                   self.not_ok,
                   Line2D([], [], ls="", marker="v", ms=5, color="#b00000",
                          label="point coverage-limited / infeasible"),
                   Line2D([], [], ls="--", lw=0.7, color="gray", label="bootstrap interval"),
                   Patch(color="#f4b6b0", alpha=0.5, label="run held by the guard")]
        self.figure.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=7,
                           frameon=False, bbox_to_anchor=(0.5, 1.0))
        artists: list[tuple[Axes, Artist]] = [
            (axes[0], a) for a in (*self.threshold_lines, *self.off_marks,
                                   *self.proposed_marks, self.not_ok)]
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
        thresholds = _threshold_matrix(points, "thresholds", k)
        proposed = _threshold_matrix(points, "proposed_thresholds", k)
        proposed[np.isposinf(proposed)] = self.off_level
        for j in range(k):
            shown = np.isfinite(proposed[:, j])
            self.proposed_marks[j].set_data(x[shown], proposed[shown, j])
            column = thresholds[:, j]
            finite = np.where(np.isinf(column), np.nan, column)
            self.threshold_lines[j].set_data(x, finite)
            off = np.isposinf(column)
            self.off_marks[j].set_data(x[off], np.full(off.sum(), self.off_level))
        y0 = self.axes[0].get_ylim()[0]
        bad = np.array([p is not None and p.get("status") in NOT_OK for p in points])
        self.not_ok.set_data(x[bad], np.full(bad.sum(), y0))
        volume = _values(points, "volume")
        self.volume.set_data(x, volume)
        top = nice_count_ceiling(float(np.nanmax(volume)) * 1.05
                                 if np.isfinite(volume).any() else 0.0)
        self.precision.set_data(x, _values(points, "precision"))
        self.precision_low.set_data(x, _values(points, "precision_ci_low"))
        self.precision_high.set_data(x, _values(points, "precision_ci_high"))
        limited = np.array([p is not None and p.get("point_status") in POINT_NOT_OK
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


def _threshold_matrix(points: Sequence[Mapping[str, Any] | None], field: str, k: int
                      ) -> np.ndarray:
    """Run x classifier matrix of a thresholds field (NaN where a run has none)."""
    matrix = np.full((len(points), k), np.nan)
    for i, p in enumerate(points):
        values = None if p is None else p.get(field)
        if values is not None and len(values) == k:
            matrix[i] = values
    return matrix


def threshold_range(runs: Sequence[HistoryRun], groups: Iterable[str]) -> tuple[float, float]:
    """Smallest and largest finite threshold of ``groups`` over the runs, published or
    proposed ((0, 1) for none)."""
    values = [t for run in runs for g in groups if g in run.points
              for field in ("thresholds", "proposed_thresholds")
              for t in run.points[g].get(field) or () if not math.isinf(t)]
    return (min(values), max(values)) if values else (0.0, 1.0)

