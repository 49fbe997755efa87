"""The decision records: the columns the decide stage reads, and the records it writes.

The config helpers say which input columns are read (:func:`decide_columns`) and how sets are
decoded (:func:`decoding_settings`, :func:`with_topk`, :func:`sets_contiguous`);
:func:`decision_table_and_audit` builds a batch's records (threshold decision, operating point,
audit fields; top-k fields null) in :data:`COMPACT_SCHEMA`, the columns of
``schemas/decision.json`` with the low-cardinality ones dictionary-encoded;
:func:`write_decisions` writes them as Parquet in exactly :data:`DECISION_SCHEMA`, and
:func:`read_decisions` reads a run's records back.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numpy.typing import NDArray

from costlib.audit import flagged_rows
from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.audit_columns import (
    AuditSettings,
    _audit_columns,
    _cell_counters,
    _floor_audit_columns,
)
from costlib_pipelines.io import min_risk
from costlib_pipelines.io.batches import ValidatedBatch
from costlib_pipelines.io.files import write_bytes_atomically
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.published_points import DecisionThresholds, GroupThresholds
from costlib_pipelines.io.records import arrow_schema
from costlib_pipelines.io.runs import latest_run_id, read_manifest

__all__ = [
    "DECISION_SCHEMA",
    "as_contract",
    "decision_columns",
    "decoding_settings",
    "read_decisions",
    "sets_contiguous",
    "write_decisions",
]


#: Arrow schema of the decision records (``schemas/decision.json``).
DECISION_SCHEMA = arrow_schema("decision.json")


# --------------------------------------------------------------------------- config helpers
def decoding_settings(config: RunConfig) -> dict[str, Any]:
    """``decoding`` of the config (loss, params, buckets; defaults from the schema)."""
    settings = dict(config.decoding)
    settings["params"] = dict(settings.get("params") or {})
    return settings


def with_topk(config: RunConfig) -> bool:
    """Top-k decoding runs iff the config names both a probability and a set id column."""
    return bool(config.columns.get("probability")) and bool(config.columns.get("set_id"))


def sets_contiguous(config: RunConfig) -> bool:
    """Top-k runs and the config declares every set one run inside one row group
    (``decoding.sets_contiguous``): sets are decoded where they are read, not shuffled."""
    return with_topk(config) and bool(config.decoding.get("sets_contiguous", False))


def decide_columns(config: RunConfig) -> list[str]:
    """Input columns the decide pipeline reads."""
    cols = config.columns
    names = [cols["group"], cols["item_id"], *config.classifiers]
    names += [cols[c] for c in ("probability", "set_id") if cols.get(c)]
    settings = min_risk.decide_settings(config)
    extra = [] if settings is None else settings.input_columns()
    return names + [c for c in extra if c not in names]


# --------------------------------------------------------------------------- per batch
#: Low-cardinality string columns: dictionary-encoded in memory and in the Parquet files.
DICTIONARY_COLUMNS = ("group", "set_id", "loss", "operating_point_method",
                      "operating_point_group", "operating_point_window_end")

#: Type of ``operating_point_window_end``.
WINDOW_END_TYPE = DECISION_SCHEMA.field("operating_point_window_end").type

#: :data:`DECISION_SCHEMA` with the :data:`DICTIONARY_COLUMNS` dictionary-encoded.
COMPACT_SCHEMA = pa.schema([
    f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in DICTIONARY_COLUMNS else f
    for f in DECISION_SCHEMA
])


def _as_string(array: pa.Array) -> pa.Array:
    if pa.types.is_string(array.type):
        return array
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    return array.cast(pa.string())


def _dictionary(
    indices: NDArray[np.integer], values: Sequence[Any], null: NDArray[np.bool_] | None = None,
    value_type: pa.DataType | None = None,
) -> pa.DictionaryArray:
    """A dictionary-encoded array (``null`` marks null rows; no values: all null)."""
    if not values:
        null = np.ones(indices.size, dtype=bool)
        indices = np.zeros(indices.size, dtype=np.int32)
    return pa.DictionaryArray.from_arrays(
        pa.array(indices.astype(np.int32, copy=False), pa.int32(),
                 mask=None if null is None or not null.any() else null),
        pa.array(list(values), value_type or pa.string()),
    )


def _distinct_codes(values: Sequence[Any]) -> tuple[list[Any], NDArray[np.int32]]:
    """Sorted distinct non-null values, and each value's index among them (0 for None)."""
    distinct = sorted({v for v in values if v is not None})
    index = np.array([distinct.index(v) if v is not None else 0 for v in values],
                     dtype=np.int32)
    return distinct, index


def decision_columns(
    batch: ValidatedBatch, thresholds: DecisionThresholds, rule: str, loss: str,
    audit: AuditSettings | None = None,
) -> pa.Table:
    """Decision records of a batch's valid rows (top-k fields null).

    The threshold decision is the comparison ``score >= threshold`` per classifier combined by
    ``rule``; rows whose group has no usable operating point get null. The columns are those of
    ``schemas/decision.json`` in its order, with the columns of :data:`DICTIONARY_COLUMNS`
    dictionary-encoded (cheap to build and to write; the files store
    them as plain Parquet strings, see :func:`write_decisions`).

    Audit fields (:func:`decision_table_and_audit`): without ``audit``, ``audit`` false and
    ``audit_probability`` null on every row.
    """
    return decision_table_and_audit(batch, thresholds, rule, loss, audit)[0]


#: Type of the ``set_id`` column of the decision columns (:data:`COMPACT_SCHEMA`).
SET_ID_TYPE = pa.dictionary(pa.int32(), pa.string())


def set_id_dictionary(values: pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    """Set ids as the decision columns hold them: string values, ``int32`` indices, every
    dictionary value once (one code per set: what the set-run check of
    :func:`~costlib_pipelines.decide.contiguous.decode_contiguous_sets` and the set grouping of the
    shuffle count on).

    Ids read from a file's dictionary pages (:meth:`DecideFileFn.process`) are taken as they
    are when their dictionary holds distinct, non-null strings (what Arrow's writer and most
    others write; only the dictionary is checked, not a string per row); anything else (ids
    stored as integers or plain strings, or a dictionary that repeats a value) is
    dictionary-encoded from its strings.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.type == SET_ID_TYPE:
        dictionary = values.dictionary
        if dictionary.null_count == 0 and pc.count_distinct(dictionary).as_py() == len(
                dictionary):
            return values
    return pc.dictionary_encode(_as_string(values))


def decision_table_and_audit(
    batch: ValidatedBatch, thresholds: DecisionThresholds, rule: str, loss: str,
    audit: AuditSettings | None = None,
) -> tuple[pa.Table, Counter]:
    """:func:`decision_columns` and the audit counters of the batch.

    With ``audit``, :func:`costlib.audit.audit_sample` of the rows' item ids (as strings),
    scores and flags, where a row counts as flagged iff its threshold decision is true: rows
    with a null threshold decision (no usable operating point) are audit candidates like
    unflagged rows, since audit rows are the only unbiased ratings such a group can get. The
    counters are ``audited`` and, per stratum ``h``, ``audit_unflagged.h`` (unflagged rows);
    empty without ``audit``. Ids are hashed only when ``audit`` is given.
    """
    n = batch.group_codes.size
    codes = batch.group_codes
    table, usable, entries = thresholds.lookup(batch.group_names)
    scores = batch.scores
    flagged = flagged_rows(scores, table[codes], rule)
    no_point = None if usable.all() else ~usable[codes]
    item_ids = _as_string(batch.item_ids)
    if audit is not None and audit.only_without_point:
        audited, audit_probability, counters = _floor_audit_columns(
            item_ids, scores, flagged, no_point, audit)
    else:
        candidates = flagged if no_point is None else flagged & ~no_point
        bands, depth_counters = scores, Counter()
        if audit is not None and audit.relative:
            proposed = np.full(table.shape, np.inf)  # rows: groups; +inf: no proposal
            for i, entry in enumerate(entries):
                if entry.proposed is not None:
                    proposed[i] = entry.proposed
            _depth, stratum, raised = audit.relative_strata(scores, table[codes], rule,
                                                            batch.group_names, codes,
                                                            proposed[codes])
            bands = stratum[:, None].astype(np.float64)
            depth_counters = _cell_counters(scores, audit.lattice, codes, batch.group_names)
            depth_counters["audit_proposed"] = int(np.count_nonzero(raised & ~candidates))
        audited, audit_probability, counters = _audit_columns(
            item_ids, bands, candidates, audit)
        counters.update(depth_counters)
    op_values, op_index = _distinct_codes([e.operating_point_group for e in entries])
    method_values = sorted({e.method for e in entries if e.method is not None})
    window_ends = _window_ends(entries, codes, usable, no_point)
    set_ids = (
        _dictionary(np.zeros(n, dtype=np.int32), []) if batch.set_ids is None
        else set_id_dictionary(batch.set_ids)
    )
    columns = {
        "group": _dictionary(codes, batch.group_names),
        "set_id": set_ids,
        "item_id": item_ids,
        "threshold_decision": pa.array(flagged, pa.bool_(), mask=no_point),
        "topk_decision": pa.nulls(n, pa.bool_()),
        "k": pa.nulls(n, pa.int64()),
        "expected_loss": pa.nulls(n, pa.float64()),
        "loss": _dictionary(np.zeros(n, dtype=np.int32), [loss]),
        "operating_point_method": _dictionary(np.zeros(n, dtype=np.int32), method_values,
                                              no_point),
        "operating_point_group": _dictionary(op_index[codes], op_values, no_point),
        "operating_point_window_end": window_ends,
        "audit": audited,
        "audit_probability": audit_probability,
        "min_risk_decision": pa.nulls(n, pa.bool_()),  # filled by min_risk.with_min_risk
        "expected_cost": pa.nulls(n, pa.float64()),
    }
    table = pa.Table.from_arrays([columns[f.name] for f in COMPACT_SCHEMA],
                                 schema=COMPACT_SCHEMA)
    return table, counters


def _window_ends(
    entries: Sequence[GroupThresholds], codes: NDArray[np.integer], usable: NDArray[np.bool_],
    no_point: NDArray[np.bool_] | None,
) -> pa.Array:
    """``operating_point_window_end`` of every row: its group's window end, null for batch
    operating points and where the group has no thresholds (all null in one step for batch)."""
    ends = [e.window_end if e.thresholds is not None else None for e in entries]
    if all(e is None for e in ends):
        return pa.nulls(codes.size, COMPACT_SCHEMA.field("operating_point_window_end").type)
    values, index = _distinct_codes(ends)
    has_end = np.array([e is not None for e in ends], dtype=bool)
    null = no_point if np.array_equal(has_end, usable) else ~has_end[codes]
    return _dictionary(index[codes], values, null, WINDOW_END_TYPE)


def as_contract(table: pa.Table) -> pa.Table:
    """Decision columns with dictionary columns decoded: exactly :data:`DECISION_SCHEMA`."""
    return table.cast(DECISION_SCHEMA)


def write_decisions(path: str, table: pa.Table) -> None:
    """Write decision records atomically as Parquet (zstd).

    The file schema is :data:`DECISION_SCHEMA` (dictionary columns are written as Parquet
    strings with dictionary pages, and no Arrow schema is stored, so readers get ``string``);
    column statistics are kept for ``group`` and ``threshold_decision`` only (statistics of the
    other columns cost ~30% of the write time and help no query we know of). Where rows carry
    top-k fields (set buckets), ``k`` and ``expected_loss`` get dictionary pages too: they are
    the same on all rows of a set, so the indices run-length encode (writes ~25% faster, files
    ~7% smaller); files without them are written exactly as before.
    """
    dictionary = list(DICTIONARY_COLUMNS)
    if "k" in table.column_names and table.column("k").null_count < table.num_rows:
        dictionary += ["k", "expected_loss"]
    sink = io.BytesIO()
    pq.write_table(
        table, sink, compression="zstd", store_schema=False, use_dictionary=dictionary,
        write_statistics=["group", "threshold_decision"],
    )
    write_bytes_atomically(path, sink.getvalue())


def _counts(table: pa.Table, sets: int = 0) -> Counter:
    decision = table.column("threshold_decision")
    counts = Counter(
        rows_written=table.num_rows,
        threshold_flagged=int(pc.sum(decision).as_py() or 0),
        threshold_null=decision.null_count,
    )
    if sets:
        counts["topk_rows"] = table.num_rows
        counts["topk_selected"] = int(pc.sum(table.column("topk_decision")).as_py() or 0)
        counts["topk_sets"] = sets
    return counts


def read_decisions(path: str) -> pa.Table:
    """All decision records of a decide run (output dir: its LATEST run; or a run dir)."""
    path = path.rstrip("/")
    latest = latest_run_id(path)
    if latest is not None:
        path = f"{path}/runs/{latest}"
    read_manifest(path)  # refuses an incomplete run
    files = sorted(
        m.path for r in FileSystems.match([f"{path}/decisions/*.parquet"])
        for m in r.metadata_list
    )
    tables = [pq.read_table(FileSystems.open(f)) for f in files]
    return pa.concat_tables(tables) if tables else DECISION_SCHEMA.empty_table()
