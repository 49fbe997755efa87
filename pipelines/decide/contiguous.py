"""Top-k sets decoded where they are read (``decoding.sets_contiguous: true``): no shuffle.

:func:`decode_contiguous_sets` (one batch) and :func:`decode_contiguous_batches` (several,
decoded together) check that every set is one run of rows, order each run as
:func:`costlib_pipelines.decide.sets.decode_sets` orders a set, and give the same records bit
for bit (:class:`ContiguousSets`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from costlib.decoding import optimal_topk_ragged
from costlib_pipelines.decide.records import _as_string, _counts
from costlib_pipelines.decide.sets import _as_dictionary, set_id_hashes, set_order
from costlib_pipelines.io.files import InputError

__all__ = [
    "ContiguousSets",
    "decode_contiguous_batches",
    "decode_contiguous_sets",
]


# --------------------------------------------------------------------------- contiguous sets
@dataclass(frozen=True)
class ContiguousSets:
    """A batch decided with its sets decoded in place (:func:`decode_contiguous_sets`).

    ``table`` holds every row of the batch in input order, the set rows with their top-k
    fields; ``hashes`` the :func:`set_id_hashes` of the batch's sets, one per set (for the
    check that no set spans two row groups,
    :class:`~costlib_pipelines.decide.transforms.CheckSetsFn`).
    """

    table: pa.Table
    counts: Counter
    hashes: NDArray[np.uint64]


def _group_sort_codes(groups: pa.Array | pa.ChunkedArray) -> NDArray[np.int64]:
    """Codes of the group column that compare as its strings do (UTF-8 byte order, nulls
    last): what :func:`~costlib_pipelines.decide.sets._sorted_sets` gets from a sorted
    dictionary."""
    array = _as_dictionary(groups)
    rank = np.empty(len(array.dictionary), dtype=np.int64)
    rank[pc.array_sort_indices(array.dictionary).to_numpy()] = np.arange(rank.size)
    codes = array.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.where(codes >= 0, rank[np.maximum(codes, 0)], rank.size)


def _order_in_runs(
    table: pa.Table, rows: NDArray[np.intp], starts: NDArray[np.intp], run: NDArray[np.int64],
    p: NDArray[np.float64],
) -> NDArray[np.intp] | None:
    """Order of the set rows ``rows`` of ``table`` (runs starting at ``starts``, ``run`` the
    run of every one of them) that sorts every run as
    :func:`~costlib_pipelines.decide.sets.decode_sets` sorts a set, or None when every run is in
    that order already.

    A run whose item ids strictly increase (UTF-8 byte order, as Arrow sorts strings) is in
    order whatever the other keys hold: one vectorised comparison of neighbouring items finds
    them, and only the other runs are sorted (:func:`set_order` on item id, probability,
    group, threshold decision, audit, audit probability, by run first, so every set stays in
    its run). Streams written set by set usually list a set's items in order: no sort at all.
    """
    items = _as_string(table.column("item_id").combine_chunks())
    if rows.size != table.num_rows:
        items = items.take(pa.array(rows))
    if rows.size < 2:
        return None
    # null where an item is null: such a pair is sorted below like any other out of order
    increasing = pc.less(items[:-1], items[1:]).fill_null(False).to_numpy(zero_copy_only=False)
    increasing[starts[1:] - 1] = True  # pairs across two runs order nothing
    if increasing.all():
        return None
    unordered = np.zeros(starts.size, dtype=bool)
    unordered[run[np.flatnonzero(~increasing)]] = True
    sub = np.flatnonzero(unordered[run])  # positions (in ``rows``) of the runs to sort
    take = pa.array(rows[sub])
    keys = pa.table({
        "set": run[sub],
        "item": items.take(pa.array(sub)),
        "p": p[sub],
        "group": _group_sort_codes(table.column("group").combine_chunks())[rows[sub]],
        "decision": table.column("threshold_decision").take(take),
        "audit": table.column("audit").take(take),
        "audit_probability": table.column("audit_probability").take(take),
    })
    order = np.arange(rows.size)
    order[sub] = sub[set_order(keys)]  # by run first: every set stays in its run
    return order


def decode_contiguous_sets(
    table: pa.Table, probabilities: NDArray[np.float64], in_set: NDArray[np.bool_],
    loss: str, params: dict[str, Any], *, source: str, row_group: int,
    valid_rows: NDArray[np.intp] | None = None, column: str = "set_id",
) -> ContiguousSets:
    """Decode the sets of one batch where they are (``decoding.sets_contiguous``).

    The rows ``in_set`` (a set id and a probability) must hold each set id in one run of
    consecutive rows: with ``r`` runs of equal set ids and ``d`` distinct ids, ``r == d``
    (vectorised over the set-id codes). Inside every run the items are ordered exactly as
    :func:`~costlib_pipelines.decide.sets.decode_sets` orders a set (:func:`_order_in_runs`: item
    id, probability, group, threshold decision, audit, audit probability), and all runs go to one
    :func:`costlib.decoding.optimal_topk_ragged` call: so each set gets the decisions, ``k``
    and expected loss, bit for bit, that the shuffle path gives it (the decoder's result for
    a set does not depend on the sets beside it). The top-k fields are written back in the
    batch's row order; no other column is copied.

    Raises
    ------
    InputError
        A set id in more than one run, naming the file, row group, set-id ``column`` (of the
        input), the set id and the rows (of the row group, ``valid_rows`` mapping the batch's
        rows to them) where its runs start.
    """
    return decode_contiguous_batches(
        [ContiguousBatch(table, probabilities, in_set, source, row_group, valid_rows, column)],
        loss, params)[0]


@dataclass(frozen=True)
class ContiguousBatch:
    """The arguments of :func:`decode_contiguous_sets` for one batch (``in_set`` has a row)."""

    table: pa.Table
    probabilities: NDArray[np.float64]
    in_set: NDArray[np.bool_]
    source: str
    row_group: int
    valid_rows: NDArray[np.intp] | None = None
    column: str = "set_id"


@dataclass(frozen=True)
class _SetRuns:
    """A batch's set rows (``rows``), its runs (``starts``, ``sizes``; one set each), their
    probabilities in decoding order and that order (None: as they are)."""

    rows: NDArray[np.intp]
    starts: NDArray[np.intp]
    sizes: NDArray[np.intp]
    values: NDArray[np.float64]
    order: NDArray[np.intp] | None
    hashes: NDArray[np.uint64]


def _set_runs(part: ContiguousBatch) -> _SetRuns:
    """The runs of a batch's set rows, checked (one run per set id) and ordered."""
    table, rows = part.table, np.flatnonzero(part.in_set)
    set_ids = _as_dictionary(table.column("set_id"))
    codes = set_ids.indices.fill_null(0).to_numpy(zero_copy_only=False)[rows]
    starts = np.concatenate([[0], np.flatnonzero(codes[1:] != codes[:-1]) + 1])
    run_codes = codes[starts]
    runs_of = np.bincount(run_codes, minlength=len(set_ids.dictionary))
    if (runs_of > 1).any():
        code = int(np.flatnonzero(runs_of > 1)[0])
        where = rows[starts[run_codes == code]]
        if part.valid_rows is not None:
            where = part.valid_rows[where]
        shown = ", ".join(str(int(r)) for r in where[:5]) + (", ..." if where.size > 5 else "")
        raise InputError(
            f"{part.source}: row group {part.row_group}: column {part.column}: set "
            f"{set_ids.dictionary[code].as_py()!r} is not contiguous: its rows form "
            f"{int(runs_of[code])} separate runs (starting at rows {shown}), but the config "
            f"declares decoding.sets_contiguous: true (every set's rows consecutive in one row "
            f"group); write the stream set by set, or set decoding.sets_contiguous: false to "
            f"gather sets with a shuffle")
    sizes = np.diff(np.append(starts, rows.size))
    run = np.repeat(np.arange(starts.size, dtype=np.int64), sizes)
    p = part.probabilities[rows]
    order = _order_in_runs(table, rows, starts, run, p)
    return _SetRuns(rows, starts, sizes, p if order is None else p[order], order,
                    set_id_hashes(set_ids.dictionary)[run_codes])


def decode_contiguous_batches(parts: Sequence[ContiguousBatch], loss: str,
                              params: dict[str, Any]) -> list[ContiguousSets]:
    """:func:`decode_contiguous_sets` of several batches, their sets decoded in one
    :func:`costlib.decoding.optimal_topk_ragged` call (the decoder's result for a set does not
    depend on the sets beside it, so every batch gets the same bits as alone; sets of one size
    are decoded together, and with ragged sizes a few batches together pay the decoder's
    per-size overhead once). Every batch must have a set row.
    """
    runs = [_set_runs(part) for part in parts]
    values = np.concatenate([r.values for r in runs])
    starts = np.concatenate([r.starts + base for r, base in zip(
        runs, np.cumsum([0, *(r.rows.size for r in runs)])[:-1].tolist(), strict=True)])
    result = optimal_topk_ragged(values, np.append(starts, values.size), loss, **params)
    out, row_at, set_at = [], 0, 0
    for part, r in zip(parts, runs, strict=True):
        n_rows, n_sets = r.rows.size, r.starts.size
        out.append(_with_topk_fields(
            part, r, result.selected[row_at:row_at + n_rows], result.k[set_at:set_at + n_sets],
            result.expected_loss[set_at:set_at + n_sets]))
        row_at, set_at = row_at + n_rows, set_at + n_sets
    return out


def _with_topk_fields(part: ContiguousBatch, runs: _SetRuns, chosen: NDArray[np.bool_],
                      set_k: NDArray[np.intp], set_loss: NDArray[np.float64]) -> ContiguousSets:
    """The batch's table with the top-k fields of its decoded sets, its counts and hashes."""
    table, rows, n = part.table, runs.rows, part.table.num_rows
    selected = np.zeros(n, dtype=bool)
    selected[rows if runs.order is None else rows[runs.order]] = chosen
    k = np.zeros(n, dtype=np.int64)
    k[rows] = np.repeat(set_k, runs.sizes)
    expected = np.zeros(n)
    expected[rows] = np.repeat(set_loss, runs.sizes)
    null = None if rows.size == n else ~part.in_set
    fields = {
        "topk_decision": pa.array(selected, pa.bool_(), mask=null),
        "k": pa.array(k, pa.int64(), mask=null),
        "expected_loss": pa.array(expected, pa.float64(), mask=null),
    }
    for name, column in fields.items():
        table = table.set_column(table.schema.get_field_index(name), name, column)
    counts = _counts(table)
    counts["topk_rows"] = int(rows.size)
    counts["topk_selected"] = int(np.count_nonzero(chosen))
    counts["topk_sets"] = int(runs.starts.size)
    return ContiguousSets(table, counts, runs.hashes)
