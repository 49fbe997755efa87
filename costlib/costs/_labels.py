"""Which label is the positive class: the binary label convention of every cost function.

A binary cost or benefit matrix has rows/columns ``(negative, positive)``: row 1 is the class a
false negative misses. Labels say which class each example is; this module turns them into
"positive or not" without guessing, with scikit-learn's rule for its binary metrics:

* ``pos_label=None``: the labels must be ``0``/``1`` (ints, floats ``0.0``/``1.0``, pandas
  ``Int8`` and the like without missing values), ``False``/``True``, or ``-1``/``1``; the
  positive class is ``1`` (``True``). Anything else, strings above all, is refused: sorting
  ``"fraud"``/``"ok"`` would make ``"fraud"`` class 0 and read every cost backwards.
* ``pos_label=v``: label ``v`` is the positive class and the (at most one) other label the
  negative class.

A missing label (NaN, None, pandas ``<NA>``) is refused: a cost needs the true class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from costlib._sklearn import unique_labels
from costlib.costs._matrices import BenefitMatrix, CostMatrix

__all__ = [
    "binary_class_order",
    "binary_positive",
    "label_array",
    "label_indices",
    "matrix_labels",
    "score_order",
    "standard_positive",
]

IntArray = npt.NDArray[np.intp]

BoolArray = npt.NDArray[np.bool_]

_STANDARD = ({0, 1}, {-1, 1})


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float | np.floating):
        return bool(v != v)
    return type(v).__name__ in ("NAType", "NaTType")


def label_array(y: Any, name: str = "y_true") -> npt.NDArray[Any]:
    """``y`` as a 1-d numpy array; a missing label (NaN, None, ``<NA>``) is refused.

    A pandas nullable column without missing values (``Int8``, ``boolean``, ``string``)
    becomes its numpy counterpart (int, bool, object), so ``Int8`` 0/1 labels read as ints.
    """
    dtype = getattr(y, "dtype", None)
    numpy_dtype = getattr(dtype, "numpy_dtype", None)
    if numpy_dtype is not None and hasattr(y, "isna") and hasattr(y, "to_numpy"):
        missing = np.asarray(y.isna(), dtype=bool).ravel()
        if missing.any():
            _refuse_missing(name, missing)
        arr = np.asarray(y.to_numpy(dtype=numpy_dtype))
    else:
        arr = np.asarray(y)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"{name} should be a 1d array (one label per example), got shape "
                         f"{arr.shape}")
    if arr.dtype.kind == "f":
        missing = np.isnan(arr)
    elif arr.dtype.kind == "O":
        missing = np.fromiter((_is_missing(v) for v in arr), dtype=bool, count=arr.shape[0])
    else:
        return arr
    if missing.any():
        _refuse_missing(name, missing)
    return arr


def _refuse_missing(name: str, missing: BoolArray) -> None:
    first = int(np.flatnonzero(missing)[0])
    raise ValueError(
        f"Input {name} contains NaN, None or <NA> (missing labels): {int(missing.sum())} "
        f"row(s), first at row {first}; costs and fits need the true class of every row: drop "
        "the unlabelled rows first"
    )


def _distinct(ys: Sequence[npt.NDArray[Any]], names: Sequence[str]) -> list[Any]:
    kinds = {("str" if a.dtype.kind in "OUS" and a.size and isinstance(a.flat[0], str)
              else "num") for a in ys if a.size}
    if len(kinds) > 1:
        raise ValueError(
            f"{' and '.join(names)} mix string and numeric labels; give both in one convention"
        )
    values: set[Any] = set()
    for a in ys:
        values.update(np.unique(a).tolist())
    return sorted(values, key=lambda v: (str(type(v)), v))


def standard_positive(values: Sequence[Any]) -> bool:
    """True if ``values`` follow a convention with a known positive class (0/1, bool, -1/1)."""
    try:
        as_set = {v for v in values if not isinstance(v, str | bytes)}
    except TypeError:
        return False
    if len(as_set) != len(values):
        return False
    numeric = all(isinstance(v, bool | int | float | np.bool_ | np.integer | np.floating)
                  for v in as_set)
    return numeric and any(as_set <= s for s in _STANDARD)


def _refusal(values: Sequence[Any], names: Sequence[str]) -> ValueError:
    shown = list(values)[:5]
    return ValueError(
        f"{'/'.join(names)} labels {shown} are not 0/1, False/True or -1/1, so which one is "
        "the positive class (row/column 1 of the costs) is ambiguous; pass pos_label= with the "
        "positive one"
    )


def binary_positive(
    ys: Sequence[Any], names: Sequence[str], pos_label: Any = None
) -> tuple[BoolArray, ...]:
    """``True`` where each label vector holds the positive class.

    Parameters
    ----------
    ys : sequence of array-like of shape (n,)
        Label vectors in one convention (e.g. ``y_true`` and ``y_pred``).
    names : sequence of str
        Their names, for messages.
    pos_label : scalar, default=None
        The positive label; None means the labels are 0/1, bool or -1/1 and 1 is positive.

    Raises
    ------
    ValueError
        On a missing label, more than two distinct labels, labels outside the standard
        conventions without ``pos_label``, or a ``pos_label`` that is not one of two labels
        present.
    """
    arrs = [label_array(y, name) for y, name in zip(ys, names, strict=True)]
    values = _distinct(arrs, names)
    if len(values) > 2:
        raise ValueError(
            f"{'/'.join(names)} hold {len(values)} distinct labels {values[:5]} but the costs "
            "are 2x2 (two classes); for K classes give K x K costs and labels="
        )
    if pos_label is None:
        if not standard_positive(values):
            raise _refusal(values, names)
        return tuple(np.asarray(a == 1, dtype=bool) for a in arrs)
    if _is_missing(pos_label):
        raise ValueError("pos_label must be a label, got a missing value")
    if len(values) == 2 and pos_label not in values:
        raise ValueError(f"pos_label={pos_label!r} is not among the labels {values}")
    return tuple(np.asarray(a == pos_label, dtype=bool) for a in arrs)


def binary_class_order(classes: Any, pos_label: Any = None) -> npt.NDArray[np.intp]:
    """Index into ``classes`` of (negative, positive) for a two-class estimator.

    ``classes`` are the estimator's sorted ``classes_``. A plain 2x2 cost matrix (or one per
    example) has rows ``(negative, positive)``; ``costs[np.ix_(order, order)]`` with the
    inverse permutation puts them in ``classes_`` order. For 0/1, bool and -1/1 classes the
    order is the identity; other classes need ``pos_label``.

    Raises
    ------
    ValueError
        If ``classes`` are not standard and ``pos_label`` is None, or ``pos_label`` is not one
        of ``classes``.
    """
    cls = np.asarray(classes).tolist()
    if len(cls) != 2:
        raise ValueError(f"a binary cost matrix needs two classes, got {cls}")
    if pos_label is None:
        if not standard_positive(cls):
            raise _refusal(cls, ["y"])
        pos = 1 if cls[1] == 1 else 0
    elif pos_label in cls:
        pos = cls.index(pos_label)
    else:
        raise ValueError(f"pos_label={pos_label!r} is not one of the training classes {cls}")
    return np.array([1 - pos, pos], dtype=np.intp)


def label_indices(
    y: ArrayLike,
    n_classes: int,
    labels: ArrayLike | None = None,
    *others: ArrayLike,
    pos_label: object = None,
) -> tuple[IntArray, ...]:
    """Class index (row of the cost matrix) of each label of ``y`` and of ``others``.

    With ``labels`` given, ``labels[k]`` is the class of row/column ``k``. Without, a binary
    problem (K = 2) follows :func:`costlib.costs._labels.binary_positive`: labels 0/1, bool or -1/1
    (1 is row 1, the positive class), or any two labels with ``pos_label`` naming the positive
    one; other labels are refused (sorting them could read the costs backwards). With K > 2,
    labels that are all integers in ``0..K-1`` are used as indices directly; otherwise the
    sorted distinct labels of all vectors must number exactly K. A missing label (NaN, None,
    ``<NA>``) is refused.
    """
    names = ("y_true", "y_pred", "y")[: 1 + len(others)]
    lengths = {name: len(label_array(v, name)) for v, name in zip((y, *others), names,
                                                                 strict=False)}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"label vectors have different lengths {lengths}")
    if labels is None and n_classes == 2:
        return tuple(p.astype(np.intp) for p in binary_positive((y, *others), names, pos_label))
    ys = [label_array(v, name) for v, name in zip((y, *others), names, strict=False)]
    if labels is not None:
        lab = np.asarray(labels)
        if lab.ndim != 1 or lab.shape[0] != n_classes or np.unique(lab).shape[0] != n_classes:
            raise ValueError(f"labels must be {n_classes} distinct values (one per cost matrix "
                             f"row), got {lab.tolist()}")
        if pos_label is not None and (n_classes != 2 or pos_label not in lab.tolist()):
            raise ValueError(f"pos_label={pos_label!r} is not one of labels={lab.tolist()} "
                             "(the class of each cost matrix row); pass one of them")
    elif pos_label is not None:
        raise ValueError(f"pos_label is for two classes; the costs are {n_classes}x{n_classes}: "
                         "pass labels= (the class of each row) instead")
    elif all(v.dtype.kind in "biu" and (v.size == 0 or (v.min() >= 0 and v.max() < n_classes))
             for v in ys):
        return tuple(v.astype(np.intp) for v in ys)
    else:
        lab = unique_labels(*ys)
        if lab.shape[0] != n_classes:
            raise ValueError(
                f"the labels {lab.tolist()} are not {n_classes} classes; pass labels= to say "
                "which class each cost matrix row/column is"
            )
    order = np.argsort(lab, kind="stable")
    out = []
    for name, v in zip(names, ys, strict=False):
        pos = np.searchsorted(lab[order], v)
        pos = np.clip(pos, 0, n_classes - 1)
        idx = order[pos]
        unknown = v[lab[idx] != v]
        if unknown.size:
            raise ValueError(f"{name} has label(s) {np.unique(unknown).tolist()[:5]} that are "
                             f"not in the matrix labels {lab.tolist()}")
        out.append(idx.astype(np.intp))
    return tuple(out)


def matrix_labels(matrix: object, labels: ArrayLike | None) -> ArrayLike | None:
    """The labels of a labelled CostMatrix/BenefitMatrix win; ``labels`` must then agree."""
    own = getattr(matrix, "labels", None) if isinstance(matrix, CostMatrix | BenefitMatrix) \
        else None
    if own is None:
        return labels
    if labels is not None and not np.array_equal(np.asarray(labels), own):
        raise ValueError(f"labels={np.asarray(labels).tolist()} disagree with the matrix's own "
                         f"labels {own.tolist()}")
    out: ArrayLike = own
    return out


def score_order(labels: ArrayLike | None, pos_label: object = None) -> IntArray:
    """Rows/columns (negative, positive) of a 2x2 matrix for a rule "high score → positive".

    Without ``labels`` the matrix is (negative, positive) already. With labels (a labelled
    matrix, or ``labels=``), the positive one is ``pos_label``, else the label ``1``/``True``
    of 0/1, bool or -1/1 labels; other labels need ``pos_label`` (which class do the scores
    rank?), else ``ValueError``.
    """
    if labels is None:
        return np.array([0, 1], dtype=np.intp)
    lab = np.asarray(labels).tolist()
    if pos_label is not None:
        if pos_label not in lab:
            raise ValueError(f"pos_label={pos_label!r} is not one of the labels {lab}")
        pos = lab.index(pos_label)
    elif standard_positive(lab):
        pos = lab.index(1)
    else:
        raise ValueError(f"labels {lab} do not say which class the scores rank (high score = "
                         "positive); pass pos_label= with the positive one")
    return np.array([1 - pos, pos], dtype=np.intp)
