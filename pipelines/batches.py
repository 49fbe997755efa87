"""Validating one Arrow batch of the score stream: usable rows, unrated rows, dead letters.

Pure pyarrow + numpy (no Beam), so the same code runs in a DoFn, in a benchmark loop and in
tests. Every row of a batch ends up in exactly one bucket: ``used`` (rated and valid: it enters
the threshold grids), ``unrated`` (valid, label null) or a dead-letter reason. The first failing
check decides the reason, in this order:

``missing_group``, ``missing_item_id``, ``missing_event_time`` (windowed mode only),
``invalid_score`` (NaN or +-inf), ``invalid_weight`` (null, NaN, inf or negative),
``invalid_probability`` (decide only: NaN or outside [0, 1]), ``label_without_score`` (rated,
but no classifier scored the row).

Schema problems (a missing column, a column of the wrong type) are not row problems: they raise
:class:`SchemaError` naming the file and column, and stop the run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from pipelines.config import RunConfig

__all__ = ["REASONS", "SchemaError", "ValidatedBatch", "check_schema", "validate_batch"]

REASONS = (
    "missing_group",
    "missing_item_id",
    "missing_event_time",
    "invalid_score",
    "invalid_weight",
    "invalid_probability",
    "label_without_score",
)


class SchemaError(ValueError):
    """A file does not match the score-stream contract (message names file and column)."""


def _is_float_or_int(t: pa.DataType) -> bool:
    return pa.types.is_floating(t) or pa.types.is_integer(t)


def _is_string(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_id(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or _is_string(t)


def required_columns(
    config: RunConfig, *, windowed: bool, for_decisions: bool
) -> dict[str, tuple[str, callable, str]]:
    """Physical column -> (logical name, type check, expected type text)."""
    cols = config.columns
    needed = {
        cols["group"]: ("group", _is_string, "string"),
        cols["item_id"]: ("item_id", _is_id, "int64 or string"),
    }
    if not for_decisions:
        needed[cols["label"]] = ("label", lambda t: pa.types.is_boolean(t) or pa.types.is_null(t),
                                 "bool")
    for name in config.classifiers:
        needed[name] = ("classifier score", _is_float_or_int, "float")
    if windowed:
        needed[cols["event_time"]] = ("event_time", pa.types.is_timestamp, "timestamp")
    if cols.get("weight") and not for_decisions:
        needed[cols["weight"]] = ("weight", _is_float_or_int, "float")
    if for_decisions:
        if cols.get("probability"):
            needed[cols["probability"]] = ("probability", _is_float_or_int, "float")
        if cols.get("set_id"):
            needed[cols["set_id"]] = ("set_id", _is_id, "int64 or string")
    return needed


def check_schema(
    schema: pa.Schema, source: str, config: RunConfig, *, windowed: bool = False,
    for_decisions: bool = False,
) -> None:
    """Raise :class:`SchemaError` if a file's schema breaks the contract."""
    for column, (logical, ok, expected) in required_columns(
        config, windowed=windowed, for_decisions=for_decisions
    ).items():
        index = schema.get_field_index(column)
        if index < 0:
            raise SchemaError(
                f"{source}: missing column '{column}' (the {logical} column of the run config)"
            )
        actual = schema.field(index).type
        if not ok(actual):
            raise SchemaError(
                f"{source}: column '{column}' ({logical}) has type {actual}; expected {expected}"
            )


@dataclass
class ValidatedBatch:
    """The valid rows of one batch, as numpy arrays, and what happened to every row.

    ``scores`` has shape (n_valid, k) with ``-inf`` for null (did not score); ``rated`` marks
    rows with a label; ``labels`` is meaningful where ``rated``. ``group_codes`` index
    ``group_names``.
    """

    source: str
    row_group: int
    n_read: int
    group_codes: NDArray[np.intp]
    group_names: list[str]
    scores: NDArray[np.float64]
    rated: NDArray[np.bool_]
    labels: NDArray[np.bool_]
    weights: NDArray[np.float64] | None
    item_ids: pa.Array
    event_times_us: NDArray[np.int64] | None
    probabilities: NDArray[np.float64] | None
    set_ids: pa.Array | None
    valid_rows: NDArray[np.intp]
    dead_letters: pa.Table | None
    accounting: Counter = field(default_factory=Counter)

    def rated_rows(self):
        """``(row indices, group codes, scores, labels, weights)`` of the rated valid rows.

        Selected with one index and ``take`` (several times faster than boolean masks).
        """
        rows = np.flatnonzero(self.rated)
        return (
            rows,
            self.group_codes.take(rows),
            self.scores.take(rows, axis=0),
            self.labels.take(rows),
            None if self.weights is None else self.weights.take(rows),
        )


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _nulls(arr: pa.Array) -> NDArray[np.bool_] | None:
    """Null mask, or None when the column has no null (Arrow keeps the count: no pass)."""
    if arr.null_count == 0:
        return None
    return arr.is_null().to_numpy(zero_copy_only=False)


def _floats(arr: pa.Array) -> NDArray[np.float64]:
    """Values as float64 with NaN where null (callers keep the null mask separately)."""
    if pa.types.is_null(arr.type):
        return np.full(len(arr), np.nan)
    return arr.cast(pa.float64()).to_numpy(zero_copy_only=False)


def validate_batch(
    table: pa.Table,
    config: RunConfig,
    *,
    source: str,
    row_group: int,
    windowed: bool = False,
    for_decisions: bool = False,
) -> ValidatedBatch:
    """Split a batch into valid rows, unrated rows and dead letters (see the module doc)."""
    check_schema(table.schema, source, config, windowed=windowed, for_decisions=for_decisions)
    cols = config.columns
    n = table.num_rows
    reason = np.full(n, -1, dtype=np.int8)  # index into REASONS, -1 = valid

    def flag(mask: NDArray[np.bool_] | None, name: str) -> None:
        if mask is not None and mask.any():
            reason[(reason < 0) & mask] = REASONS.index(name)

    group = _column(table, cols["group"])
    flag(_nulls(group), "missing_group")
    item_ids = _column(table, cols["item_id"])
    flag(_nulls(item_ids), "missing_item_id")
    event_times = None
    if windowed:
        times = _column(table, cols["event_time"])
        flag(_nulls(times), "missing_event_time")
        # In the column's own unit, then floored to microseconds (a cast to "us" refuses to
        # drop nanoseconds, and truncation would round times before 1970 the wrong way).
        per_us = {"s": 1e-6, "ms": 1e-3, "us": 1, "ns": 1000}[times.type.unit]
        raw = times.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        event_times = raw * int(1 / per_us) if per_us < 1 else raw // per_us

    k = len(config.classifiers)
    scores = np.empty((n, k))
    unscored = None  # rows no classifier scored (only computed when some score is null)
    for j, name in enumerate(config.classifiers):
        arr = _column(table, name)
        values = _floats(arr)
        null = _nulls(arr)
        finite = np.isfinite(values)
        flag(~finite if null is None else ~null & ~finite, "invalid_score")
        scores[:, j] = values  # (values may be a read-only view of the Arrow buffer)
        if null is not None:
            scores[null, j] = -np.inf
        if j == 0:
            unscored = null
        elif unscored is not None:
            unscored = unscored & null if null is not None else None

    weights = None
    if cols.get("weight") and not for_decisions:
        warr = _column(table, cols["weight"])
        w = _floats(warr)
        flag(~(np.isfinite(w) & (w >= 0)), "invalid_weight")  # null -> NaN -> invalid
        weights = w

    probabilities = set_ids = None
    if for_decisions and cols.get("probability"):
        parr = _column(table, cols["probability"])
        p = _floats(parr)
        pnull = _nulls(parr)
        out_of_range = ~((p >= 0) & (p <= 1))
        flag(out_of_range if pnull is None else ~pnull & out_of_range, "invalid_probability")
        probabilities = p if pnull is None else np.where(pnull, np.nan, p)
    if for_decisions and cols.get("set_id"):
        set_ids = _column(table, cols["set_id"])

    if for_decisions:
        rated = np.zeros(n, dtype=bool)
        labels = np.zeros(n, dtype=bool)
    else:
        larr = _column(table, cols["label"])
        label_null = _nulls(larr)
        rated = np.ones(n, dtype=bool) if label_null is None else ~label_null
        if unscored is not None:
            flag(rated & unscored, "label_without_score")
        labels = (
            np.zeros(n, dtype=bool) if pa.types.is_null(larr.type)
            else larr.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
        )

    valid = reason < 0
    valid_rows = np.flatnonzero(valid)
    accounting: Counter = Counter(read=n)
    if for_decisions:
        accounting["decided"] = int(valid.sum())
    else:
        accounting["used"] = int((valid & rated).sum())
        accounting["unrated"] = int((valid & ~rated).sum())
    dead_letters = None
    if not valid.all():
        bad = np.flatnonzero(~valid)
        for code, count in zip(*np.unique(reason[bad], return_counts=True), strict=True):
            accounting[f"dead_letter.{REASONS[code]}"] = int(count)
        dead_letters = table.take(pa.array(bad)).append_column(
            "dead_letter_reason", pa.array([REASONS[c] for c in reason[bad]], pa.string())
        )
        dead_letters = dead_letters.append_column(
            "source_file", pa.array([source] * bad.size, pa.string())
        ).append_column(
            "row_group", pa.array(np.full(bad.size, row_group), pa.int64())
        ).append_column("row_in_row_group", pa.array(bad.astype(np.int64)))

    if valid.all():  # the common case: no copies
        def pick(a):
            return a
    else:
        take = pa.array(valid_rows)

        def pick(a):
            return a.take(take) if isinstance(a, pa.Array) else a[valid_rows]

    group_valid = pick(group)
    if pa.types.is_dictionary(group_valid.type):
        encoded = group_valid
    else:
        encoded = pc.dictionary_encode(group_valid)
    return ValidatedBatch(
        source=source,
        row_group=row_group,
        n_read=n,
        group_codes=encoded.indices.to_numpy(zero_copy_only=False).astype(np.intp),
        group_names=[str(g) for g in encoded.dictionary.to_pylist()],
        scores=pick(scores),
        rated=pick(rated),
        labels=pick(labels),
        weights=None if weights is None else pick(weights),
        item_ids=pick(item_ids),
        event_times_us=None if event_times is None else pick(event_times),
        probabilities=None if probabilities is None else pick(probabilities),
        set_ids=None if set_ids is None else pick(set_ids),
        valid_rows=valid_rows,
        dead_letters=dead_letters,
        accounting=accounting,
    )
