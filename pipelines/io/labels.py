"""Reading the label column in every convention a score stream brings.

One rule: equivalent labels give identical runs, and a convention that could be read two ways
is refused with the fix. What a label column may hold:

- **bool**: true = positive, false = negative, null = not rated;
- **integers** (any width, pandas ``Int8`` with nulls included): 1 = positive, 0 = negative,
  null = not rated; another integer is dead-lettered (``invalid_label``);
- **floats** (what pandas gives for 0/1 labels with ``np.nan``): 1.0 = positive, 0.0 =
  negative, null or NaN = not rated; another whole number (2.0, -1.0) is dead-lettered
  (``invalid_label``) like the integer it equals; a fraction (0.5) stops the run
  (:class:`LabelError`): soft labels or probabilities are not ratings;
- **strings** (plain or dictionary-encoded, e.g. a pandas categorical) only with
  ``columns.label_positive`` set: the value equal to it is positive, every other value negative,
  null not rated. Without it a string column stops the run: which value is positive cannot be
  guessed (sorting would make ``"fraud"`` the negative class of ``"ok"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from costlib_pipelines.io.schema import SchemaError, is_string_type, label_type_problem

__all__ = ["LabelError", "label_type_problem", "read_labels"]

class LabelError(SchemaError):
    """A label column in a convention that cannot be read without a guess (message: file,
    column, fix)."""


def read_labels(
    arr: pa.Array, *, column: str, where: str, positive: Any = None
) -> tuple[NDArray[np.bool_], NDArray[np.bool_], NDArray[np.bool_] | None]:
    """``(rated, labels, invalid)`` of a label column (see the module doc).

    ``labels`` is meaningful where ``rated``; ``invalid`` marks rated rows to dead-letter as
    ``invalid_label`` (None when there is none). Raises :class:`LabelError` (``where`` names
    the file and row group) for a type that cannot be read and for fractional float labels.
    """
    n = len(arr)
    problem = label_type_problem(arr.type, column, positive)
    if problem:
        raise LabelError(f"{where}: {problem}")
    t = arr.type
    if pa.types.is_null(t):
        return np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), None
    if is_string_type(t):
        if pa.types.is_dictionary(t):
            arr = arr.cast(t.value_type)
        rated = ~_null_mask(arr)
        labels = pc.equal(arr, pa.scalar(str(positive), arr.type)).fill_null(False)
        return rated, labels.to_numpy(zero_copy_only=False).astype(bool), None
    if pa.types.is_boolean(t):
        rated = ~_null_mask(arr)
        labels = arr.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
        return rated, labels, None
    if pa.types.is_integer(t):
        rated = ~_null_mask(arr)
        codes = arr.fill_null(0).to_numpy(zero_copy_only=False)
        invalid = rated & (codes != 0) & (codes != 1)
        return rated, codes == 1, invalid if invalid.any() else None
    # floats: NaN is "not rated", like null
    values = arr.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
    rated = ~np.isnan(values)
    with np.errstate(invalid="ignore"):
        fraction = rated & (values != np.trunc(values))
    if fraction.any():
        first = int(np.flatnonzero(fraction)[0])
        raise LabelError(
            f"{where}: column '{column}' (label) holds {int(fraction.sum())} fractional "
            f"value(s), first {values[first]:g} at row {first}; labels are ratings, 1.0 "
            "positive and 0.0 negative (NaN or null: not rated), not scores or soft labels: "
            "write the rating as 0/1, or point columns.label at the rating column")
    invalid = rated & (values != 0) & (values != 1)
    return rated, rated & (values == 1), invalid if invalid.any() else None


def _null_mask(arr: pa.Array) -> NDArray[np.bool_]:
    if arr.null_count == 0:
        return np.zeros(len(arr), dtype=bool)
    return np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
