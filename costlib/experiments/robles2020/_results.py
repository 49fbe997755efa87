"""What one experiment of the Robles et al. (2020) reproduction produces: the rows of Table 1.

:data:`METHOD_LABELS` names the threshold methods of a table, :class:`MethodResult` holds the
hold-out confusion counts of one row (precision, recall and F1 from them) and
:class:`ExperimentResult` everything one (data set, classifier type) experiment produced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._operating_point import OperatingPoint

__all__ = ["METHOD_LABELS", "ExperimentResult", "MethodResult", "holdout_metrics"]

#: Proposed and baseline methods of :func:`costlib.thresholds.optimize`, in table
#: order.
METHOD_LABELS: dict[str, str] = {
    "analytic": "Analytical",
    "graph": "Graph",
    "hull": "Hull (exact optimum)",
    "bucket": "Bucket",
}


@dataclass(frozen=True)
class MethodResult:
    """Hold-out confusion counts and metrics of one row of the table."""

    label: str
    tp: int
    fp: int
    fn: int

    @property
    def flagged(self) -> int:
        """Hold-out items flagged."""
        return self.tp + self.fp

    @property
    def precision(self) -> float:
        """``tp / (tp + fp)``; NaN when nothing is flagged."""
        return self.tp / self.flagged if self.flagged else float("nan")

    @property
    def recall(self) -> float:
        """``tp / (tp + fn)``; NaN when the hold-out has no positive."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    @property
    def f1(self) -> float:
        """``2 p r / (p + r) = 2 tp / (2 tp + fp + fn)``; NaN when nothing is flagged (as '-')."""
        return 2 * self.tp / (2 * self.tp + self.fp + self.fn) if self.flagged else float("nan")


def holdout_metrics(label: str, flags: NDArray[np.bool_], y: NDArray[np.bool_]) -> MethodResult:
    """Confusion counts of boolean ``flags`` against boolean labels ``y``."""
    return MethodResult(
        label=label,
        tp=int(np.count_nonzero(flags & y)),
        fp=int(np.count_nonzero(flags & ~y)),
        fn=int(np.count_nonzero(~flags & y)),
    )


@dataclass
class ExperimentResult:
    """Everything one (data set, classifier type) experiment produced.

    Attributes
    ----------
    dataset, clf_type : str
        Data set name and classifier type key (see :data:`CLASSIFIER_TYPES`).
    grid : ThresholdGrid
        The rated training grid.
    points : dict of str to OperatingPoint
        Operating point per method (keys of :data:`METHOD_LABELS`).
    rows : list of MethodResult
        Table rows: the four methods, then classifier 1 and 2 alone.
    flags : dict of str to ndarray of bool
        Hold-out flags of every row, keyed by the row's label.
    y_holdout : ndarray of bool
    holdout_scores : ndarray of shape (n_holdout, 2)
        Scores of the refit classifiers on H.
    rated_scores : ndarray of shape (n_rated, 2)
        Out-of-fold training scores of the rated rows (the rows of ``grid``).
    rated_labels : ndarray of bool
    floors : tuple of float
        Rating floor per classifier.
    n_train, n_rated, train_positives, rated_positives : int
    params : tuple of dict
        Hyperparameters that differ from the defaults after tuning, per classifier.
    """

    dataset: str
    clf_type: str
    grid: ThresholdGrid
    points: dict[str, OperatingPoint]
    rows: list[MethodResult]
    flags: dict[str, NDArray[np.bool_]]
    y_holdout: NDArray[np.bool_]
    holdout_scores: NDArray[np.float64]
    rated_scores: NDArray[np.float64]
    rated_labels: NDArray[np.bool_]
    floors: tuple[float, float]
    n_train: int
    n_rated: int
    train_positives: int
    rated_positives: int
    params: tuple[dict, dict] = field(default_factory=lambda: ({}, {}))

    def row(self, label: str) -> MethodResult:
        """The table row with this label."""
        return next(r for r in self.rows if r.label == label)
