"""The rating hand-off of the closed loop: which rows of a score stream to rate, and what to keep.

``costlib decide`` writes one decision record per input row (``schemas/decision.json``). The
rater-facing contract (docs/audit.md) asks for ratings of every record with
``threshold_decision == true`` or ``audit == true``, returned in the score stream with the
record's ``audit_probability`` on *every* row (rated or not: an unrated row with ``0 < p < 1``
is represented by the audit sample). :func:`attach_decisions` does that join on Arrow tables or
pandas frames (``decisions_frame``'s output): the stream gains ``to_rate`` and
``audit_probability``; after the labels come back for the
``to_rate`` rows, the table is the next ``costlib recalibrate`` input (with
``columns.audit_probability: audit_probability``).

Decision records carry ``item_id`` as a string (any id type becomes text in the contract); the
stream's ids are compared as text, per group. A stream row without a record is an error naming
how many, never a silent null, except for the rows the decide run dead-lettered (``undecided``:
its accounting says how many); a record repeated for one row is always an error (the row would
be weighted twice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    import pandas as pd

    Frame = TypeVar("Frame", pa.Table, pd.DataFrame)

__all__ = ["TO_RATE", "attach_decisions"]

#: The column :func:`attach_decisions` adds: rate this row (flagged or drawn by the audit).
TO_RATE = "to_rate"


def _arrow(table: object, name: str, columns: tuple[str, ...]) -> pa.Table:
    """``columns`` of ``table`` (a pyarrow Table or a pandas DataFrame) as an Arrow table;
    :class:`ValueError` naming the first missing column, or an unsupported type."""
    names = _column_names(table, name)
    missing = [c for c in columns if c not in names]
    if missing:
        hint = ""
        if name == "stream" and missing[0] in ("group", "item_id"):
            hint = (f" (pass {missing[0]}= with the name of the stream's "
                    f"{missing[0].replace('_', ' ')} column, the run config's "
                    f"columns.{missing[0]})")
        raise ValueError(f"{name}: no column {missing[0]!r}{hint}")
    if isinstance(table, pa.Table):
        return table.select(list(columns))
    return pa.Table.from_pandas(table[list(columns)], preserve_index=False)  # type: ignore[index]


def _column_names(table: object, name: str) -> list[str]:
    if isinstance(table, pa.Table):
        return list(table.column_names)
    columns = getattr(table, "columns", None)
    if columns is None or not hasattr(table, "iloc"):
        raise ValueError(f"{name}: a pyarrow Table or a pandas DataFrame is expected, not "
                         f"{type(table).__name__}")
    return [str(c) for c in columns]


def attach_decisions(stream: Frame, decisions: pa.Table | pd.DataFrame, *,
                     group: str = "group", item_id: str = "item_id",
                     probability: str = "audit_probability", undecided: int = 0) -> Frame:
    """``stream`` with ``to_rate`` (bool) and ``probability`` (float64) from its decision records.

    Parameters
    ----------
    stream : pyarrow.Table or pandas.DataFrame
        The score stream decide read (any column types; ``group`` and ``item_id`` name its
        group and item id columns, as the run config's ``columns.group`` and
        ``columns.item_id`` do). The result has the same type: a DataFrame keeps its index
        and columns and gains the two new ones.
    decisions : pyarrow.Table or pandas.DataFrame
        The decision records of that run: ``costlib_pipelines.io.frames.decisions_frame``
        (item ids in the stream's type) or the records as Arrow
        (``costlib_pipelines.decide.records.read_decisions``).
    probability : str
        Name of the column to add (the recalibrate config's ``columns.audit_probability``).
    undecided : int, default 0
        How many stream rows may have no record: the rows decide dead-lettered (its manifest's
        ``row_accounting.dead_lettered``; their reasons are in the run's dead letters). They
        get ``to_rate`` false and a null probability (recalibrate dead-letters them again, or
        counts them unrated). More rows without a record is an error.

    Returns
    -------
    pyarrow.Table or pandas.DataFrame
        The stream's rows in their order, plus ``to_rate = threshold_decision or audit`` (a null
        threshold decision, a group without a point, counts as not flagged) and the record's
        ``audit_probability`` (null when the run's audit was off).

    Raises
    ------
    ValueError
        A missing column, ``probability`` already in the stream, decision records repeated for
        one (group, item id), or more than ``undecided`` stream rows without a record (the
        message counts them and names the first).
    """
    stream_keys = _arrow(stream, "stream", (group, item_id))
    decisions = _arrow(decisions, "decisions", ("group", "item_id", "threshold_decision",
                                                "audit", "audit_probability"))
    names = _column_names(stream, "stream")
    if probability in names or TO_RATE in names:
        taken = probability if probability in names else TO_RATE
        raise ValueError(f"stream: already has a column {taken!r}")
    keys = pa.table({
        "__group": pc.cast(decisions.column("group"), pa.string()),
        "__item": pc.cast(decisions.column("item_id"), pa.string()),
        TO_RATE: pc.or_(pc.fill_null(decisions.column("threshold_decision"), False),
                        pc.fill_null(decisions.column("audit"), False)),
        probability: pc.cast(decisions.column("audit_probability"), pa.float64()),
    })
    counted = keys.group_by(["__group", "__item"]).aggregate([("__item", "count")])
    repeated = counted.filter(pc.greater(counted.column("__item_count"), 1))
    if repeated.num_rows:
        first = repeated.slice(0, 1).to_pylist()[0]
        raise ValueError(f"decisions: {repeated.num_rows} (group, item_id) pairs have more than "
                         f"one record, e.g. ({first['__group']!r}, {first['__item']!r})")
    n = stream_keys.num_rows
    rows = pa.table({
        "__group": pc.cast(stream_keys.column(group), pa.string()),
        "__item": pc.cast(stream_keys.column(item_id), pa.string()),
        "__row": pa.array(range(n), pa.int64()),
    })
    joined = rows.join(keys, ["__group", "__item"], join_type="left outer").sort_by("__row")
    unmatched = pc.is_null(joined.column(TO_RATE))
    missing_rows = pc.sum(pc.cast(unmatched, pa.int64())).as_py() or 0
    if missing_rows > undecided:
        first = joined.filter(unmatched).slice(0, 1).to_pylist()[0]
        raise ValueError(f"stream: {missing_rows} of {n} rows have no decision "
                         f"record (e.g. group {first['__group']!r}, item_id {first['__item']!r})"
                         f", more than the {undecided} the decide run dead-lettered "
                         "(undecided=): not the stream this decide run read")
    to_rate = pc.fill_null(joined.column(TO_RATE), False)
    if isinstance(stream, pa.Table):
        return stream.append_column(TO_RATE, to_rate).append_column(
            probability, joined.column(probability))
    out = stream.copy()
    out[TO_RATE] = to_rate.to_numpy()
    out[probability] = joined.column(probability).to_numpy()  # null: NaN
    return out
