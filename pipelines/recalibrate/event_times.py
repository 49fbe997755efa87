"""The event-time range of a windowed run's input, from Parquet footers (or the column).

:func:`event_time_range` is recorded in a windowed run's manifest; ``costlib decide`` uses it
to tell complete windows from partial ones.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from costlib_pipelines.io.files import InputError, open_parquet

__all__ = ["event_time_range"]


#: Microseconds per unit of a Parquet TIMESTAMP logical type (``timeUnit``).
_US_PER_PARQUET_UNIT = {"milliseconds": 1000, "microseconds": 1, "nanoseconds": 0.001}
#: Microseconds per unit of an Arrow timestamp type.
_US_PER_ARROW_UNIT = {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 0.001}


def _as_us(value: int, us_per_unit: float) -> int:
    """A raw timestamp in microseconds, floored (as :mod:`costlib_pipelines.io.batches` floors
    them)."""
    return value * int(us_per_unit) if us_per_unit >= 1 else value // round(1 / us_per_unit)


def _statistics_bounds(chunk: pq.ColumnChunkMetaData) -> tuple[int, int] | None:
    """(min, max) in microseconds from a column chunk's footer statistics, if usable.

    Usable: INT64 physical values of a TIMESTAMP logical type with min/max set (INT96 and
    files written without statistics are not).
    """
    stats = chunk.statistics
    if (stats is None or not stats.has_min_max or stats.physical_type != "INT64"
            or stats.logical_type.type != "TIMESTAMP"):
        return None
    unit = json.loads(stats.logical_type.to_json()).get("timeUnit")
    if unit not in _US_PER_PARQUET_UNIT:
        return None
    per_unit = _US_PER_PARQUET_UNIT[unit]
    return _as_us(stats.min_raw, per_unit), _as_us(stats.max_raw, per_unit)


def _read_bounds(parquet: pq.ParquetFile, row_group: int, column: str,
                 path: str) -> tuple[int, int] | None:
    """(min, max) in microseconds of one row group's column, read; None when all null."""
    try:
        times = parquet.read_row_group(row_group, columns=[column]).column(0)
    except Exception as exc:
        raise InputError(f"{path}: row group {row_group} cannot be read ({exc})") from exc
    per_unit = _US_PER_ARROW_UNIT[times.type.unit]
    low_high = pc.min_max(times.cast(pa.int64()))
    if low_high["min"].as_py() is None:
        return None
    return _as_us(low_high["min"].as_py(), per_unit), _as_us(low_high["max"].as_py(), per_unit)


def _utc(micros: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=micros)).isoformat()


def event_time_range(paths: Sequence[str], column: str) -> dict[str, Any] | None:
    """The earliest and latest event time of the rows in ``paths``, as a windowed run reads them.

    Per row group the Parquet footer statistics of ``column`` give its min and max; a row group
    without usable statistics (none written, INT96) has that one column read. Times are floored
    to microseconds and naive times are UTC, as in the pipeline; null times are left out
    (they are dead-lettered). ``costlib decide`` uses the range to tell complete windows from
    partial ones.

    Returns
    -------
    dict or None
        ``min_utc`` and ``max_utc`` (ISO 8601), ``column``, and how many row groups were
        answered by ``row_groups_from_statistics`` / ``row_groups_read``; None when no row has
        an event time.
    """
    low = high = None
    from_statistics = read = 0
    for path in paths:
        parquet = open_parquet(path)
        names = [parquet.metadata.schema.column(i).path
                 for i in range(parquet.metadata.num_columns)]
        index = names.index(column)  # preflight checked the column exists
        for row_group in range(parquet.num_row_groups):
            meta = parquet.metadata.row_group(row_group)
            if meta.num_rows == 0:
                continue
            bounds = _statistics_bounds(meta.column(index))
            if bounds is None:
                bounds = _read_bounds(parquet, row_group, column, path)
                read += 1
            else:
                from_statistics += 1
            if bounds is not None:
                low = bounds[0] if low is None else min(low, bounds[0])
                high = bounds[1] if high is None else max(high, bounds[1])
    if low is None or high is None:
        return None
    return {"column": column, "min_utc": _utc(low), "max_utc": _utc(high),
            "row_groups_from_statistics": from_statistics, "row_groups_read": read}
