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

__all__ = ["binary_class_order", "binary_positive", "label_array", "standard_positive"]

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
