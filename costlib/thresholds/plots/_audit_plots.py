"""A figure for audit samples: the PN frontier as the audit estimates it, against the rated-only
one (and the truth, where known).

Rated-only grids see only what the thresholds in force flagged: below those thresholds every
cell is empty, so their frontier stops where the flagged region ends and the optimum cannot lie
lower. Audit-weighted grids (Horvitz–Thompson, :mod:`costlib.audit._weights`) estimate every
cell of the scored population, so their frontier continues below the thresholds in force; with
full labels (a simulation) the true frontier shows how close the estimate is.

Each curve is the upper hull frontier of its grid (``optimize(method="hull",
max_unrated_share=1)``: every cell counts, as the estimate is meant to), with its optimum at
the target slope marked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from costlib._optional import new_figure, save_figure
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._operating_point import OperatingPoint, point_at
from costlib.thresholds.point._optimize import optimize
from costlib.thresholds.point._target import Target

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["audit_frontiers", "plot_audit_pn_curves"]

_STYLES = ("tab:green", "tab:gray", "black", "tab:purple", "tab:orange")


def audit_frontiers(
    grids: Mapping[str, ThresholdGrid], *, target: Target, rule: str = "any"
) -> dict[str, OperatingPoint]:
    """The hull optimum (with its frontier as ``curve_fp``/``curve_tp``) of each grid."""
    return {label: optimize(grid, target=target, rule=rule, method="hull", max_unrated_share=1)
            for label, grid in grids.items()}


def plot_audit_pn_curves(
    grids: Mapping[str, ThresholdGrid],
    *,
    target: Target,
    rule: str = "any",
    in_force: tuple[float, ...] | None = None,
    path: str | Path | None = None,
    title: str = "PN frontier: audit-weighted estimate vs rated only",
) -> Figure:
    """Draw the hull frontier and optimum of each grid (FP on x, TP on y) in one panel.

    Parameters
    ----------
    grids : mapping label -> ThresholdGrid
        For example ``{"audit-weighted": ht_grid, "rated only": flagged_grid,
        "all labels": truth_grid}`` (same edges).
    target : Target
        The trade-off; the iso-objective line of each optimum has slope ``r``.
    in_force : tuple of float, optional
        The thresholds in force, marked on each curve where the grid has them as a candidate.
    path : str or Path, optional
        Save the figure there (format from the extension).

    Returns
    -------
    matplotlib.figure.Figure
        Needs matplotlib (``pip install 'costlib[plots]'``).
    """
    points = audit_frontiers(grids, target=target, rule=rule)
    fig = new_figure(figsize=(13, 5.5), layout="constrained")
    fp_max = float(max(np.max(p.curve_fp) for p in points.values()))
    zoom = min(fp_max, max(3.0 * max(p.fp for p in points.values()), 1.0))
    for panel, limit in enumerate((fp_max, zoom)):
        ax = fig.add_subplot(1, 2, panel + 1)
        for (label, point), color in zip(points.items(), _STYLES, strict=False):
            ax.plot(point.curve_fp, point.curve_tp, "-", color=color, lw=1.4,
                    label=f"{label}: frontier")
            thresholds = ", ".join("off" if not np.isfinite(t) else f"{t:.3g}"
                                   for t in point.thresholds)
            ax.plot([point.fp], [point.tp], "o", color=color, mec="black", ms=8,
                    label=f"{label}: optimum t=({thresholds}), TP={point.tp:.0f}, "
                          f"FP={point.fp:.0f}")
            xs = np.array([max(point.fp - limit / 4, 0.0), min(point.fp + limit / 4, limit)])
            ax.plot(xs, point.tp + target.slope * (xs - point.fp), color=color, lw=0.7,
                    ls=":")
            if in_force is not None:
                current = point_at(grids[label], in_force, target=target, rule=rule)
                ax.plot([current.fp], [current.tp], "s", color=color, mfc="white", ms=7,
                        label=f"{label}: thresholds in force")
        visible = [p.curve_tp[p.curve_fp <= limit] for p in points.values()]
        low = min(float(np.min(v)) for v in visible if v.size)
        high = max(float(np.max(v)) for v in visible if v.size)
        pad = 0.05 * (high - low or 1.0)
        ax.set_xlim(0, limit * 1.02 or 1)
        ax.set_ylim(max(low - pad, 0.0) if panel else 0.0, high + pad)
        ax.set_xlabel("false positives (estimated over all scored rows)")
        ax.set_ylabel("true positives (estimated over all scored rows)")
        ax.grid(alpha=0.3)
        if panel == 0:
            ax.set_title(title)
        else:
            ax.set_title(f"zoom; dotted: slope r = {target.slope:.3g} through each optimum "
                         f"(marginal precision {target.marginal_precision:.3g})", fontsize=9)
            ax.legend(fontsize=7, loc="lower right")
    return save_figure(fig, path)
