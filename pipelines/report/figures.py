"""The two figures of a group section of ``costlib report``, drawn by blitting.

Creating a figure and drawing its axes, ticks, labels and legend costs far more than drawing a
few lines (about 0.17 s against a few milliseconds per figure at :data:`DPI`, almost all of it
text layout). The report draws the same two plots for every group, so each plot is one
matplotlib figure made once per report whose axes do not depend on the group:

- the PN curves are drawn in shares of the group's rated rows, ``x = FP / N`` (rated negatives)
  and ``y = TP / P`` (rated positives), so the left panel always spans ``[0, 1]``; the right
  panel zooms to a limit from a short ladder (:func:`nice_ceiling`), so few distinct views
  occur; the report writes each group's ``N`` and ``P`` next to the figure;
- the paths live in lattice-index space, whose extent is the same for every group of a run.

Every view's static part (axes, ticks, labels, grid, legend) is drawn once and kept as a
background (``canvas.copy_from_bbox``); per group the background is restored and only the
group's artists (curves, chosen points, target line, intervals) are drawn on it with
``Axes.draw_artist``: matplotlib's blitting technique. The figure is then stored as a palette
PNG (:func:`png_data_uri`).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from costlib.thresholds.plots import METHOD_COLORS
from costlib.thresholds.point import Target

__all__ = ["COLOURS", "DPI", "PATH_SIZE", "PN_SIZE", "GroupFigures", "PNView", "nice_ceiling",
           "png_data_uri"]

#: Resolution of the embedded figures (pixels per inch of the matplotlib figure size).
DPI = 100
#: Colours of the palette the embedded PNG figures are stored with.
COLOURS = 32
#: Fixed axes positions of the PN-curve figure (two panels, shared legend on top) and of the
#: path figure (legend right of the axes); no layout engine.
PN_MARGINS = {"left": 0.075, "right": 0.975, "bottom": 0.14, "top": 0.82, "wspace": 0.16}
PATH_MARGINS = {"left": 0.1, "right": 0.6, "bottom": 0.11, "top": 0.93}
#: Figure sizes in inches: whole pixels at :data:`DPI`, the PN figure as wide as the page's
#: column and the path figure as wide as the page shows it (``report.css``: 760 px), so that
#: neither is scaled down and their 8-point text stays 11 pixels high.
PN_SIZE = (10.0, 3.9)
PATH_SIZE = (7.6, 4.4)
#: Mantissas of the zoom panel's x limits: 0.001, 0.002, 0.005, 0.01, ..., 0.5, 1.
LADDER = (1.0, 2.0, 5.0)


def png_data_uri(rgba: Any, size: tuple[int, int]) -> str:
    """An RGBA buffer as a ``data:image/png;base64,...`` URI of a palette PNG.

    At most :data:`COLOURS` colours, no dithering: plots are flat colours and antialiased
    edges, so this keeps them sharp at about a third of the bytes of a true-colour PNG.
    """
    from PIL import Image

    image = Image.frombuffer("RGBA", size, rgba)
    palette = image.convert("RGB").quantize(colors=COLOURS, method=Image.Quantize.FASTOCTREE,
                                            dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    palette.save(buffer, format="PNG", compress_level=6)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def nice_ceiling(value: float, ladder: Sequence[float] = LADDER) -> float:
    """The smallest ``m * 10**e`` (``m`` in ``ladder``) at least ``value``, at most 1.

    ``value`` must be positive; e.g. 0.031 -> 0.05, 0.2 -> 0.2, 0.7 -> 1.0.
    """
    if value >= 1:
        return 1.0
    exponent = math.floor(math.log10(value))
    for e in (exponent - 1, exponent, exponent + 1):  # log10 may be off by one near powers
        for m in ladder:
            candidate = float(f"{m:g}e{e}")  # the double nearest the decimal m * 10**e
            if candidate >= value:
                return min(candidate, 1.0)
    return 1.0


def ceil_step(value: float, step: float = 0.2) -> float:
    """``value`` rounded up to a multiple of ``step`` (at least ``step``)."""
    return max(math.ceil(round(value / step, 9)) * step, step)


class _Blitter:
    """One figure drawn as cached backgrounds plus per-group artists (blitting).

    ``artists`` are marked animated, so the figure's own draw skips them. ``variable`` are the
    axes whose limits depend on the view: the rest of the figure is drawn once (with those
    axes hidden) as the *base*; each new view draws only those axes on a copy of the base and
    keeps the result as that view's background. :meth:`render` sets a view's limits,
    restores its background and draws the artists on it in z-order.
    """

    def __init__(self, figure: Figure, artists: Sequence[tuple[Axes, Artist]],
                 variable: Sequence[Axes] = ()):
        self.figure = figure
        self.canvas = FigureCanvasAgg(figure)
        figure.set_dpi(DPI)
        self.artists = list(artists)
        for _, artist in self.artists:
            artist.set_animated(True)
        self.variable = list(variable)
        self.base: Any = None
        self.backgrounds: dict[Hashable, Any] = {}

    def _background(self, view: Hashable) -> Any:
        """The figure without the artists at ``view`` (limits already applied), cached."""
        if view in self.backgrounds:
            return self.backgrounds[view]
        if self.base is None:
            for ax in self.variable:
                ax.set_visible(False)
            self.canvas.draw()
            for ax in self.variable:
                ax.set_visible(True)
            self.base = self.canvas.copy_from_bbox(self.figure.bbox)
        self.canvas.restore_region(self.base)
        renderer = self.canvas.get_renderer()
        for ax in self.variable:
            ax.draw(renderer)
        self.backgrounds[view] = self.canvas.copy_from_bbox(self.figure.bbox)
        return self.backgrounds[view]

    def render(self, view: Hashable, apply_view: Callable[[], None]) -> str:
        """The figure with the current artist data at ``view`` as a PNG data URI."""
        apply_view()  # limits first: the background and the artists' transforms use them
        self.canvas.restore_region(self._background(view))
        for ax, artist in sorted(self.artists, key=lambda pair: pair[1].get_zorder()):
            if artist.get_visible():
                ax.draw_artist(artist)
        return png_data_uri(self.canvas.buffer_rgba(), self.canvas.get_width_height())

    @property
    def views(self) -> int:
        """How many backgrounds were drawn so far."""
        return len(self.backgrounds)


@dataclass(frozen=True)
class PNView:
    """Where one group's PN figure is drawn: its rated negatives ``n`` and positives ``p``
    (the divisors of FP and TP) and the zoom panel's limits ``zoom_x`` / ``zoom_y`` (shares).
    """

    n: float
    p: float
    zoom_x: float
    zoom_y: float

    @property
    def key(self) -> tuple[float, float]:
        """What the background depends on."""
        return (self.zoom_x, self.zoom_y)


class GroupFigures:
    """The two figures of a group section, made once per report and blitted per group.

    PN curves (two panels, like :func:`costlib.thresholds.plots._plots.draw_pn_curves` but in shares
    ``FP / N`` and ``TP / P`` of the group's rated negatives ``N`` and positives ``P``): every
    method's curve with its chosen point, and the target line ``TP - slope * FP = const``
    through the best chosen point (in shares its slope is ``slope * N / P``); the right panel
    zooms to ``FP / N <= nice_ceiling(max(4 x the largest chosen FP, 1) / N)``. Paths (k = 2
    only): every method's path (graph, analytic) or frontier cells (hull, bucket) in
    lattice-index space, its chosen cell, and with fixed edges the bootstrap box of its
    thresholds; the axes span the lattice (fixed edges) or ``extent``, the largest index of
    any curve of the run (quantile edges). ``estimated``: the run has audit data, so ``P`` is
    the estimate ``P̂`` and the y axis, ``TP / P̂``, is labelled the estimated recall; without,
    it says that ``TP / P`` (rated positives only) is not recall.
    """

    def __init__(self, methods: Sequence[str], kinds: Mapping[str, str],
                 classifiers: Sequence[str], lattice: Sequence[np.ndarray] | None,
                 extent: Sequence[int] | None = None, decision: str | None = None,
                 estimated: bool = False):
        self.methods = list(methods)
        self.decision = decision
        self.lattice = lattice
        self.extent = extent
        self.last_view: PNView | None = None
        self.pn = Figure(figsize=PN_SIZE)
        self.pn.subplots_adjust(**PN_MARGINS)
        self.pn_axes = self.pn.subplots(1, 2)
        self.curve_lines: dict[tuple[int, str], Line2D] = {}
        self.point_lines: dict[tuple[int, str], Line2D] = {}
        self.target_lines: list[Line2D] = []
        for panel, ax in enumerate(self.pn_axes):
            for method in self.methods:
                kind = kinds.get(method, "path")
                color = METHOD_COLORS.get(method)
                (self.curve_lines[panel, method],) = ax.plot(
                    [], [], "-" if kind == "path" else "--", color=color, lw=1.3,
                    label=f"{method} {kind}")
                (self.point_lines[panel, method],) = ax.plot(
                    [], [], "o", color=color, ms=8, mec="black", label="_chosen")
            (line,) = ax.plot([], [], color="gray", lw=0.8, label="target slope")
            self.target_lines.append(line)
            ax.set_xlabel("FP / N (share of rated negatives)")
            ax.xaxis.set_major_locator(MaxNLocator(5))  # fewer labels: text is the cost
            ax.yaxis.set_major_locator(MaxNLocator(5))
            ax.grid(alpha=0.3)
        # One y label: both panels show the same quantity, and the zoom panel is redrawn per view.
        # With audit data P is the estimate P̂ and TP / P̂ the estimated recall; without, P
        # holds rated positives only and TP / P is not recall: say which on the axis.
        self.pn_axes[0].set_ylabel(r"TP / $\hat{P}$ = estimated recall" if estimated
                                   else "TP / P (rated positives; not recall)", fontsize=9)
        self.pn_axes[0].set_xlim(0, 1.02)
        self.pn_axes[0].set_ylim(0, 1.05)
        self.pn_axes[0].set_title("all rated rows", fontsize=10)
        self.pn_axes[1].set_title("zoom around the chosen points", fontsize=10)
        handles: list[Artist] = [Line2D([], [], ls=self.curve_lines[1, m].get_linestyle(),
                                        color=self.curve_lines[1, m].get_color(),
                                        label=self.curve_lines[1, m].get_label())
                                 for m in self.methods]
        handles.append(Line2D([], [], color="gray", lw=0.8, label="target slope"))
        handles.append(Line2D([], [], ls="", marker="o", color="white", mec="black", ms=8,
                              label="chosen points"))
        # Above the panels: per-group lines never cross it (they are drawn after it).
        self.pn.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=8,
                       frameon=False, bbox_to_anchor=(0.5, 1.0))
        self.pn_blit = _Blitter(self.pn, [
            (self.pn_axes[panel], artist)
            for panel in (0, 1)
            for artist in ([self.curve_lines[panel, m] for m in self.methods]
                           + [self.point_lines[panel, m] for m in self.methods]
                           + [self.target_lines[panel]])], variable=[self.pn_axes[1]])
        self.paths: Figure | None = None
        if len(classifiers) == 2:
            self._make_paths(kinds, classifiers)

    def _make_paths(self, kinds: Mapping[str, str], classifiers: Sequence[str]) -> None:
        self.paths = Figure(figsize=PATH_SIZE)
        self.paths.subplots_adjust(**PATH_MARGINS)
        ax = self.path_ax = self.paths.add_subplot()
        self.path_lines: dict[str, Line2D] = {}
        self.chosen_lines: dict[str, Line2D] = {}
        self.boxes: dict[str, Rectangle] = {}
        for method in self.methods:
            color = METHOD_COLORS.get(method)
            if kinds.get(method, "path") == "path":
                (line,) = ax.plot([], [], "-", color=color, lw=1.6, alpha=0.85,
                                  label=f"{method} path")
            else:
                (line,) = ax.plot([], [], "o", color=color, ms=4, alpha=0.7, mew=0,
                                  label=f"{method} frontier cells")
            self.path_lines[method] = line
            (self.chosen_lines[method],) = ax.plot([], [], "o", color=color, ms=15,
                                                   mec="black", label="_chosen")
            self.boxes[method] = ci_box([0, 0], [0, 0], color)
            ax.add_patch(self.boxes[method])
        # The decision method's thresholds of the previous run, in this run's lattice.
        (self.previous_marker,) = ax.plot([], [], "X", color="black", ms=9, mew=0, zorder=10,
                                          label=f"previous run ({self.decision})")
        ax.set_xlabel(f"threshold of {classifiers[0]}")
        ax.set_ylabel(f"threshold of {classifiers[1]}")
        ax.set_title("Paths in threshold space (lattice indices)")
        ax.grid(alpha=0.3)
        if self.lattice is not None:
            ax.set_xlim(-0.5, len(self.lattice[0]) - 0.5)
            ax.set_ylim(-0.5, len(self.lattice[1]) - 0.5)
            threshold_ticks(ax, self.lattice[0], "x")
            threshold_ticks(ax, self.lattice[1], "y")
        else:
            extent = self.extent or (1, 1)
            ax.set_xlim(-0.5, extent[0] + 0.5)
            ax.set_ylim(-0.5, extent[1] + 0.5)
            ax.xaxis.set_major_locator(MaxNLocator(8, integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(8, integer=True))
        handles: list[Artist] = [Line2D([], [], ls=line.get_linestyle(),
                                        marker=line.get_marker(), ms=line.get_markersize(),
                                        color=line.get_color(), alpha=line.get_alpha(),
                                        mew=line.get_markeredgewidth(), label=line.get_label())
                                 for line in self.path_lines.values()]
        handles.append(Line2D([], [], ls="", marker="o", color="white", mec="black", ms=10,
                              label="chosen points"))
        if self.lattice is not None:
            handles.append(Rectangle((0, 0), 1, 1, fill=False, ls="--", ec="gray",
                                     label="bootstrap interval"))
            if self.decision is not None:
                handles.append(Line2D([], [], ls="", marker="X", color="black", ms=9, mew=0,
                                      label=self.previous_marker.get_label()))
        ax.legend(handles=handles, fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5),
                  frameon=False)
        self.path_blit = _Blitter(self.paths, [
            (ax, artist) for method in self.methods
            for artist in (self.path_lines[method], self.chosen_lines[method],
                           self.boxes[method])] + [(ax, self.previous_marker)])

    def pn_uri(self, points: Sequence[Mapping[str, Any]],
               curves: Sequence[Mapping[str, Any] | None]) -> str | None:
        """The PN figure of one group's points and curves (None when no method has both).

        :attr:`last_view` holds the group's ``N``, ``P`` and zoom limits afterwards.
        """
        drawn = [(p, c) for p, c in zip(points, curves, strict=True)
                 if c is not None and p["thresholds"] is not None and p["method"] in
                 self.methods]
        if not drawn:
            return None
        first = drawn[0][0]
        # The graph curve ends at (N, P); the maxima guard records without rated counts.
        n = float(first["rated_negatives"] or 0) or max(
            float(np.max(c["fp"], initial=0.0)) for _, c in drawn) or 1.0
        p_all = float(first["rated_positives"] or 0) or max(
            float(np.max(c["tp"], initial=0.0)) for _, c in drawn) or 1.0
        slope = Target.from_marginal_precision(first["target_marginal_precision"]).slope
        data = {p["method"]: (np.asarray(c["fp"], dtype=float) / n,
                              np.asarray(c["tp"], dtype=float) / p_all,
                              float(p["fp"]) / n, float(p["tp"]) / p_all) for p, c in drawn}
        best = max(data.values(), key=lambda d: d[3] * p_all - slope * d[2] * n)
        zoom_x = nice_ceiling(max(4.0 * max(d[2] for d in data.values()) * n, 1.0) / n)
        seen = [d[1][d[0] <= zoom_x] for d in data.values()]
        tp_view = max(float(np.max(s)) if s.size else 0.0 for s in seen)
        view = PNView(n, p_all, zoom_x, min(round(ceil_step(tp_view * 1.05), 9), 1.05))
        share_slope = slope * n / p_all
        for panel, limit in enumerate((1.02, view.zoom_x)):
            for method in self.methods:
                fp, tp, point_fp, point_tp = data.get(method, ((), (), None, None))
                self.curve_lines[panel, method].set_data(fp, tp)
                self.point_lines[panel, method].set_data(
                    [] if point_fp is None else [point_fp], [] if point_tp is None else [point_tp])
            xs = np.array([0.0, limit])
            self.target_lines[panel].set_data(xs, best[3] + share_slope * (xs - best[2]))

        def apply_view() -> None:
            self.pn_axes[1].set_xlim(0, view.zoom_x)
            self.pn_axes[1].set_ylim(0, view.zoom_y)

        self.last_view = view
        return self.pn_blit.render(view.key, apply_view)

    def path_uri(self, points: Sequence[Mapping[str, Any]],
                 curves: Sequence[Mapping[str, Any] | None],
                 previous: Sequence[float | None] | None = None) -> str | None:
        """The path figure of one group (None for k != 2 or when no method has a curve).

        ``previous``: the decision method's thresholds of the previous run, marked at their
        (fractional) lattice indices when the lattice is known.
        """
        if self.paths is None:
            return None
        drawn = {p["method"]: (p, c) for p, c in zip(points, curves, strict=True)
                 if c is not None and p["method"] in self.path_lines}
        if not drawn:
            return None
        for rank, method in enumerate(m for m in self.methods if m in drawn):
            point, curve = drawn[method]
            cells = np.asarray(curve["path"], dtype=int).reshape(-1, 2)
            chosen = cells[curve["chosen_position"]]
            self.path_lines[method].set_data(cells[:, 0], cells[:, 1])
            # Methods often choose the same cell: later markers are smaller, all stay visible.
            marker = self.chosen_lines[method]
            marker.set_data([chosen[0]], [chosen[1]])
            marker.set_markersize(15 - 3 * min(rank, 3))
            marker.set_zorder(3 + rank)
            box = self.boxes[method]
            low, high = point["threshold_ci_low"], point["threshold_ci_high"]
            box.set_visible(self.lattice is not None and low is not None and high is not None)
            if box.get_visible():
                assert self.lattice is not None
                low = [index_of(v, a) for v, a in zip(low, self.lattice, strict=True)]
                high = [index_of(v, a) for v, a in zip(high, self.lattice, strict=True)]
                shape = ci_box(low, high, None)
                box.set_bounds(*shape.get_xy(), shape.get_width(), shape.get_height())
        for method in self.path_lines:
            if method not in drawn:
                self.path_lines[method].set_data([], [])
                self.chosen_lines[method].set_data([], [])
                self.boxes[method].set_visible(False)
        values = [float(v) for v in previous or () if v is not None]
        if self.lattice is not None and self.decision is not None and len(values) == 2:
            at = [index_of(v, a) for v, a in zip(values, self.lattice, strict=True)]
            self.previous_marker.set_data([at[0]], [at[1]])
        else:
            self.previous_marker.set_data([], [])
        return self.path_blit.render("paths", lambda: None)


def index_of(value: float, axis: np.ndarray) -> float:
    """Fractional lattice index of a threshold value on one axis (``+inf`` = off)."""
    if math.isinf(value):
        return float(len(axis) - 1)
    finite = axis[:-1]
    return float(np.interp(value, finite, np.arange(len(finite))))


def threshold_ticks(ax: Axes, axis: np.ndarray, which: str) -> None:
    """About six ticks on one axis, labelled with threshold values (last: off)."""
    positions = np.unique(np.linspace(0, len(axis) - 1, 6).round().astype(int))
    labels = ["off" if math.isinf(axis[i]) else f"{axis[i]:.2f}" for i in positions]
    getattr(ax, f"set_{which}ticks")(positions, labels)


def ci_box(low: Sequence[float], high: Sequence[float], color: str | None) -> Rectangle:
    """A dashed rectangle from the lower to the upper interval corner (index space)."""
    pad = 0.15  # a zero-width interval still shows as a small box
    return Rectangle((low[0] - pad, low[1] - pad), high[0] - low[0] + 2 * pad,
                     high[1] - low[1] + 2 * pad, fill=False, ls="--", lw=1, ec=color,
                     alpha=0.8)
