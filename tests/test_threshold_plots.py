import numpy as np
import pytest
from threshold_data import make_rows

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.plots._plots import plot_pn_curves, plot_threshold_surfaces
from costlib.thresholds.point._operating_point import METHODS
from costlib.thresholds.point._optimize import optimize


@pytest.mark.parametrize("k", [1, 2, 3])
def test_figures_are_written(tmp_path, k):
    scores, y, _, edges = make_rows(800, k, seed=k)
    grid = ThresholdGrid.from_scores(scores, y, edges)
    points = {m: optimize(grid, target_marginal_precision=0.4, method=m) for m in METHODS}
    pn = tmp_path / "pn.png"
    surfaces = tmp_path / "sub" / "surfaces.png"
    fig = plot_pn_curves(points, pn)
    plot_threshold_surfaces(grid, points, surfaces)
    for path in (pn, surfaces):
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    # Each method's chosen point is drawn where the operating point says.
    markers = {
        line.get_label(): (line.get_xdata()[0], line.get_ydata()[0])
        for line in fig.axes[0].lines
        if line.get_marker() == "o"
    }
    for m, p in points.items():
        label = next(lbl for lbl in markers if lbl.startswith(f"{m}:"))
        assert markers[label] == (p.fp, p.tp)


def test_surface_axes_must_be_valid():
    scores, y, _, edges = make_rows(100, 2, seed=0)
    grid = ThresholdGrid.from_scores(scores, y, edges)
    p = optimize(grid, target_marginal_precision=0.4)
    with pytest.raises(ValueError, match="two different classifiers"):
        plot_threshold_surfaces(grid, [p], axes=(0, 0))
    assert np.isfinite(p.tp)
