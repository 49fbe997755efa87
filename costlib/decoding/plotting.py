"""Plot of the expected loss against ``k`` for one set, marking the chosen ``k``.

Uses matplotlib's object API with the Agg canvas (no pyplot, no global backend change), so it
works headless and in worker processes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._optional import new_figure
from ._topk import TopK

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def plot_expected_losses(
    result: TopK,
    path: str | Path | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Draw :math:`E[L(\\text{top}_k)]` for ``k = 0..n`` and mark the chosen ``k``.

    Parameters
    ----------
    result : TopK
        Output of :func:`costlib.decoding.optimal_topk`.
    path : str or Path, optional
        If given, the figure is saved there (format from the suffix, e.g. ``.png``).
    ax : matplotlib Axes, optional
        Draw into these axes instead of a new figure.
    title : str, optional
        Axes title; defaults to the loss name, the method and ``n``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if ax is None:
        fig = new_figure(figsize=(6.0, 4.0))
        ax = fig.add_subplot()
    else:
        root = ax.get_figure(root=True)  # the figure that saves, also for an Axes in a subfigure
        assert root is not None  # an Axes always belongs to a figure
        fig = root
    losses = result.expected_losses
    ks = np.arange(losses.size)
    shown = ~np.isnan(losses)
    ax.plot(ks[shown], losses[shown], marker="." if losses.size <= 60 else None,
            label="expected loss of top-k")
    ax.axvline(result.k, color="tab:red", linestyle="--", linewidth=1)
    ax.plot([result.k], [result.expected_loss], "o", color="tab:red",
            label=f"chosen k = {result.k} (E[L] = {result.expected_loss:.4f})")
    ax.set_xlabel("k (items predicted positive, by decreasing probability)")
    ax.set_ylabel(f"expected {result.loss.name} loss")
    ax.set_title(title or f"{result.loss.name}, {result.method}, n = {losses.size - 1}")
    ax.legend(loc="best")
    ax.grid(True, alpha=0.3)
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig
