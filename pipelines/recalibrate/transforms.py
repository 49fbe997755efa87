"""Composite transforms and DoFns of the recalibration pipeline.

Elements are Arrow tables (one per Parquet row group) and numpy histograms, never Python rows.
All classes live in this module (never in ``__main__``) so that every runner can pickle them.

Batches are never elements of a PCollection in a file-based run: one DoFn reads a file's row
groups, validates each and histograms it (:class:`AggregateBatchesFn`), so only small partial
grids, counters and dead-letter tables cross stage boundaries (Beam pickles sampled elements to
estimate their size, which for whole batches cost ~70 MB per million rows). Its input is a file
path, or a ready ``(source, row_group, table)`` batch (as a TestStream provides).

Outputs of :class:`AggregateBatches`:

- ``grids``: ``(group, (shape, SparseCounts, rated_rows))`` partial grids, one per group present
  in a batch (and per period bucket in windowed mode, timestamped at the bucket start), plus the
  same rows summed under ``"__all__"``; valid unrated rows (label null) are the third channel
  of the counts (:class:`SumGrids`);
- ``accounting``: a Counter per batch (and, with ``plausibility.count_duplicate_item_ids``, one
  Counter of duplicate item ids per group); ``dead_letters``: ``(source, row_group, table)``;
- ``bootstrap``: ``(group, SparseBootstrapGrids)`` when bootstrap replicates are configured
  (replicate counts by occupied cell; made dense one group at a time in :func:`optimize_one`).

Every accounting counter is also a Beam metric ``Metrics.counter("costlib", name)``
(:func:`report_metrics`), incremented where it is produced, so the Dataflow and Flink UIs show
them while the job runs.

:class:`SumGrids` is the combining accumulator (adds partials in place into a dense array it
owns; compacts to sparse before the shuffle).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import apache_beam as beam
import numpy as np
import pandas as pd
import pyarrow as pa
from apache_beam import pvalue
from apache_beam.metrics import Metrics
from apache_beam.pvalue import PCollection
from apache_beam.transforms.window import GlobalWindow, TimestampedValue
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue
from numpy.typing import NDArray

from costlib.audit._weights import audit_weights
from costlib.thresholds._binned_sketch import SketchingBinner
from costlib.thresholds._bootstrap import SparseBootstrapGrids
from costlib.thresholds._edges import (
    decision_edges_from_sketch,
    fine_histogram,
    quantile_edges_from_histogram,
)
from costlib.thresholds._grid import (
    SparseCounts,
    SparseGrid,
    ThresholdGrid,
    design_weights,
    grouped_histograms,
    ht_variance_weights,
    merge_sparse,
    sum_sparse,
)
from costlib.thresholds._recalibration import ALL_GROUPS, optimize_group
from costlib.thresholds._score_sketch import EdgeSketch
from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.io.batches import PLAUSIBILITY, Plausibility, validate_batch
from costlib_pipelines.io.files import (
    UNIT_ROWS,
    InputError,
    RowGroupRange,
    as_stored,
    read_row_groups,
    row_group_ranges,
    write_parquet,
)
from costlib_pipelines.recalibrate.min_risk import MinRiskSettings, cost_weighted

__all__ = [
    "AggregateBatches",
    "AggregateOutputs",
    "CountDuplicateIds",
    "DataEdges",
    "ReadingUnits",
    "SumCounters",
    "SumGrids",
    "item_id_keys",
    "iter_batches",
    "report_metrics",
]

#: Namespace of the Beam metrics that mirror the accounting counters.
METRICS_NAMESPACE = "costlib"

MICROS_PER_DAY = 86_400 * 1_000_000


def iter_batches(element, columns: list[str] | None, dictionary: Sequence[str] = ()):
    """``(source, row_group, table)`` for every batch of an element.

    An element is a path (every row group of the file), a :class:`RowGroupRange` (its row
    groups), or one ready batch. String columns named in ``dictionary`` are read from the
    files' dictionary pages, as dictionary arrays (:func:`costlib_pipelines.io.files.
    read_row_groups`; a ready batch comes as it is).
    """
    if isinstance(element, str):
        for index, table in read_row_groups(element, columns, dictionary=dictionary):
            yield element, index, table
    elif isinstance(element, RowGroupRange):
        for index, table in read_row_groups(element.path, columns, start=element.start,
                                            stop=element.stop, dictionary=dictionary):
            yield element.path, index, table
    else:
        yield element


class SplitFilesFn(beam.DoFn):
    """A path -> its :class:`RowGroupRange` reading units (from the footer; see
    :func:`costlib_pipelines.io.files.row_group_ranges`)."""

    def __init__(self, target_rows: int = UNIT_ROWS):
        self.target_rows = target_rows

    def process(self, path: str):
        yield from row_group_ranges(path, self.target_rows)


class ReadingUnits(beam.PTransform):
    """Paths -> row-group ranges spread over workers (a Reshuffle after the footer split).

    The unit of parallel reading is a range of row groups, not a file: one big file's row
    groups reach different bundles and workers. Every row group is in exactly one unit, so the
    rows read still equal the footers' rows.
    """

    def __init__(self, target_rows: int = UNIT_ROWS):
        super().__init__()
        self.target_rows = target_rows

    def expand(self, paths):
        return (
            paths
            | "SplitFiles" >> beam.ParDo(SplitFilesFn(self.target_rows))
            | "SpreadUnits" >> beam.Reshuffle()
        )


def report_metrics(counter: Mapping[str, int]) -> None:
    """Add every accounting counter to the Beam metric ``costlib/<name>`` (Dataflow, Flink UIs)."""
    for name, value in counter.items():
        if value:
            Metrics.counter(METRICS_NAMESPACE, name).inc(int(value))


def item_id_keys(item_ids: pa.Array) -> NDArray[np.uint64]:
    """One uint64 key per item id: the id's bits for integers (exact), else a 64-bit hash.

    String ids are hashed with ``pandas.util.hash_array`` (SipHash, fixed key: the same in every
    process); two distinct ids collide with probability ~n²/2^65 among n ids of a group.
    """
    if pa.types.is_integer(item_ids.type):
        if item_ids.type != pa.uint64():
            item_ids = item_ids.cast(pa.int64())  # every other integer type fits
        return item_ids.to_numpy(zero_copy_only=False).view(np.uint64)
    if pa.types.is_dictionary(item_ids.type):
        item_ids = item_ids.cast(item_ids.type.value_type)
    values = item_ids.to_numpy(zero_copy_only=False).astype(object)
    return pd.util.hash_array(values, categorize=False)


def keys_per_group(batch) -> list[tuple[str, NDArray[np.uint64]]]:
    """``(group, sorted item-id keys)`` of a validated batch's valid rows, per group."""
    keys = item_id_keys(batch.item_ids)
    codes = batch.group_codes
    order = np.lexsort((keys, codes))
    codes, keys = codes[order], keys[order]
    present, starts = np.unique(codes, return_index=True)
    bounds = [*starts.tolist(), codes.size]
    return [(batch.group_names[code], keys[a:b])
            for code, a, b in zip(present.tolist(), bounds[:-1], bounds[1:], strict=True)]


class CountDuplicateIds(beam.CombineFn):
    """Sorted item-id keys of one group -> rows whose key appeared before (exact, per group).

    The accumulator is ``[distinct sorted keys, pending arrays, pending size, duplicates]``;
    pending arrays are merged into the distinct keys once they hold as many keys as it (so each
    key is sorted O(log n) times). Memory: 8 bytes per distinct (group, item id), plus at most
    as much pending.
    """

    def create_accumulator(self):
        return [np.zeros(0, dtype=np.uint64), [], 0, 0]

    def add_input(self, acc, keys):
        acc[1].append(keys)
        acc[2] += keys.size
        return self._maybe_merge(acc) if acc[2] >= max(acc[0].size, 1 << 16) else acc

    def merge_accumulators(self, accs):
        merged = self.create_accumulator()
        for acc in accs:
            merged[1] += [acc[0], *acc[1]]
            merged[2] += acc[0].size + acc[2]
            merged[3] += acc[3]
        return self._maybe_merge(merged)

    @staticmethod
    def _maybe_merge(acc):
        if not acc[1]:
            return acc
        everything = np.concatenate([acc[0], *acc[1]])
        distinct = np.unique(everything)
        return [distinct, [], 0, acc[3] + everything.size - distinct.size]

    def compact(self, acc):
        return self._maybe_merge(acc)

    def extract_output(self, acc):
        return int(self._maybe_merge(acc)[3])


def _duplicate_counter(element: tuple[str, int]) -> Counter:
    """``(group, duplicates)`` -> accounting counters (total, and per group when any)."""
    group, duplicates = element
    counter = Counter({f"{PLAUSIBILITY}duplicate_item_id": duplicates})
    if duplicates:
        counter[f"{PLAUSIBILITY}duplicate_item_id.{group}"] = duplicates
    report_metrics(counter)
    return counter


class SumCounters(beam.CombineFn):
    def create_accumulator(self):
        return Counter()

    def add_input(self, acc, counter):
        acc.update(counter)
        return acc

    def merge_accumulators(self, accs):
        out = Counter()
        for acc in accs:
            out.update(acc)
        return out

    def extract_output(self, acc):
        return dict(sorted(acc.items()))


def _is_shape(lattice) -> bool:
    return all(isinstance(n, (int, np.integer)) for n in lattice)


def lattice_shape(lattice) -> tuple[int, ...]:
    """The bin lattice's shape from the edges per classifier, or the shape itself (ints)."""
    if _is_shape(lattice):
        return tuple(int(n) for n in lattice)
    return tuple(e.size + 1 for e in lattice)


class SumGrids(beam.CombineFn):
    """Adds sparse partial grids per group, sparse while the group is small (inputs never modified).

    Elements are ``(lattice, SparseCounts, rated_rows)``: a partial grid (2 channels, negatives
    and positives; or 3 with the unrated weight as channel 2) and how many valid rated rows it
    holds; ``lattice`` is the edges per classifier or, as the pipeline sends them, only the
    lattice's shape (a tuple of ints: 2 bytes a group instead of the edges' kilobytes; the
    optimiser attaches the edges, :func:`optimize_one`). With ``columns.audit_probability``
    they are ``(lattice, SparseCounts, rated_rows, audited_rows)``, the last the rated audit
    rows (p < 1), which the grid's
    ``audited_rows`` sums. The output is ``None`` when the key had no rated row at all (only
    unrated rows: like a group without rows, it gets no operating point); otherwise a
    :class:`costlib.thresholds.ThresholdGrid`, or with ``compact_output=True`` (what the
    pipeline uses) a :class:`costlib.thresholds._grid.SparseGrid` that the optimising stage makes
    dense, one group at a time.

    An accumulator is ``[counts, edges, rated_rows, audited_rows, entries_added]`` where
    ``counts`` is

    - a list of :class:`SparseCounts` partials (a *sparse* accumulator: memory proportional to
      the occupied cells, so a worker can hold the accumulators of 100,000 small groups), merged
      by :func:`costlib.thresholds._grid.merge_sparse` whenever the pending partials hold more
      entries than the merged one;
    - a dense ``(channels, *shape)`` array once the group's entries reach
      :data:`DENSE_FRACTION` of the lattice's cells (dense is then no larger than sparse, and
      adding into it is the fastest), or once the entries of all partials added to it reach
      :data:`DENSE_WORK` times the cells: a group that keeps receiving partials whose cells
      mostly coincide (edges at quantiles spread a batch's rows over many cells, most of them
      the same each batch) would otherwise merge its whole union every few adds, while adding
      into a dense array costs a pass over the entries; at 0.5 the array (8 bytes a cell) is
      no larger than the entries the group was sent (16 bytes each). Lower values are faster
      and hold more: on 5M rows in 100 groups, auto edges, 0.125 saved 22 ms of 65 and held
      40 MB instead of 6.5;
    - a single :class:`SparseCounts` after :meth:`compact` (before Beam encodes it for the
      shuffle: most cells of a group's grid are empty).

    Every form holds the same exact sums (counts are multiples of the weight resolution), so
    the result does not depend on the order of adds and merges. A 2-channel partial widens to
    3 channels by adding an empty unrated channel (exact).
    """

    #: A group's accumulator becomes dense when its stored entries reach this share of cells.
    DENSE_FRACTION = 0.125
    #: ... or when the entries of the partials added to it reach this many times its cells.
    DENSE_WORK = 0.5

    def __init__(self, config: RunConfig, *, compact_output: bool = False):
        self.names = config.classifiers
        self.compact_output = compact_output

    @staticmethod
    def _cells(lattice, channels: int) -> int:
        return channels * math.prod(lattice_shape(lattice))

    @staticmethod
    def _channels(acc) -> int:
        counts = acc[0]
        if isinstance(counts, SparseCounts):
            return counts.channels
        if isinstance(counts, list):
            return max((c.channels for c in counts), default=2)
        return counts.shape[0]

    @staticmethod
    def _to_dense(acc, channels: int):
        """A new accumulator with a dense array of at least ``channels`` channels."""
        counts, edges, rated, audited, added = acc
        parts = counts if isinstance(counts, list) else [counts]
        channels = max([channels, *(p.channels if isinstance(p, SparseCounts) else p.shape[0]
                                    for p in parts)])
        dense = np.zeros((channels, *lattice_shape(edges)))
        for part in parts:
            if isinstance(part, SparseCounts):
                part.add_to(dense)
            else:
                dense[: part.shape[0]] += part
        return [dense, edges, rated, audited, added]

    def _settle(self, acc):
        """Merge a sparse accumulator's pending partials, or go dense (see the class doc)."""
        counts, edges = acc[0], acc[1]
        if not isinstance(counts, list) or len(counts) < 2:
            return acc
        total = sum(c.nnz for c in counts)
        channels = self._channels(acc)
        cells = self._cells(edges, channels)
        if total >= self.DENSE_FRACTION * cells or acc[4] >= self.DENSE_WORK * cells:
            return self._to_dense(acc, channels)
        if total - counts[0].nnz > counts[0].nnz:  # pending outweigh the merged: merge
            return [[merge_sparse(counts)], edges, acc[2], acc[3], acc[4]]
        return acc

    def create_accumulator(self):
        return None

    def add_input(self, acc, partial):
        edges, counts, rated, *audited = partial
        if acc is None:
            acc = [[], edges, 0, 0, 0]
        elif isinstance(acc[0], SparseCounts):
            acc = [[acc[0]], *acc[1:]]
        if isinstance(acc[0], list):
            acc[0].append(counts)
            acc[4] += counts.nnz
            acc = self._settle(acc)
        else:
            if acc[0].shape[0] < counts.channels:
                acc = self._to_dense(acc, counts.channels)
            counts.add_to(acc[0])
        acc[2] += int(rated)
        acc[3] += int(audited[0]) if audited else 0
        return acc

    def merge_accumulators(self, accs):
        accs = [acc for acc in accs if acc is not None]
        if not accs:
            return None
        edges = accs[0][1]
        rated = sum(acc[2] for acc in accs)
        audited = sum(acc[3] for acc in accs)
        added = sum(acc[4] for acc in accs)
        parts = []
        for acc in accs:
            parts += acc[0] if isinstance(acc[0], list) else [acc[0]]
        if any(isinstance(p, np.ndarray) for p in parts):  # new array: inputs stay untouched
            return self._to_dense([parts, edges, rated, audited, added], 2)
        return self._settle([parts, edges, rated, audited, added])

    def compact(self, acc):
        if acc is None or isinstance(acc[0], SparseCounts):
            return acc
        if isinstance(acc[0], list):
            return [merge_sparse(acc[0]), *acc[1:]]
        flat = acc[0].reshape(-1)
        cells = np.flatnonzero(flat != 0)  # a bool mask's nonzero is several times faster
        return [SparseCounts(cells=cells.astype(np.int64), counts=flat[cells],
                             channels=acc[0].shape[0]), *acc[1:]]

    def extract_output(self, acc):
        if acc is None or acc[2] == 0:
            return None
        if self.compact_output:
            counts, edges, _, audited, _ = self.compact(acc)
            return SparseGrid(edges=tuple(edges), counts=counts, names=self.names,
                              audited_rows=audited)
        if _is_shape(acc[1]):
            raise ValueError("SumGrids: partials keyed by lattice shape need compact_output=True "
                             "(the optimiser attaches the edges)")
        dense, edges, _, audited, _ = self._to_dense(acc, 2)
        return ThresholdGrid(edges=tuple(edges), pos=dense[1], neg=dense[0], names=self.names,
                             unrated=dense[2] if dense.shape[0] >= 3 else None,
                             audited_rows=audited,
                             variance=dense[3:5] if dense.shape[0] >= 5 else None,
                             design=dense[5:7] if dense.shape[0] == 7 else None)


class SumBootstrapGrids(beam.CombineFn):
    """Adds replicate grids by occupied cell
    (:class:`~costlib.thresholds._bootstrap.SparseBootstrapGrids`; exact, like
    :class:`SumGrids`). Partials are held in a list and merged in one step once :attr:`PENDING`
    of them have arrived, and on compacting and output, so merging ``n`` partials costs one sort
    of their cells rather than ``n`` pairwise unions."""

    PENDING = 64

    def create_accumulator(self):
        return []

    def _settle(self, acc):
        return [SparseBootstrapGrids.sum(acc)] if len(acc) > 1 else acc

    def add_input(self, acc, grids: SparseBootstrapGrids):
        acc.append(grids)
        return self._settle(acc) if len(acc) >= self.PENDING else acc

    def merge_accumulators(self, accs):
        merged = [part for acc in accs for part in acc]
        return self._settle(merged) if len(merged) >= self.PENDING else merged

    def compact(self, acc):
        return self._settle(acc)

    def extract_output(self, acc):
        return SparseBootstrapGrids.sum(acc) if acc else None


class FineHistogramFn(beam.DoFn):
    """Per batch, the fine histogram of each classifier's rated scores (for quantile edges)."""

    def __init__(self, config: RunConfig, columns: list[str] | None):
        self.config = config
        self.columns = columns
        self.low, self.high = config.grid["range"]
        self.resolution = config.grid["quantile_resolution"]
        self.plausibility = Plausibility.from_config(config)

    def process(self, element):
        dictionary = [self.config.columns["group"]]  # no string per row (validation encodes)
        for source, row_group, table in iter_batches(element, self.columns, dictionary):
            batch = validate_batch(table, self.config, source=source, row_group=row_group,
                                   plausibility=self.plausibility)
            scores = batch.rated_rows()[2]
            yield np.stack(
                [fine_histogram(scores[:, j], self.low, self.high, self.resolution)
                 for j in range(scores.shape[1])]
            )


def quantile_edges_from_fine(counts: np.ndarray | None, config: RunConfig) -> list[np.ndarray]:
    """Quantile edges per classifier from the merged fine histograms.

    Raises
    ------
    InputError
        A classifier has no rated score (every row unrated, dead-lettered or unscored), so
        there is nothing to place its quantile edges on.
    """
    low, high = config.grid["range"]
    if counts is None:  # no row group at all
        counts = np.zeros((len(config.classifiers), 1), dtype=np.int64)
    empty = [name for name, c in zip(config.classifiers, counts, strict=True) if not c.any()]
    if empty:
        raise InputError(
            f"grid.edges is 'quantile' but there are no rated rows to place quantile edges on "
            f"(no rated score of {', '.join(repr(n) for n in empty)}: every row is unrated, "
            "dead-lettered or unscored); use uniform or explicit edges, or more input")
    return [quantile_edges_from_histogram(c, low, high, config.n_edges) for c in counts]


class EdgeSketchFn(beam.DoFn):
    """Per batch, each classifier's :class:`~costlib.thresholds.EdgeSketch` of the rows that
    enter the grids (the same rows and weights as :meth:`AggregateBatchesFn.histograms`)."""

    def __init__(self, config: RunConfig, columns: list[str] | None):
        self.config = config
        self.columns = columns
        self.plausibility = Plausibility.from_config(config)
        self.min_risk = MinRiskSettings.from_config(config)

    def process(self, element):
        dictionary = [self.config.columns["group"]]  # no string per row (validation encodes)
        for source, row_group, table in iter_batches(element, self.columns, dictionary):
            batch = validate_batch(table, self.config, source=source, row_group=row_group,
                                   plausibility=self.plausibility)
            batch = cost_weighted(batch, table, self.min_risk)
            yield batch_edge_sketches(batch)


def batch_edge_sketches(batch) -> list[EdgeSketch]:
    """The edge sketch of every classifier over a validated batch's grid rows."""
    _, _, scores, labels, weights, unrated, _ = grid_rows(batch)
    return [EdgeSketch.from_rows(scores[:, j], labels, weights, unrated)
            for j in range(scores.shape[1])]


def _sum_sketches(parts) -> list[EdgeSketch] | None:
    """Classifier-wise sum of per-batch sketch lists (None when there is no batch)."""
    parts = list(parts)
    if not parts:
        return None
    return [EdgeSketch.sum(column) for column in zip(*parts, strict=True)]


class _SumSketches(beam.CombineFn):
    """Classifier-wise sum of edge sketches; bounded accumulators (sums every 16 inputs)."""

    def create_accumulator(self):
        return []

    def add_input(self, acc, sketches):
        acc.append(sketches)
        return [_sum_sketches(acc)] if len(acc) >= 16 else acc

    def merge_accumulators(self, accs):
        parts = [p for acc in accs for p in acc]
        return [_sum_sketches(parts)] if parts else []

    def extract_output(self, acc):
        return _sum_sketches(acc)


def decision_edges_from_sketches(sketches: list[EdgeSketch] | None,
                                 config: RunConfig) -> list[np.ndarray]:
    """The default (``grid.edges: auto``) edges per classifier from the merged sketches.

    Raises
    ------
    InputError
        A classifier has no finite score in any row that enters the grids.
    """
    n_edges = config.n_edges
    if sketches is None:
        sketches = [EdgeSketch.empty() for _ in config.classifiers]
    try:
        return [decision_edges_from_sketch(sketch, n_edges, name=name)
                for sketch, name in zip(sketches, config.classifiers, strict=True)]
    except ValueError as exc:
        raise InputError(f"grid.edges is 'auto': {exc} (every row is dead-lettered or "
                         "unscored); use uniform or explicit edges, or more input") from exc


class SumEdgeSketches(beam.PTransform):
    """Per-batch sketch lists -> one list per classifier, summed in the global window; exact
    and independent of order and sharding.

    With ``defaults`` (a first pass, whose edges the grid pass waits for) the sum is None when
    there is no batch; without, there is then no element (the sketches a grid pass carries to
    the next run: read as a side input with a default; three transforms fewer to build and
    run, which is most of what carrying them costs a small run). Every element is in the
    global window already (read from files, or emitted there by
    :meth:`AggregateBatchesFn.finish_bundle`).
    """

    def __init__(self, defaults: bool = True):
        super().__init__()
        self.defaults = defaults

    def expand(self, per_batch):
        combine = beam.CombineGlobally(_SumSketches())
        return per_batch | "Sum" >> (combine if self.defaults else combine.without_defaults())


class DataEdges(beam.PTransform):
    """Sources -> edges shared by every group, from a first pass over the data.

    ``grid.edges: auto``: each batch's edge sketches, summed (:class:`SumEdgeSketches`), then
    :func:`costlib.thresholds.decision_edges_from_sketch` per classifier; the summed sketches
    are kept in :attr:`sketches` (the run writes them for the next run,
    :mod:`costlib_pipelines.recalibrate.carried_edges`). ``quantile``: each batch's fine histograms
    of the rated scores, summed, then their quantiles.
    """

    def __init__(self, config: RunConfig, columns: list[str] | None):
        super().__init__()
        self.config = config
        self.columns = columns
        self.sketches = None

    def expand(self, sources):
        config = self.config
        if config.grid["edges"] == "auto":
            self.sketches = (sources | "PerBatch" >> beam.ParDo(EdgeSketchFn(config, self.columns))
                             | "Sketches" >> SumEdgeSketches())
            return self.sketches | "ToEdges" >> beam.Map(decision_edges_from_sketches, config)
        return (
            sources
            | "PerBatch" >> beam.ParDo(FineHistogramFn(config, self.columns))
            | "Global" >> beam.WindowInto(beam.window.GlobalWindows())
            | "Sum" >> beam.CombineGlobally(_sum_arrays)  # None when there is no batch
            | "ToEdges" >> beam.Map(quantile_edges_from_fine, config)
        )


def _sum_arrays(arrays):
    total = None
    for a in arrays:
        total = a.astype(np.int64, copy=True) if total is None else total + a
    return total


def grid_rows(batch):
    """Rows of a validated batch as they enter the grids, in :func:`audit_rows`' form.

    With audit probabilities, :func:`audit_rows`; without, every valid row (no copies: ``rows``
    and ``audited`` are None), unrated ones masked by ``unrated`` (None when there is none).
    """
    if batch.audit_probabilities is not None:
        return audit_rows(batch)
    unrated = None if batch.rated.all() else ~batch.rated
    return (None, batch.group_codes, batch.scores, batch.labels, batch.weights, unrated, None)


def audit_rows(batch):
    """Rows of a validated batch with audit probabilities as they enter the grids.

    Returns ``(rows, group_codes, scores, labels, weights, unrated, audited)`` over the rows
    that enter (:func:`costlib.audit.audit_weights`: unrated rows with ``0 < p < 1`` are
    represented by the audit sample and left out), with weights ``w / p`` on rated rows,
    ``unrated`` the gap mask (``None`` when there is no gap) and ``audited`` the rated audit
    rows (p < 1).
    """
    design = audit_weights(None if batch.rated.all() else ~batch.rated,
                          batch.audit_probabilities, batch.weights)
    rows = np.flatnonzero(design.keep)
    unrated = design.unrated.take(rows)
    return (rows, batch.group_codes.take(rows), batch.scores.take(rows, axis=0),
            batch.labels.take(rows), design.weights.take(rows),
            unrated if unrated.any() else None, design.audited.take(rows))


class AggregateBatchesFn(beam.DoFn):
    """Read, validate and histogram batches: partial grids per group, accounting, dead letters.

    For each batch: the accounting Counter and any dead-letter table go to tagged outputs, then
    the valid rows (rated, and unrated in a third channel) give one partial grid per group (and
    per period bucket if windowed), and the all-groups partial as their sum.
    """

    def __init__(self, config: RunConfig, columns: list[str] | None, windowed: bool,
                 with_bootstrap: bool, sketch_rows: bool = False):
        self.config = config
        self.columns = columns
        self.windowed = windowed
        self.with_bootstrap = with_bootstrap
        self.sketch_rows = sketch_rows  # edge sketches of the grid rows, for the next run
        window = config.windowing or {}
        self.period_us = round(window.get("period_days", 1) * MICROS_PER_DAY)
        # Resolved once, when the pipeline is built: every worker uses the same time range.
        self.plausibility = Plausibility.from_config(config)
        self.min_risk = MinRiskSettings.from_config(config)  # weight_rated_rows: cost weights

    def process(self, element, edges):
        # the group column comes as a dictionary array straight from the files' dictionary
        # pages (validation would dictionary-encode it anyway); dead letters get the column
        # back as the file stores it
        dictionary = [self.config.columns["group"]]
        read = dictionary if isinstance(element, (str, RowGroupRange)) else []
        for source, row_group, table in iter_batches(element, self.columns, read):
            batch = validate_batch(table, self.config, source=source, row_group=row_group,
                                   windowed=self.windowed, plausibility=self.plausibility)
            batch = cost_weighted(batch, table, self.min_risk)
            report_metrics(batch.accounting)
            yield pvalue.TaggedOutput("accounting", batch.accounting)
            if batch.dead_letters is not None:
                yield pvalue.TaggedOutput("dead_letters", (
                    source, row_group, as_stored(batch.dead_letters, source, read)))
            if self.plausibility.count_duplicate_item_ids and batch.group_codes.size:
                for keyed in keys_per_group(batch):
                    yield pvalue.TaggedOutput("item_ids", keyed)
            yield from self.histograms(batch, edges)

    def start_bundle(self):
        self._binner = None  # bins and sketches this bundle's rows; emitted once at its end

    def finish_bundle(self):
        merged = None if self._binner is None else self._binner.sketches()
        self._binner = None
        if merged is not None:
            yield pvalue.TaggedOutput(
                "edge_sketches", WindowedValue(merged, MIN_TIMESTAMP, [GlobalWindow()]))

    def _binner_for(self, edges) -> SketchingBinner:
        """This bundle's binner (every batch of a run is binned against the same edges)."""
        binner = self._binner
        if binner is None:
            binner = self._binner = SketchingBinner(edges)
        elif not all(a is b or np.array_equal(a, b)
                     for a, b in zip(binner.edges, edges, strict=True)):
            raise ValueError("edge sketches: batches of one bundle binned against other edges")
        return binner

    def histograms(self, batch, edges):
        """Partial grids of a batch's valid rows: ``(group, (shape, counts, rated_rows))``.

        Rated rows go to the negative/positive channels; when the batch has valid unrated rows
        (label null) they go to a third channel, in the same sort-and-count pass
        (:func:`costlib.thresholds._grid.grouped_histograms`). A batch without unrated rows gives
        exactly the 2-channel partials of the rated rows. Bootstrap replicates get the same rows.
        """
        n_groups = len(batch.group_names)
        rows, groups, scores, labels, weights, unrated, audited = grid_rows(batch)
        variances = None
        if batch.audit_probabilities is not None:
            # Horvitz–Thompson variance weights (1 - p) (w / p)^2 of the rated rows: channels
            # 3 and 4 of the partials (costlib.thresholds._grid.grouped_histograms)
            variances = ht_variance_weights(weights, batch.audit_probabilities.take(rows))
            if unrated is not None:
                variances[unrated] = 0.0
        if groups.size == 0 and (variances is None or not batch.group_codes.size):
            return
        if self.windowed:
            times = batch.event_times_us if rows is None else batch.event_times_us.take(rows)
            # every valid row's period (the design channels count represented rows too)
            buckets = np.unique(batch.event_times_us // self.period_us)
            codes = np.searchsorted(buckets, times // self.period_us) * n_groups + groups
        else:
            buckets = np.zeros(1, dtype=np.int64)
            codes = groups
        edges = tuple(edges)
        shape = tuple(int(e.size + 1) for e in edges)  # partials carry the shape, not the edges
        channels = 7 if variances is not None else (2 if unrated is None else 3)
        n_cells = channels * math.prod(shape)
        bins = None
        if self.sketch_rows:  # bin and sketch the rows from one key computation
            bins = self._binner_for(edges)(scores, labels, weights, unrated)
        partials = grouped_histograms(codes, scores, labels, weights, edges, unrated=unrated,
                                      variances=variances, bins=bins)
        if variances is not None:
            partials = self._with_design(batch, partials, edges, n_groups, buckets)
        if weights is None:  # counts are rows: a code's rated rows are its channels 0 and 1
            rated_cells = 2 * math.prod(shape)
            rated_per_code = {code: int(c.counts[:np.searchsorted(c.cells, rated_cells)].sum())
                              for code, c in partials.items()}
        else:
            rated_per_code = np.bincount(codes if unrated is None else codes[~unrated],
                                         minlength=buckets.size * n_groups)
        audited_per_code = None if audited is None else np.bincount(
            codes[audited], minlength=buckets.size * n_groups)
        per_bucket: dict[int, list] = {}
        for code, counts in partials.items():
            bucket_index, group_index = divmod(code, n_groups)
            rows_info = (int(rated_per_code[code]),) if audited_per_code is None else (
                int(rated_per_code[code]), int(audited_per_code[code]))
            per_bucket.setdefault(bucket_index, []).append((counts, rows_info))
            yield from self._emit(batch.group_names[group_index], (shape, counts, *rows_info),
                                  buckets[bucket_index])
        for bucket_index, parts in per_bucket.items():  # the all-groups grid, same rows
            total = sum_sparse([counts for counts, _ in parts], n_cells)
            rows_info = tuple(int(v) for v in np.sum([info for _, info in parts], axis=0))
            yield from self._emit(ALL_GROUPS, (shape, total, *rows_info),
                                  buckets[bucket_index])
        if self.with_bootstrap:
            rows = np.arange(groups.size) if rows is None else rows
            yield from self._bootstrap(batch, edges, codes, rows, buckets)

    def _with_design(self, batch, partials, edges, n_groups, buckets):
        """``partials`` widened to 7 channels: channels 5 and 6 hold the audit design's terms
        ``w² (1 - p) / p`` and ``p`` of every valid row with ``0 < p < 1`` (audited and
        represented rows alike; :func:`costlib.thresholds._grid.design_weights`,
        :attr:`costlib.thresholds.ThresholdGrid.design`), per group (and period bucket)."""
        sampled, worst, expected = design_weights(batch.weights, batch.audit_probabilities)
        if not sampled.any():
            return {code: c.with_channels(7) for code, c in partials.items()}
        rows = np.flatnonzero(sampled)
        codes = batch.group_codes.take(rows)
        if self.windowed:
            times = batch.event_times_us.take(rows) // self.period_us
            codes = np.searchsorted(buckets, times) * n_groups + codes
        scores = batch.scores.take(rows, axis=0)
        size = math.prod(e.size + 1 for e in edges)
        design = grouped_histograms(
            np.concatenate([codes, codes]), np.concatenate([scores, scores]),
            np.repeat([False, True], rows.size), np.concatenate([worst, expected]), edges)
        out = {}
        for code in sorted({*partials, *design}):
            parts = [p.with_channels(7) for p in (partials.get(code),) if p is not None]
            extra = design.get(code)
            if extra is not None:
                parts.append(SparseCounts(cells=extra.cells + 5 * size, counts=extra.counts,
                                          channels=7))
            out[code] = merge_sparse(parts)
        return out

    def _bootstrap(self, batch, edges, codes, rows, buckets):
        """Replicate grids of the valid rows per group and for all groups (tagged output).

        ``rows`` (and their ``codes``) are the rows the point grids got. Unrated rows (label
        null) enter the replicates' unrated channel with their own Poisson multipliers, so the
        intervals see the same coverage limit as the point estimate; with audit probabilities
        rated rows weigh ``w / p`` before their multipliers (:class:`BootstrapGrids`).
        """
        scores = batch.scores.take(rows, axis=0)
        weights = None if batch.weights is None else batch.weights.take(rows)
        rated = batch.rated.take(rows)
        labels = batch.labels.take(rows)
        if not rated.all():
            labels = np.where(~rated, np.nan, labels.astype(np.float64))
        audit = (None if batch.audit_probabilities is None
                 else batch.audit_probabilities.take(rows))
        n_groups = len(batch.group_names)
        names = self.config.classifiers
        item_ids = batch.item_ids.take(rows)
        if pa.types.is_dictionary(item_ids.type):
            item_ids = item_ids.dictionary_decode()
        item_ids = item_ids.to_numpy(zero_copy_only=False)
        boot = self.config.bootstrap
        group_labels = [*batch.group_names, ALL_GROUPS]
        all_codes = (codes // n_groups) * (n_groups + 1) + n_groups
        own_codes = (codes // n_groups) * (n_groups + 1) + codes % n_groups
        for code_array in (own_codes, all_codes):
            for code in np.unique(code_array).tolist():
                selected = code_array == code
                bucket_index, group_index = divmod(code, n_groups + 1)
                grids = SparseBootstrapGrids.from_scores(
                    scores[selected], labels[selected], edges, item_ids[selected],
                    None if weights is None else weights[selected],
                    n_replicates=boot["replicates"], seed=boot["seed"], names=names,
                    audit_probabilities=None if audit is None else audit[selected],
                )
                for out in self._emit(group_labels[group_index], grids, buckets[bucket_index]):
                    yield pvalue.TaggedOutput("bootstrap", out)

    def _emit(self, group, value, bucket):
        if self.windowed:
            yield TimestampedValue((group, value), int(bucket) * self.period_us / 1e6)
        else:
            yield group, value


class AggregateOutputs(NamedTuple):
    """The outputs of :class:`AggregateBatches` (see the module docstring)."""

    grids: PCollection
    accounting: PCollection
    dead_letters: PCollection
    bootstrap: PCollection
    edge_sketches: PCollection  # per bundle, summed over its batches (empty unless ``sketch_rows``)


class AggregateBatches(beam.PTransform):
    """Sources (paths or batches) -> partial grids keyed by group, plus tagged side outputs.

    With ``plausibility.count_duplicate_item_ids`` the item-id keys of every group are combined
    (:class:`CountDuplicateIds`) and the duplicate counts join the accounting; batch runs only
    (in windowed runs accounting panes accumulate, which would count duplicates again).
    """

    def __init__(self, config: RunConfig, edges, *, columns: list[str] | None = None,
                 windowed: bool = False, sketch_rows: bool = False):
        super().__init__()
        self.config = config
        self.edges = edges  # a list of arrays, or an AsSingleton side input
        self.columns = columns
        self.windowed = windowed
        self.sketch_rows = sketch_rows

    def expand(self, sources):
        with_bootstrap = self.config.bootstrap["replicates"] > 0
        fn = AggregateBatchesFn(self.config, self.columns, self.windowed, with_bootstrap,
                                self.sketch_rows)
        if fn.plausibility.count_duplicate_item_ids and self.windowed:
            raise ConfigError("plausibility.count_duplicate_item_ids is not supported with "
                              "windowing (batch runs only)")
        outputs = sources | beam.ParDo(fn, self.edges).with_outputs(
            "accounting", "dead_letters", "bootstrap", "item_ids", "edge_sketches",
            main="grids"
        )
        accounting = outputs.accounting
        if fn.plausibility.count_duplicate_item_ids:
            duplicates = (
                outputs.item_ids
                | "DuplicateIdsPerGroup" >> beam.CombinePerKey(CountDuplicateIds())
                | "DuplicateCounters" >> beam.Map(_duplicate_counter)
            )
            accounting = (accounting, duplicates) | "WithDuplicates" >> beam.Flatten()
        return AggregateOutputs(grids=outputs.grids, accounting=accounting,
                                dead_letters=outputs.dead_letters, bootstrap=outputs.bootstrap,
                                edge_sketches=outputs.edge_sketches)


class OptimizeGroupFn(beam.DoFn):
    """``(group, grid[, replicate grids])`` -> ``(group, (GroupResult, pane index))`` (windowed
    runs; :class:`~costlib_pipelines.recalibrate.window_shards.WriteWindows` keys them by shard)."""

    def __init__(self, config: RunConfig, in_force=None):
        self.config = config
        self.in_force = in_force  # costlib_pipelines.recalibrate.in_force.InForce, or None

    def process(self, element, edges=None, pane=beam.DoFn.PaneInfoParam):
        group, value = element
        grid, boot = split_grid_value(value)
        if grid is None:  # only unrated rows: no operating point (as for a group without rows)
            return
        result = optimize_one(self.config, group, grid, boot, edges, self.in_force)
        pane_index = 0 if pane is None else int(pane.index)
        yield group, (result, pane_index)


def split_grid_value(value):
    """``(grid, bootstrap grids or None)`` of a summed element (plain, or from CoGroupByKey)."""
    if isinstance(value, dict):  # from CoGroupByKey: {"grid": [...], "bootstrap": [...]}
        grid = value["grid"][0] if value["grid"] else None
        boot = value["bootstrap"][0] if value["bootstrap"] else None
        return grid, boot
    return value, None


def dense_grid(grid, edges=None) -> ThresholdGrid:
    """A compact grid made dense (with ``edges`` when it carries only its lattice shape); a
    dense grid as it is."""
    if isinstance(grid, SparseGrid):
        if edges is not None and _is_shape(grid.edges):
            grid = grid.with_edges(edges)
        grid = grid.to_grid()
    return grid


def optimize_one(config: RunConfig, group: str, grid, boot=None, edges=None, in_force=None):
    """One group's :class:`~costlib.thresholds.GroupResult`; a compact grid is made dense
    here (:func:`dense_grid`). Called on one group at a time, a worker holds one group's dense
    lattice at a time (:class:`~costlib_pipelines.recalibrate.shards.OptimizeGroupsFn` holds a
    bounded batch).
    ``in_force``: the run's thresholds in force
    (:class:`~costlib_pipelines.recalibrate.in_force.InForce`, or None); the config's ``in_force``
    section says whether
    :func:`~costlib.thresholds.optimize_group` keeps or weighs them."""
    grid = dense_grid(grid, edges)
    return optimize_group(
        group, grid, methods=config.methods, target=config.target, rule=config.rule,
        min_positives=config.min_positives, min_negatives=config.min_negatives,
        bootstrap=boot, level=config.bootstrap["level"], options=config.optimize_options,
        in_force=None if in_force is None else in_force.get(group),
        min_gain_z=config.in_force["min_gain_z"],
        keep_when_insufficient=config.in_force["keep_when_insufficient"],
        evidence_z=config.in_force["evidence_z"],
        unseen_rows=config.in_force["unseen_rows"],
    )


def dead_letter_name(source: str, row_group: int) -> str:
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    return f"part-{digest}-rg{row_group:05d}.parquet"


class WriteDeadLettersFn(beam.DoFn):
    """Each batch's bad rows to their own Parquet file (deterministic name: idempotent)."""

    def __init__(self, directory: str):
        self.directory = directory

    def process(self, element):
        source, row_group, table = element
        path = f"{self.directory}/{dead_letter_name(source, row_group)}"
        write_parquet(path, table)
        yield path
