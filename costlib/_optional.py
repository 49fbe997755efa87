"""Optional dependencies: one clear message, naming the install command, when an extra is missing.

The core install (``pip install costlib``) is numpy, scipy, scikit-learn and pandas. Figures need
matplotlib, which comes with the ``plots`` extra (and with ``pipelines``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["MissingExtraError", "new_figure", "require", "save_figure"]


class MissingExtraError(ImportError):
    """An optional dependency of costlib is not installed; the message says which extra to add."""


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingExtraError` naming the extra to install.

    Only a missing ``module`` (or its top-level package) is turned into the message; any other
    import error inside an installed package propagates unchanged.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        if exc.name is None or exc.name.split(".")[0] != top:
            raise
        raise MissingExtraError(
            f"{purpose} needs {top}, which is not installed; install it with "
            f"pip install 'costlib[{extra}]'"
        ) from None


def new_figure(**kwargs: Any) -> Figure:
    """A matplotlib :class:`~matplotlib.figure.Figure` on the Agg canvas (no pyplot state).

    Raises :class:`MissingExtraError` (``pip install 'costlib[plots]'``) without matplotlib.
    """
    figure_module = require("matplotlib.figure", "plots", "Plotting")
    agg = require("matplotlib.backends.backend_agg", "plots", "Plotting")
    fig: Figure = figure_module.Figure(**kwargs)
    agg.FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: str | Path | None, dpi: int = 110) -> Figure:
    """Save ``fig`` to ``path`` (format from the extension; parent directories created) unless
    ``path`` is None; return it."""
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return fig
