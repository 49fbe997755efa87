"""Helpers shared by the estimators: class bookkeeping, group resolution, cost decisions."""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.multiclass import check_classification_targets

from costlib._messages import plain
from costlib.costs._labels import binary_class_order, label_array, standard_positive
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


class BinaryClasses:
    """Two classes (``classes_``, sorted) and which one is positive.

    Internally every binary estimator works on ``1`` = positive, ``0`` = negative, whatever the
    labels (0/1, bool, -1/1, or strings with ``pos_label``), so the same data in another label
    convention gives bit-for-bit the same model; only the outputs are put back in ``classes_``
    order (scikit-learn's convention: ``decision_function > 0`` means ``classes_[1]``).

    Parameters
    ----------
    classes : ndarray of shape (2,)
        The sorted class labels.
    pos_label : label or None
        The positive class; None means ``classes`` are 0/1, bool or -1/1 (1 positive) or, if
        ``needed`` is False, ``classes[1]`` (the orientation does not matter then, e.g. 0/1
        costs).
    needed : bool
        Whether plain (unlabelled) costs make the orientation matter; then non-standard classes
        without ``pos_label`` are refused.
    """

    def __init__(self, classes: np.ndarray, pos_label: object = None, *,
                 needed: bool = True) -> None:
        self.classes = np.asarray(classes)
        if pos_label is None and not needed and not standard_positive(self.classes.tolist()):
            self.positive = 1
        else:
            self.positive = int(binary_class_order(self.classes, pos_label)[1])
        self.known = pos_label is not None or standard_positive(self.classes.tolist())

    @property
    def sign(self) -> float:
        """+1 if the positive class is ``classes_[1]``, else -1 (flips scores to ``classes_``)."""
        return 1.0 if self.positive == 1 else -1.0

    @property
    def order(self) -> np.ndarray:
        """Indices into ``classes`` of (negative, positive)."""
        return np.array([1 - self.positive, self.positive], dtype=np.intp)

    def encode(self, y: np.ndarray) -> np.ndarray:
        """1 where ``y`` is the positive class, else 0 (int)."""
        return np.asarray(np.asarray(y) == self.classes[self.positive], dtype=np.intp)

    def decode(self, positive: np.ndarray) -> np.ndarray:
        """Labels of a positive/negative mask."""
        idx = np.where(np.asarray(positive, dtype=bool), self.positive, 1 - self.positive)
        out: np.ndarray = self.classes[idx]
        return out

    def columns(self, internal: np.ndarray) -> np.ndarray:
        """(n, 2) values in (negative, positive) order put in ``classes`` order."""
        out: np.ndarray = internal[:, self.order]
        return out


def checked_labels(y: Any, owner: str) -> np.ndarray:
    """Training labels as a 1-d array; a missing label (NaN, None, ``<NA>``) is refused.

    pandas nullable columns without missing values become their numpy counterparts
    (``Int8`` → int), so they fit like plain arrays.
    """
    if y is None:
        raise ValueError(f"{owner} requires y to be passed, but the target y is None")
    if not hasattr(y, "isna"):  # pandas keeps its nullable dtypes for label_array
        y = np.asarray(y)
    if len(getattr(y, "shape", ())) == 2:
        from sklearn.utils.validation import column_or_1d

        y = column_or_1d(y, warn=True)  # a (n, 1) column: DataConversionWarning
    return label_array(y, "y")


def fit_posterior_model(
    model: Any, X: ArrayLike, y: ArrayLike, pos_label: object, *, frozen: bool,
    fit_params: dict[str, Any],
) -> tuple[Any, np.ndarray, BinaryClasses | None, bool]:
    """Fit a probabilistic classifier; two classes are fitted as 0/1 (1 = positive).

    Returns ``(fitted, classes, binary, encoded)``: ``classes`` sorted (``classes_``),
    ``binary`` the positive class of two (None for K > 2) and ``encoded`` whether the model saw
    0/1 targets (a frozen model keeps its own ``classes_``). Fitting on 0/1 makes the model, and
    so every decision, the same bits whatever label convention ``y`` came in.
    """
    y_arr = checked_labels(y, type(model).__name__)
    if frozen:
        fitted = model.fit(X, y_arr, **fit_params)
        classes = np.asarray(fitted.classes_)
        encoded = False
    else:
        check_classification_targets(y_arr)
        classes = np.unique(y_arr)
        encoded = classes.shape[0] == 2
    binary = BinaryClasses(classes, pos_label, needed=False) if classes.shape[0] == 2 else None
    if not frozen:
        target = binary.encode(y_arr) if binary is not None else y_arr
        fitted = model.fit(X, target, **fit_params)
        if binary is None:
            classes = np.asarray(fitted.classes_)
    if classes.shape[0] < 2:
        raise ValueError(
            f"the classifier needs samples of at least 2 classes, got {classes.tolist()}")
    if pos_label is not None and binary is None:
        raise ValueError(f"pos_label is for two classes, got {classes.shape[0]} "
                         f"{classes.tolist()[:10]}; give the cost matrix labels instead")
    return fitted, classes, binary, encoded


def internal_proba(
    fitted: Any, X: ArrayLike, binary: BinaryClasses | None, encoded: bool
) -> np.ndarray:
    """Posteriors in (negative, positive) order for two classes, else ``classes_`` order."""
    p = np.asarray(fitted.predict_proba(X), dtype=np.float64)
    if binary is None or encoded:
        return p
    out: np.ndarray = p[:, binary.order]
    return out


def binary_costs_internal(
    costs: np.ndarray | CostMatrix, binary: BinaryClasses, pos_label: object
) -> np.ndarray:
    """2x2 costs (shared or per example) in (negative, positive) order.

    A labelled :class:`CostMatrix` is aligned by its labels; plain costs are (negative,
    positive) already, which needs the positive class to be known (``pos_label`` or 0/1,
    bool, -1/1 classes), else ``ValueError``.
    """
    if isinstance(costs, CostMatrix) and costs.labels is not None:
        out: np.ndarray = costs.aligned_to(binary.classes[binary.order])
        return out
    if not binary.known:
        binary_class_order(binary.classes, pos_label)  # raises: which class is positive?
    return np.asarray(costs, dtype=np.float64)
