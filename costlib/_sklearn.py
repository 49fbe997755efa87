"""scikit-learn helpers imported on first use.

Importing scikit-learn costs ~0.8 s of CPU; the pipelines import :mod:`costlib.costs._matrices`
and :mod:`costlib.costs._example_costs` for their types and rarely call these, so every pipeline
start would pay for it. Each wrapper imports its function when it is first called.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["check_consistent_length", "column_or_1d", "confusion_matrix", "unique_labels"]


def column_or_1d(y: Any, **kwargs: Any) -> NDArray[Any]:
    """:func:`sklearn.utils.validation.column_or_1d`."""
    from sklearn.utils.validation import column_or_1d as function

    return np.asarray(function(y, **kwargs))


def unique_labels(*ys: Any) -> NDArray[Any]:
    """:func:`sklearn.utils.multiclass.unique_labels`."""
    from sklearn.utils.multiclass import unique_labels as function

    return np.asarray(function(*ys))


def check_consistent_length(*arrays: Any) -> None:
    """:func:`sklearn.utils.validation.check_consistent_length`."""
    from sklearn.utils.validation import check_consistent_length as function

    function(*arrays)


def confusion_matrix(*args: Any, **kwargs: Any) -> NDArray[np.float64]:
    """:func:`sklearn.metrics.confusion_matrix`."""
    from sklearn.metrics import confusion_matrix as function

    return np.asarray(function(*args, **kwargs))
