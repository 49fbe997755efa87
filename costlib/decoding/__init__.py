"""Optimal top-k decoding of calibrated probabilities for set losses (Natarajan et al., 2016).

Given :math:`p_i = P(Y_i = 1 \\mid x)` for the items of a set, with labels conditionally
independent, the prediction minimising the expected value of a TP-monotonic set loss (F-β,
Jaccard, AM, G-TP/PR, G-Mean, H-Mean, AUC, ...) labels the top ``k`` items by probability
positive; these functions find the best ``k`` exactly and fast.

Public API
----------
get_loss, SetLoss, LOSS_NAMES, callable_loss, fractional_linear_loss, is_tp_monotonic
    Set losses on confusion counts (the paper's Table 1 by name, or your own; :mod:`._losses`);
    ``fbeta_loss``, ``jaccard_loss``, ``am_loss``, ``auc_loss``, ``g_mean_loss``,
    ``g_tp_pr_loss``, ``h_mean_loss`` build them directly.
optimal_topk, TopK, expected_loss, METHODS, TRUNCATION_TOL
    One set of items (:mod:`._topk`).
optimal_classes, ClassSets
    Multiclass: one true class per instance, predict a set of classes (:mod:`._multiclass`).
optimal_topk_batch, optimal_topk_ragged, BatchTopK, RaggedTopK
    Multilabel / many small sets at once (:mod:`._multilabel`).
threshold_predictions, tune_threshold
    The paper's baselines (:mod:`.baselines`).
plot_expected_losses
    Expected loss against ``k`` (:mod:`.plotting`).
"""

from ._losses import (
    LOSS_NAMES,
    SetLoss,
    am_loss,
    auc_loss,
    callable_loss,
    fbeta_loss,
    fractional_linear_loss,
    g_mean_loss,
    g_tp_pr_loss,
    get_loss,
    h_mean_loss,
    is_tp_monotonic,
    jaccard_loss,
)
from ._multiclass import ClassSets, optimal_classes
from ._multilabel import BatchTopK, RaggedTopK, optimal_topk_batch, optimal_topk_ragged
from ._poisson_binomial import TRUNCATION_TOL
from ._topk import METHODS, TopK, expected_loss, optimal_topk
from .baselines import threshold_predictions, tune_threshold
from .plotting import plot_expected_losses

__all__ = [
    "LOSS_NAMES",
    "METHODS",
    "TRUNCATION_TOL",
    "BatchTopK",
    "ClassSets",
    "RaggedTopK",
    "SetLoss",
    "TopK",
    "am_loss",
    "auc_loss",
    "callable_loss",
    "expected_loss",
    "fbeta_loss",
    "fractional_linear_loss",
    "g_mean_loss",
    "g_tp_pr_loss",
    "get_loss",
    "h_mean_loss",
    "is_tp_monotonic",
    "jaccard_loss",
    "optimal_classes",
    "optimal_topk",
    "optimal_topk_batch",
    "optimal_topk_ragged",
    "plot_expected_losses",
    "threshold_predictions",
    "tune_threshold",
]
