"""Figures for threshold choices: PN curves with chosen points, and TP/FP surfaces with paths.

Uses :class:`matplotlib.figure.Figure` directly (no pyplot state, no display needed; matplotlib
comes with the ``plots`` extra: ``pip install 'costlib[plots]'``); pass
``path`` to save the figure to a file (format from the extension).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from costlib._optional import new_figure, save_figure
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._operating_point import OperatingPoint
from costlib.thresholds.point._target import Target

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["METHOD_COLORS", "CurveSpec", "draw_pn_curves", "plot_pn_curves",
           "plot_threshold_surfaces"]

#: One colour per optimisation method, in every figure (the report's too).
METHOD_COLORS = {"graph": "tab:blue", "analytic": "tab:orange", "hull": "tab:green",
                 "bucket": "tab:red"}


def _as_mapping(
    points: Mapping[str, OperatingPoint] | Sequence[OperatingPoint],
) -> dict[str, OperatingPoint]:
    if isinstance(points, Mapping):
        return dict(points)
    return {p.method: p for p in points}


@dataclass(frozen=True)
class CurveSpec:
    """What one method contributes to a PN plot (from an OperatingPoint or from run records)."""

    label: str
    method: str
    kind: str  # "path" or "frontier"
    curve_fp: NDArray[np.float64]
    curve_tp: NDArray[np.float64]
    fp: float
    tp: float
    thresholds: tuple[float, ...]
    objective: float
    fitted_fp: NDArray[np.float64] | None = None
    fitted_tp: NDArray[np.float64] | None = None


def plot_pn_curves(
    points: Mapping[str, OperatingPoint] | Sequence[OperatingPoint],
    path: str | Path | None = None,
    *,
    title: str | None = None,
) -> Figure:
    """PN curves (FP on x, TP on y) of each method with its chosen operating point.

    Left: the whole curves; right: a zoom around the chosen points. The grey line is the
    iso-objective line ``TP - r FP = const`` of the target slope ``r`` through the best point:
    no point of any curve lies above it for the hull optimum.
    """
    pts = _as_mapping(points)
    first = next(iter(pts.values()))
    specs = [
        CurveSpec(
            label=label, method=p.method, kind=p.curve_kind, curve_fp=p.curve_fp,
            curve_tp=p.curve_tp, fp=p.fp, tp=p.tp, thresholds=p.thresholds,
            objective=p.objective, fitted_fp=p.details.get("fitted_curve_fp"),
            fitted_tp=p.details.get("fitted_curve_tp"),
        )
        for label, p in pts.items()
    ]
    return draw_pn_curves(specs, first.target, path,
                          title=title or f"PN curves, rule '{first.rule}'")


def draw_pn_curves(
    specs: Sequence[CurveSpec],
    target: Target | None,
    path: str | Path | None = None,
    *,
    title: str = "PN curves",
) -> Figure:
    """Draw PN curves from :class:`CurveSpec` (see :func:`plot_pn_curves`)."""
    best = max(specs, key=lambda c: c.objective)
    fig = new_figure(figsize=(13, 5.2), layout="constrained")
    fp_point_max = max(c.fp for c in specs)
    fp_all_max = max(float(np.max(c.curve_fp)) for c in specs)
    tp_all_max = max(float(np.max(c.curve_tp)) for c in specs)
    zoom_fp = min(fp_all_max, max(4.0 * fp_point_max, 1.0))
    for panel, fp_limit in enumerate((fp_all_max, zoom_fp)):
        ax = fig.add_subplot(1, 2, panel + 1)
        for c in specs:
            color = METHOD_COLORS.get(c.method)
            style = "-" if c.kind == "path" else "--"
            ax.plot(c.curve_fp, c.curve_tp, style, color=color, lw=1.3,
                    label=f"{c.label} {c.kind}")
            if c.fitted_fp is not None and c.fitted_tp is not None:
                ax.plot(c.fitted_fp, c.fitted_tp, ":", color=color, lw=1,
                        label=f"{c.label} fitted curve")
            thresholds = ", ".join(_fmt(t) for t in c.thresholds)
            ax.plot([c.fp], [c.tp], "o", color=color, ms=8, mec="black",
                    label=f"{c.label}: t=({thresholds}) TP={c.tp:.0f} FP={c.fp:.0f}")
        if target is not None:  # the iso-objective line exists for a linear objective only
            xs = np.array([0.0, fp_limit])
            ax.plot(xs, best.objective + target.slope * xs, color="gray", lw=0.8,
                    label=f"target slope r={target.slope:.3g} "
                    f"(m={target.marginal_precision:.3g})")
        in_view = [c.curve_tp[c.curve_fp <= fp_limit] for c in specs]
        tp_limit = max(float(np.max(t)) if t.size else 0.0 for t in in_view)
        ax.set_xlim(0, fp_limit * 1.02 if fp_limit > 0 else 1)
        ax.set_ylim(0, (tp_limit if panel else tp_all_max) * 1.05 or 1)
        ax.set_xlabel("false positives (rated)")
        ax.set_ylabel("true positives (rated)")
        ax.grid(alpha=0.3)
        if panel == 0:
            ax.set_title(title)
        else:
            ax.set_title("zoom around the chosen points")
            ax.legend(fontsize=7, loc="lower right")
    return save_figure(fig, path)


def plot_threshold_surfaces(
    grid: ThresholdGrid,
    points: Mapping[str, OperatingPoint] | Sequence[OperatingPoint],
    path: str | Path | None = None,
    *,
    axes: tuple[int, int] = (0, 1),
) -> Figure:
    """TP and FP over threshold space with each method's path and chosen point.

    For ``k = 2`` the two surfaces are drawn over the lattice of both classifiers' thresholds
    (the last row/column is "off"). For ``k > 2`` the surfaces are the slice through the first
    point's lattice index on the other axes, over the classifiers in ``axes``. For ``k = 1``
    TP and FP are drawn against the single threshold.
    """
    pts = _as_mapping(points)
    first = next(iter(pts.values()))
    tp, fp = grid.counts(first.rule)
    names = grid.names or tuple(f"s{j + 1}" for j in range(grid.k))
    if grid.k == 1:
        fig = new_figure(figsize=(7, 4.5))
        ax = fig.add_subplot()
        x = np.arange(tp.shape[0])
        ax.plot(x, tp, label="TP")
        ax.plot(x, fp, label="FP")
        for label, p in pts.items():
            ax.axvline(p.index[0], color=METHOD_COLORS.get(p.method), ls="--",
                       label=f"{label} point")
        ax.set_xlabel(f"threshold index of {names[0]} (last = off)")
        ax.set_yscale("symlog")
        ax.legend(fontsize=8)
        return save_figure(fig, path)
    a, b = axes
    if a == b or not (0 <= a < grid.k and 0 <= b < grid.k):
        raise ValueError(f"axes must name two different classifiers of {grid.k}, got {axes!r}")
    index: list[Any] = list(first.index)
    index[a], index[b] = slice(None), slice(None)
    tp2, fp2 = tp[tuple(index)], fp[tuple(index)]
    if a > b:
        tp2, fp2 = tp2.T, fp2.T
    fig = new_figure(figsize=(12.5, 5), layout="constrained")
    thresholds = grid.thresholds
    for panel, (surface, label) in enumerate(((tp2, "TP"), (fp2, "FP"))):
        ax = fig.add_subplot(1, 2, panel + 1)
        image = ax.imshow(
            surface.T, origin="lower", aspect="auto", cmap="viridis",
            extent=(-0.5, surface.shape[0] - 0.5, -0.5, surface.shape[1] - 0.5),
        )
        if surface.max() > 0:
            levels = np.quantile(surface[surface > 0], [0.05, 0.25, 0.5, 0.75, 0.95])
            ax.contour(surface.T, levels=np.unique(levels), colors="white", linewidths=0.5,
                       alpha=0.7)
        fig.colorbar(image, ax=ax, label=label)
        for name, p in pts.items():
            color = METHOD_COLORS.get(p.method)
            if p.curve_kind == "path":
                ax.plot(p.path[:, a], p.path[:, b], "-", color=color, lw=1.5, label=f"{name} path")
            ax.plot(p.index[a], p.index[b], "o", color=color, ms=8, mec="white",
                    label=f"{name} point")
        ticks_a = np.linspace(0, surface.shape[0] - 1, 5).round().astype(int)
        ticks_b = np.linspace(0, surface.shape[1] - 1, 5).round().astype(int)
        ax.set_xticks(ticks_a, [_fmt(thresholds[a][i]) for i in ticks_a])
        ax.set_yticks(ticks_b, [_fmt(thresholds[b][i]) for i in ticks_b])
        ax.set_xlabel(f"threshold of {names[a]}")
        ax.set_ylabel(f"threshold of {names[b]}")
        ax.set_title(f"{label} (rule '{first.rule}')")
        if panel == 0:
            ax.legend(fontsize=7, loc="lower left")
    return save_figure(fig, path)


def _fmt(value: float) -> str:
    return "off" if np.isinf(value) else f"{value:.3g}"
