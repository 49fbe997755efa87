"""Top-k sets through the shuffle: bucketing, the shuffle encoding, sorting and decoding.

Set rows are bucketed by a stable hash of their set id (:func:`set_buckets`, :func:`split_sets`),
travel as Arrow IPC bytes (:func:`encode_sets`; read back by :func:`shuffled_rows` and
:func:`decode_shuffled`), and each bucket's sets are sorted (:func:`set_order`) and decoded by
:func:`costlib.decoding.optimal_topk_ragged` (:func:`decode_sets`). How the shuffle is laid
out is described in :mod:`costlib_pipelines.decide.pipeline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from costlib.decoding import optimal_topk_ragged
from costlib_pipelines.decide.records import COMPACT_SCHEMA, DICTIONARY_COLUMNS, _as_string

__all__ = [
    "set_buckets",
    "set_id_hashes",
]


#: Column carried through the shuffle next to the decision columns (dropped before writing).
PROBABILITY = "__probability"


def _value_buckets(values: pa.Array, n_buckets: int) -> NDArray[np.int64]:
    """Bucket of each value (SipHash of its UTF-8 string, mod ``n_buckets``).

    The strings go to pandas as ``bytes`` (their UTF-8 encoding, a zero-copy cast in Arrow):
    the same hashes as of ``str`` objects, without encoding each one (2-3x faster).
    """
    return (set_id_hashes(values) % np.uint64(n_buckets)).astype(np.int64)


def set_id_hashes(values: pa.Array) -> NDArray[np.uint64]:
    """SipHash (fixed key: the same in every process) of each set id's UTF-8 bytes, as
    ``pandas.util.hash_array`` gives for the ids as Python ``str``; no Python strings made."""
    distinct = _as_string(values).cast(pa.binary()).to_numpy(zero_copy_only=False)
    return pd.util.hash_array(distinct, categorize=False)


def _as_dictionary(array: pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        return array
    return pc.dictionary_encode(_as_string(array))


def set_buckets(set_ids: pa.Array | pa.ChunkedArray, n_buckets: int) -> NDArray[np.int64]:
    """Bucket of every row's set id: a stable hash (the same in every process) mod buckets.

    Only the distinct set ids of the array are hashed (``pandas.util.hash_array``, SipHash with
    a fixed key, of the id as a UTF-8 string); a dictionary-encoded array is hashed through its
    dictionary without re-encoding. Null set ids get bucket 0 (callers pass set rows only).
    """
    encoded = _as_dictionary(set_ids)
    bucket_of = _value_buckets(encoded.dictionary, n_buckets)
    indices = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
    return bucket_of[indices] if bucket_of.size else np.zeros(indices.size, dtype=np.int64)


def _compact_dictionary(array: pa.DictionaryArray, *, sort: bool = False) -> pa.DictionaryArray:
    """``array`` with only the dictionary values its rows use (sorted by value with ``sort``),
    as ``int32`` indices.

    With ``sort`` the result depends only on the row values, not on the dictionary ``array``
    arrived with: what the bucket files need to be identical for any split of the input.
    """
    indices = array.indices
    if array.null_count == len(array):  # no value used (an all-null column)
        return pa.DictionaryArray.from_arrays(pa.nulls(len(array), pa.int32()),
                                              array.dictionary.slice(0, 0))
    valid = None if array.null_count == 0 else indices.is_valid().to_numpy(
        zero_copy_only=False)
    codes = (indices if valid is None else indices.fill_null(0)).to_numpy(
        zero_copy_only=False)
    used = np.flatnonzero(np.bincount(codes if valid is None else codes[valid],
                                      minlength=len(array.dictionary)))
    values = array.dictionary.take(pa.array(used))
    if sort and len(values) > 1:
        by_value = pc.sort_indices(values).to_numpy()
        values = values.take(pa.array(by_value))
        used = used[by_value]
    position = np.zeros(max(len(array.dictionary), 1), dtype=np.int32)
    position[used] = np.arange(used.size, dtype=np.int32)
    return pa.DictionaryArray.from_arrays(
        pa.array(position[codes], pa.int32(), mask=None if valid is None else ~valid), values)


def _bucket_type(n_buckets: int) -> type:
    """The smallest integer type for bucket numbers (numpy radix-sorts 8 and 16 bit ints)."""
    return np.int8 if n_buckets <= 127 else np.int16 if n_buckets <= 32767 else np.int64


#: Dictionary columns with more values than this are compacted per bucket before the shuffle.
SMALL_DICTIONARY = 256


def split_sets(table: pa.Table, rows: NDArray[np.intp], n_buckets: int):
    """``(bucket, table)`` of ``table``'s ``rows`` per set-id bucket present, in bucket order.

    One ``take`` orders the rows by bucket (stable: batch order within a bucket); every part
    is a zero-copy slice of it. The set-id dictionary is split with the rows: each set id
    belongs to one bucket, so ordering the dictionary values by bucket gives every part the
    values of its own bucket only (a slice of the reordered dictionary). Other dictionary
    columns keep their dictionary when small (at most :data:`SMALL_DICTIONARY` values) and are
    compacted to the values their part uses otherwise.
    """
    set_ids = _as_dictionary(table.column("set_id"))
    value_bucket = _value_buckets(set_ids.dictionary, n_buckets).astype(_bucket_type(n_buckets))
    codes = set_ids.indices.fill_null(0).to_numpy(zero_copy_only=False)
    bucket = value_bucket[codes[rows]] if value_bucket.size else np.zeros(rows.size, np.int8)
    by_bucket = np.argsort(bucket, kind="stable")  # radix sort of small integers
    rows = rows[by_bucket]
    value_order = np.argsort(value_bucket, kind="stable")
    new_code = np.empty(value_order.size, dtype=np.int64)
    new_code[value_order] = np.arange(value_order.size)
    sorted_values = set_ids.dictionary.take(pa.array(value_order))
    value_starts = np.concatenate([[0], np.cumsum(np.bincount(value_bucket,
                                                              minlength=n_buckets))])
    row_starts = np.concatenate([[0], np.cumsum(np.bincount(bucket, minlength=n_buckets))])
    row_codes = new_code[codes[rows]]
    column = table.schema.get_field_index("set_id")
    large = [  # dictionary columns compacted per part
        (i, spec.name) for i, spec in enumerate(table.schema)
        if pa.types.is_dictionary(spec.type) and spec.name != "set_id"
        and max((len(c.dictionary) for c in table.column(i).chunks), default=0)
        > SMALL_DICTIONARY
    ]
    taken = table.take(pa.array(rows))
    for b in np.flatnonzero(np.diff(row_starts)).tolist():
        start, stop = int(row_starts[b]), int(row_starts[b + 1])
        low, high = int(value_starts[b]), int(value_starts[b + 1])
        part = taken.slice(start, stop - start)
        part = part.set_column(column, "set_id", pa.DictionaryArray.from_arrays(
            pa.array(row_codes[start:stop] - low, _index_type(high - low)),
            sorted_values[low:high]))
        for i, name in large:
            part = part.set_column(i, name, _compact_dictionary(part.column(i).combine_chunks()))
        yield int(b), part


#: The top-k fields of a decision record (set after decoding, so not in the shuffle).
TOPK_FIELDS = ("topk_decision", "k", "expected_loss")

#: Columns of the set rows after the shuffle: the decision columns without the top-k fields,
#: then the probability (:func:`decode_shuffled` returns exactly this schema).
SHUFFLE_SCHEMA = pa.schema([f for f in COMPACT_SCHEMA if f.name not in TOPK_FIELDS]
                           + [pa.field(PROBABILITY, pa.float64())])


def _index_type(size: int) -> pa.DataType:
    """The narrowest signed integer type that indexes a dictionary of ``size`` values."""
    return pa.int8() if size <= 2**7 else pa.int16() if size <= 2**15 else pa.int32()


def _narrowed(table: pa.Table) -> pa.Table:
    """``table`` without its all-null columns and with dictionary indices in the narrowest
    integer type (:func:`_index_type`): the same rows in fewer bytes.

    An all-null column costs its full width in an IPC stream (a double column 8.1 bytes a
    row), and a dictionary index 4; the FnApiRunner copies every shuffled byte several times
    (data plane, grouping buffer, re-encoding), so what is not sent is the cheapest to move.
    :func:`decode_shuffled` restores both from :data:`SHUFFLE_SCHEMA`.
    """
    fields, columns = [], []
    for spec, column in zip(table.schema, table.columns, strict=True):
        if column.null_count == len(column):
            continue
        if pa.types.is_dictionary(spec.type):
            size = max((len(chunk.dictionary) for chunk in column.chunks), default=0)
            narrow = pa.dictionary(_index_type(size), spec.type.value_type)
            if narrow != spec.type:
                spec, column = spec.with_type(narrow), column.cast(narrow)
        fields.append(spec)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def encode_sets(table: pa.Table) -> bytes:
    """Set rows as Arrow IPC stream bytes for the shuffle (parts of :func:`split_sets`).

    Pickling a sliced Arrow table would carry the buffers of the whole batch; the IPC stream
    holds only the rows of the slice, and Beam moves bytes without pickling them. All-null
    columns are left out and dictionary indices narrowed (:func:`_narrowed`).
    """
    table = _narrowed(table)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _check_shuffled(table: pa.Table) -> None:
    """Refuse a table that is not set rows of :func:`encode_sets`.

    Raises
    ------
    ValueError
        ``table`` holds a column :data:`SHUFFLE_SCHEMA` does not know, or one of another type
        (dictionary columns may have any index type).
    """
    unknown = sorted(set(table.column_names) - set(SHUFFLE_SCHEMA.names))
    if unknown:
        raise ValueError(f"shuffled set rows hold columns {unknown} that are not decision "
                         f"columns")
    for name, column in zip(table.column_names, table.columns, strict=True):
        want = SHUFFLE_SCHEMA.field(name).type
        if column.type != want and not (
                pa.types.is_dictionary(column.type) and pa.types.is_dictionary(want)
                and column.type.value_type == want.value_type):
            raise ValueError(f"shuffled set rows: column {name!r} has type {column.type}, "
                             f"expected {want}")


def _restored(table: pa.Table) -> pa.Table:
    """Set rows of :func:`encode_sets` in :data:`SHUFFLE_SCHEMA`: columns left out come back
    null, dictionary indices as ``int32`` (:func:`_check_shuffled` first)."""
    _check_shuffled(table)
    columns = []
    for spec in SHUFFLE_SCHEMA:
        if spec.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, spec.type))
            continue
        column = table.column(spec.name)
        columns.append(column if column.type == spec.type else column.cast(spec.type))
    return pa.Table.from_arrays(columns, schema=SHUFFLE_SCHEMA)


def shuffled_rows(payloads: Sequence[bytes]) -> pa.Table:
    """The set rows of :func:`encode_sets` payloads, concatenated, as they travelled.

    When every payload has the same schema (usually all of a bucket's), the table is the
    payloads' own: columns left out stay out and dictionary indices narrow, which
    :func:`decode_sets` takes as they are (no copy, no column of nulls to sort). Otherwise
    every payload is restored to :data:`SHUFFLE_SCHEMA` (:func:`_restored`), one cast per
    column and schema.

    Raises
    ------
    ValueError
        A payload is not set rows (:func:`_check_shuffled`).
    """
    same_schema: list[list[pa.Table]] = []
    for payload in payloads:
        table = pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
        for tables in same_schema:
            if tables[0].schema.equals(table.schema):
                tables.append(table)
                break
        else:
            _check_shuffled(table)
            same_schema.append([table])
    if not same_schema:
        return SHUFFLE_SCHEMA.empty_table()
    if len(same_schema) == 1:
        return pa.concat_tables(same_schema[0])
    return pa.concat_tables([_restored(pa.concat_tables(tables)) for tables in same_schema])


def decode_shuffled(payloads: Sequence[bytes]) -> pa.Table:
    """The set rows of :func:`encode_sets` payloads, concatenated, in :data:`SHUFFLE_SCHEMA`
    (:func:`shuffled_rows`, restored).

    Raises
    ------
    ValueError
        A payload is not set rows (:func:`_check_shuffled`).
    """
    return _restored(shuffled_rows(payloads))


def _sort_codes(array: pa.DictionaryArray) -> NDArray[np.int64]:
    """Codes of a dictionary array whose dictionary is sorted (nulls: after every value).

    Comparing them orders rows exactly as comparing their strings (UTF-8 byte order) with
    nulls last, Arrow's default.
    """
    codes = array.indices.fill_null(len(array.dictionary)).to_numpy(zero_copy_only=False)
    return codes.astype(np.int64)


def _string_prefixes(strings: pa.Array, width: int) -> NDArray[np.uint64] | None:
    """The first ``width`` (<= 8) bytes of every string as a big-endian integer, shorter
    strings padded with zero bytes: comparing prefixes orders strings by their first
    ``width`` bytes. None for an array with nulls or of another type than ``string``."""
    if strings.type != pa.string() or strings.null_count:
        return None
    n = len(strings)
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32)[
        strings.offset:strings.offset + n + 1].astype(np.int64)
    buffer = strings.buffers()[2]
    data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    prefix = np.zeros(n, dtype=np.uint64)
    if data.size == 0:
        return prefix
    start, end, last = offsets[:-1], offsets[1:], data.size - 1
    for j in range(width):
        position = start + j
        byte = data[np.minimum(position, last)].astype(np.uint64)
        byte[position >= end] = 0
        prefix = (prefix << np.uint64(8)) | byte
    return prefix


#: Bits of the sort key of :func:`set_order` that hold the set code (the rest: item bytes).
SET_BITS = 16


def set_order(keys: pa.Table) -> NDArray[np.intp]:
    """Row order by all columns of ``keys``, ascending, nulls last (like Arrow's sort).

    ``keys`` holds ``set`` (int codes >= 0 in set-id order, no nulls), ``item`` (string),
    then any tie-breaking columns; rows equal in every key keep their order (a stable sort).
    Fast path: one integer sort of ``set code << 48 | first 6 bytes of the item``; runs of
    rows that tie on that key (items of a set sharing their first 6 bytes, or repeated items)
    are then ordered by Arrow's sort over all keys and the row number, run by run (the order
    between runs is already right). Without such runs one integer sort is paid; with only
    such runs the cost is about Arrow's sort alone.
    """
    sort_keys = [(name, "ascending") for name in keys.column_names]
    sets = keys.column("set").to_numpy()
    width = (64 - SET_BITS) // 8
    prefix = None
    if sets.size and sets.max() < 2**SET_BITS:
        prefix = _string_prefixes(keys.column("item").combine_chunks(), width)
    if prefix is None:
        return pc.sort_indices(keys, sort_keys=sort_keys).to_numpy()
    key = (sets.astype(np.uint64) << np.uint64(64 - SET_BITS)) | prefix
    order = np.argsort(key)  # not stable (about 3x faster): rows that tie are ordered below
    key = key[order]
    same = key[1:] == key[:-1]
    if not same.any():
        return order
    tied = np.zeros(order.size, dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    run = np.cumsum(np.concatenate([[True], ~same]))[tied]  # run number of every tied row
    rows = order[tied]
    # by run, every key, then row number: what a stable sort gives rows equal in every key
    row = "row" + "_" * max(len(name) for name in keys.column_names)  # not a key's name
    sub = keys.take(pa.array(rows)).set_column(0, "set", pa.array(run)).append_column(
        row, pa.array(rows))
    order[tied] = rows[pc.sort_indices(sub, sort_keys=[*sort_keys, (row, "ascending")])
                       .to_numpy()]
    return order


def _sorted_sets(table: pa.Table) -> tuple[pa.Table, NDArray[np.int64]]:
    """Set rows sorted as :func:`decode_sets` describes, and the offsets of the sets.

    All-null columns are left out (they read the same in any order; :func:`decode_sets` puts
    them back), and dictionary columns with one value and no null are not sorted either. The
    chunks of every dictionary column share one dictionary first (``unify_dictionaries``), so
    joining them copies indices only; each dictionary column is then compacted to the values
    used, sorted (:func:`_compact_dictionary`), and every column taken once in the sorted
    order (no copy of the unsorted rows).
    """
    n = table.num_rows
    present = {name: column for name, column in zip(table.column_names, table.columns,
                                                    strict=True)
               if name not in TOPK_FIELDS and column.null_count < n}
    for name in DICTIONARY_COLUMNS:
        if name in present and not pa.types.is_dictionary(present[name].type):
            present[name] = pc.dictionary_encode(present[name])
    for name, column in present.items():
        # Payloads narrow their indices to their own dictionary (int8 for <= 128 values);
        # the union of many payloads' dictionaries needs wider ones (on Flink a bucket gets
        # many small payloads: unify_dictionaries refuses to overflow int8).
        if pa.types.is_dictionary(column.type) and column.type.index_type.bit_width < 32:
            present[name] = column.cast(pa.dictionary(pa.int32(), column.type.value_type))
    unified = pa.table(present).unify_dictionaries()
    columns, constant = {}, {}
    for name, column in zip(unified.column_names, unified.columns, strict=True):
        if not pa.types.is_dictionary(column.type):
            columns[name] = column
            continue
        array = column.combine_chunks()
        if len(array.dictionary) == 1 and array.null_count == 0:  # e.g. the loss: same order
            constant[name] = pa.DictionaryArray.from_arrays(np.zeros(n, np.int32),
                                                            array.dictionary)
        else:
            columns[name] = _compact_dictionary(array, sort=True)
    set_rank = _sort_codes({**columns, **constant}["set_id"])
    keys = {"set": set_rank, "item": columns["item_id"], "p": columns[PROBABILITY]}
    for key, name in (("group", "group"), ("decision", "threshold_decision"),
                      ("audit", "audit"), ("audit_probability", "audit_probability")):
        if name in columns:  # an all-null or constant column orders nothing
            keys[key] = _sort_codes(columns[name]) if name == "group" else columns[name]
    order = set_order(pa.table(keys))
    sorted_sets = set_rank[order]
    starts = np.flatnonzero(sorted_sets[1:] != sorted_sets[:-1]) + 1
    offsets = np.concatenate([[0], starts, [sorted_sets.size]]).astype(np.int64)
    take = pa.array(order)
    return pa.table({**{name: column.take(take) for name, column in columns.items()},
                     **constant}), offsets


def decode_sets(table: pa.Table, loss: str, params: dict[str, Any]) -> pa.Table:
    """Sort set rows by (set_id, item_id, ...) and decode every set; returns decision records.

    ``table`` holds decision columns plus :data:`PROBABILITY` (string or dictionary-encoded
    string columns with any index type, any number of chunks; a column of
    :data:`SHUFFLE_SCHEMA` that is missing is null, as in :func:`shuffled_rows`); every row
    has a set id and a probability. Rows are
    ordered by ``(set_id, item_id, probability, group, threshold_decision, audit,
    audit_probability)`` (strings in UTF-8 byte order, nulls last; the last two only order
    repeated items, so that every column of the output is the same whatever order the rows
    arrived in); set id and group are compared through their codes in sorted dictionaries,
    and item ids mostly through integer prefixes (:func:`set_order`). The sets, each now
    contiguous, go to one :func:`costlib.decoding.optimal_topk_ragged` call (which decodes the
    sets of each size together). The dictionary columns of the result hold the values used,
    sorted, so the output does not depend on how the rows were split into batches.
    """
    if table.num_rows == 0:
        return COMPACT_SCHEMA.empty_table()
    table, offsets = _sorted_sets(table)
    result = optimal_topk_ragged(table.column(PROBABILITY).to_numpy(), offsets, loss, **params)
    sizes = np.diff(offsets)
    columns = {
        "topk_decision": pa.array(result.selected, pa.bool_()),
        "k": pa.array(np.repeat(result.k, sizes).astype(np.int64)),
        "expected_loss": pa.array(np.repeat(result.expected_loss, sizes), pa.float64()),
    }
    n = table.num_rows
    return pa.Table.from_arrays(
        [columns[f.name] if f.name in columns else table.column(f.name)
         if f.name in table.column_names else pa.nulls(n, f.type) for f in COMPACT_SCHEMA],
        schema=COMPACT_SCHEMA)
