"""Figures of grids and operating points (matplotlib, the ``plots`` extra).

Public face of the wing:

CurveSpec, METHOD_COLORS, plot_pn_curves, draw_pn_curves, plot_threshold_surfaces
    PN curves of a grid with its operating points, and its threshold surfaces
    (:mod:`._plots`).
plot_audit_pn_curves, audit_frontiers
    PN curves from an audit sample's estimates against the truth (:mod:`._audit_plots`).
"""

from costlib.thresholds.plots._audit_plots import audit_frontiers, plot_audit_pn_curves
from costlib.thresholds.plots._plots import (
    METHOD_COLORS,
    CurveSpec,
    draw_pn_curves,
    plot_pn_curves,
    plot_threshold_surfaces,
)

__all__ = [
    "METHOD_COLORS", "CurveSpec", "audit_frontiers", "draw_pn_curves", "plot_audit_pn_curves",
    "plot_pn_curves", "plot_threshold_surfaces",
]
