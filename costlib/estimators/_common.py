"""Helpers shared by the estimators: class bookkeeping, group resolution, cost decisions."""

from __future__ import annotations

import sys
import warnings

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.multiclass import check_classification_targets

from costlib._messages import plain
from costlib.costs._labels import binary_class_order
from costlib.costs._matrices import BenefitMatrix, CostMatrix, as_benefit_matrix, as_cost_matrix


def encode_classes(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``classes_`` (sorted) and the class index of each sample; at least two classes."""
    check_classification_targets(y)
    classes, y_idx = np.unique(y, return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError(
            f"the classifier needs samples of at least 2 classes, got only one class: "
            f"{classes.tolist()}"
        )
    return classes, y_idx


def _check_pos_label(classes: np.ndarray, pos_label: object) -> None:
    if pos_label is None:
        return
    if classes.shape[0] != 2:
        raise ValueError(f"pos_label is for two classes, got {classes.shape[0]} "
                         f"{classes.tolist()[:10]}; give the matrix labels instead")
    if pos_label not in classes.tolist():
        raise ValueError(f"pos_label={pos_label!r} is not one of the training classes "
                         f"{classes.tolist()}")


def _aligned(matrix: CostMatrix | BenefitMatrix, classes: np.ndarray,
             pos_label: object) -> np.ndarray:
    """A labelled matrix by its labels; a plain 2x2 one as (negative, positive) rows."""
    _check_pos_label(classes, pos_label)
    if matrix.labels is not None or classes.shape[0] != 2:
        return matrix.aligned_to(classes)
    if matrix.n_classes != 2:
        return matrix.aligned_to(classes)  # raises: sizes differ
    return in_class_order(matrix.values, classes, pos_label)


def in_class_order(costs: np.ndarray, classes: np.ndarray, pos_label: object) -> np.ndarray:
    """2x2 matrices (last two axes) with rows (negative, positive) put in ``classes`` order.

    Identity for 0/1, bool and -1/1 classes; other classes need ``pos_label``
    (:func:`costlib.costs._labels.binary_class_order`), else ``ValueError``.
    """
    order = binary_class_order(classes, pos_label)
    out: np.ndarray = costs[..., order, :][..., :, order]
    return out


def aligned_cost_matrix(
    cost_matrix: ArrayLike | CostMatrix | None, classes: np.ndarray, pos_label: object = None
) -> np.ndarray:
    """Cost matrix in ``classes`` order (rows = true, columns = predicted); None → 0/1 costs.

    A plain 2x2 matrix has rows (negative, positive): see :func:`in_class_order`.
    """
    if cost_matrix is None:
        _check_pos_label(classes, pos_label)
        return 1.0 - np.eye(classes.shape[0])
    return _aligned(as_cost_matrix(cost_matrix), classes, pos_label)


def aligned_benefit_matrix(
    benefit_matrix: ArrayLike | BenefitMatrix | None, classes: np.ndarray,
    pos_label: object = None,
) -> np.ndarray:
    """Benefit matrix in ``classes`` order; None → ``b_ii = 1``, ``b_ij = -1`` (cost-blind)."""
    if benefit_matrix is None:
        _check_pos_label(classes, pos_label)
        return 2.0 * np.eye(classes.shape[0]) - 1.0
    return _aligned(as_benefit_matrix(benefit_matrix), classes, pos_label)


def min_expected_cost_index(proba: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """``argmin_k Σ_q p(q|x) V_qk`` per row (ties → the first class in ``classes_`` order)."""
    return np.argmin(proba @ cost, axis=1)


def cost_decision_function(proba: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Scores whose argmax (binary: sign) is the minimum-expected-cost decision.

    Multiclass: ``-F(C_k) = -Σ_q p(q|x) V_qk``, shape (n, K). Binary: ``F(C_0) - F(C_1)``,
    shape (n,), positive when class 1 is cheaper.
    """
    expected = proba @ cost
    if cost.shape[0] == 2:
        return expected[:, 0] - expected[:, 1]
    return -expected


def resolve_groups(
    classes: np.ndarray,
    class_weight_totals: np.ndarray,
    minority_classes: ArrayLike | None,
    majority_classes: ArrayLike | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks over ``classes``: (minority group D, majority group H).

    With neither given, the (weighted) most frequent class is the majority group and every
    other class is a minority class. With one given, the other group is the rest. Both given:
    they must partition ``classes``.
    """
    known = classes.tolist()

    def _mask(name: str, given: ArrayLike | None) -> np.ndarray:
        vals = np.atleast_1d(np.asarray(given, dtype=object)).tolist()
        unknown = [v for v in vals if v not in known]
        if unknown:
            raise ValueError(f"{name} {unknown} are not among the training classes {known}")
        return np.isin(np.asarray(known, dtype=object), np.asarray(vals, dtype=object))

    if minority_classes is None and majority_classes is None:
        majority = np.zeros(classes.shape[0], dtype=bool)
        majority[int(np.argmax(class_weight_totals))] = True
        minority = ~majority
    elif majority_classes is None:
        minority = _mask("minority_classes", minority_classes)
        majority = ~minority
    elif minority_classes is None:
        majority = _mask("majority_classes", majority_classes)
        minority = ~majority
    else:
        minority = _mask("minority_classes", minority_classes)
        majority = _mask("majority_classes", majority_classes)
        if (minority & majority).any():
            both = np.asarray(known, dtype=object)[minority & majority].tolist()
            raise ValueError(f"classes {both} are in both minority_classes and majority_classes")
        if not (minority | majority).all():
            rest = np.asarray(known, dtype=object)[~(minority | majority)].tolist()
            raise ValueError(
                f"training classes {rest} are in neither minority_classes nor majority_classes"
            )
    if not minority.any() or not majority.any():
        raise ValueError(
            "need at least one minority and one majority class among the training classes "
            f"{known}"
        )
    return minority, majority


def check_positive(name: str, value: float) -> float:
    """A finite, strictly positive float or a clear ValueError."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {plain(value)}") from None
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be finite and > 0, got {plain(value)}")
    return v


class CostFallbackWarning(UserWarning):
    """An estimator whose decision needs costs got none and decided by 0/1 costs."""


def warn_every_time(message: str, category: type[Warning], stacklevel: int = 2) -> None:
    """``warnings.warn`` that is not shown only once per call site.

    Python's default filter shows a warning once per location and text; a fallback that
    changes every answer must be seen on every call, so each call gets a fresh registry
    (filters set to "ignore" or "error" still apply).
    """
    try:
        frame = sys._getframe(stacklevel)
    except ValueError:
        frame = sys._getframe(1)
    warnings.warn_explicit(
        message, category, frame.f_code.co_filename, frame.f_lineno,
        module=frame.f_globals.get("__name__"), registry={},
    )
