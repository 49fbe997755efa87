"""Per-group optimisation and records, sharded by group range (batch recalibration).

Every group is optimised, given its fallback and turned into records on whichever worker holds
it; no stage sees all groups' grids or results. The stages:

1. The all-groups grid (``"__all__"``) is optimised on its own (:func:`optimize_parent`): its
   result is the fallback parent, a side input of step 3.
2. The sorted group names give the *shard boundaries* (:class:`ShardBoundaries`: every
   :data:`GROUPS_PER_SHARD`-th name), a side input of step 3 (names only, no grids).
3. :class:`OptimizeGroupsFn` makes each group's compact grid dense, optimises it (a bounded
   batch of groups at a time, whose graph-method paths are solved together), applies the
   fallback (:func:`costlib.thresholds.apply_fallback` with the parent) and builds
   its ``operating_point.json`` records, their JSON lines and its PN curves; they are buffered
   per shard and leave the DoFn as zstd Parquet chunks of at most :data:`FLUSH_GROUPS` groups
   (bytes, not Python rows, cross the shuffle); at most :data:`MAX_BUFFERED_GROUPS` groups'
   outputs are buffered in all, besides the dense grids of one pending batch.
4. :class:`WriteShardFn` (one shard per element, in parallel) sorts a shard's chunks by group
   and writes ``shards/operating_points-NNNNN.{parquet,jsonl}`` and
   ``shards/pn_curves-NNNNN.parquet``.
5. The last stage (the publish stage, or :class:`AssembleShardsFn`), which gets the written
   shard ids as a side input, streams the shards, in shard order (= group order), into the
   run's ``operating_points.parquet``/``.jsonl`` and ``pn_curves.parquet``
   (:func:`assemble_shards`: one Parquet row group per shard; memory: one shard), then
   deletes ``shards/``. Readers keep their files, with
   the records in the same order as before (sorted by group, then method).

Shards are ranges of sorted names, so concatenating them in shard order gives the records
sorted by group; within a group, records keep the method order (the sorts are stable).
"""

from __future__ import annotations

import bisect
import io
import math
from collections.abc import Iterable, Iterator, Sequence

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from costlib.thresholds.grid import ThresholdGrid
from costlib.thresholds.loop import (
    ALL_GROUPS,
    GroupResult,
    apply_fallback,
    is_sufficient,
)
from costlib.thresholds.point import graph_batch_size, prepare_graph_paths
from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.files import parquet_bytes, write_bytes_atomically, write_parquet
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.records import (
    PN_CURVE_SCHEMA,
    arrow_schema,
    capacity_fields,
    operating_point_records,
    pn_curve_records,
    point_settings,
    records_to_jsonl,
    records_to_table,
)
from costlib_pipelines.pause import pause_point
from costlib_pipelines.recalibrate.capacity import capacity_point, not_allocated_reason
from costlib_pipelines.recalibrate.grids import dense_grid
from costlib_pipelines.recalibrate.optimizing import optimize_one, split_grid_value
from costlib_pipelines.recalibrate.volume_guard import VOLUMES, decision_volumes

__all__ = [
    "FLUSH_GROUPS",
    "GROUPS_PER_SHARD",
    "MAX_BUFFERED_GROUPS",
    "PENDING_BYTES",
    "AssembleShardsFn",
    "OptimizeGroupsFn",
    "ShardBoundaries",
    "WriteShardFn",
    "assemble_shards",
    "group_outputs",
    "optimize_parent",
    "records_with_lines",
    "shard_of",
]

#: Groups per records shard (a shard is sorted and written by one worker).
GROUPS_PER_SHARD = 2000
#: Groups of one shard buffered in :class:`OptimizeGroupsFn` before they leave as a chunk.
FLUSH_GROUPS = 256
#: Groups buffered over all shards before every buffer is flushed (bounds a worker's memory
#: whatever the number of shards: ~30 KB a group with its PN curves as Python lists).
MAX_BUFFERED_GROUPS = 2048
#: Bytes of bootstrap replicates (``SparseBootstrapGrids.nbytes``: replicates x occupied
#: cells, not bounded by the lattice size) that groups waiting for their graph batch may hold;
#: a batch is optimised early once its groups reach it.
PENDING_BYTES = 64 << 20
#: Column carrying each record's JSON line through the shuffle (not written to Parquet).
JSONL_COLUMN = "__jsonl"


class ShardBoundaries(beam.CombineFn):
    """Group names -> the sorted boundary names of the shards (every ``size``-th name).

    Shard ``i`` holds the names ``n`` with ``boundaries[i-1] <= n < boundaries[i]``
    (:func:`shard_of`). Only names are combined, never grids.
    """

    def __init__(self, size: int = GROUPS_PER_SHARD):
        self.size = size

    def create_accumulator(self):
        return set()

    def add_input(self, acc, name):
        acc.add(name)
        return acc

    def merge_accumulators(self, accs):
        merged = set()
        for acc in accs:
            merged |= acc
        return merged

    def extract_output(self, acc):
        return sorted(acc)[self.size::self.size]


def shard_of(boundaries: Sequence[str], group: str) -> int:
    """The shard of ``group``: how many boundaries are <= it (code point order, as ``sorted``)."""
    return bisect.bisect_right(boundaries, group)


def optimize_parent(element, config: RunConfig, edges,
                    in_force=None) -> Iterator[GroupResult | None]:
    """The all-groups result (the fallback parent), or None when it has no rated row; nothing
    for any other group (a ``FlatMap`` over every group's summed grid)."""
    group, value = element
    if group != ALL_GROUPS:
        return
    grid, boot = split_grid_value(value)
    yield None if grid is None else optimize_one(config, group, grid, boot, edges, in_force)


def _table_bytes(table: pa.Table) -> bytes:
    return parquet_bytes(table)


def _read_table(data: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(data))


class OptimizeGroupsFn(beam.DoFn):
    """``(group, compact grid)`` -> ``(shard, (records chunk, curves chunk))`` (see the module).

    Side inputs: the grid ``edges``, ``parent`` (:func:`optimize_parent`'s result) and
    ``boundaries`` (:class:`ShardBoundaries`). Groups are made dense and optimised in batches
    of :func:`costlib.thresholds.point._optimize.graph_batch_size` (at most
    :data:`costlib.thresholds.point._optimize.GRAPH_BATCH_CELLS` lattice cells, e.g. 100 groups of
    102 x 102 or 15 of 257 x 257; fewer once their bootstrap replicates reach
    :data:`PENDING_BYTES`), so that the graph method solves their paths together (with the
    graph method and k = 2 only; otherwise one group at a time); records are buffered per
    shard and flushed every :data:`FLUSH_GROUPS` groups and at the bundle's end. The side
    inputs of the last element serve the pending batch in ``finish_bundle``: this DoFn runs in
    the global window (batch runs) only.
    """

    def __init__(self, config: RunConfig, run_id: str, flush_groups: int = FLUSH_GROUPS,
                 in_force=None):
        self.config = config
        self.in_force = in_force  # costlib_pipelines.recalibrate.in_force.InForce, or None
        self.run_id = run_id
        self.flush_groups = flush_groups
        self.settings = point_settings(config)
        # Batches pay only where paths are solved side by side: the graph method with k = 2.
        self.batched = "graph" in config.methods and len(config.classifiers) == 2

    def start_bundle(self):
        self.buffers: dict[int, list] = {}
        self.buffered = 0
        self.pending: list[tuple[str, ThresholdGrid, object]] = []  # dense, not yet optimised
        self.pending_bytes = 0  # bootstrap replicates held by the pending groups
        self.side_inputs = None  # (edges, parent, boundaries, allocation) of the pending groups
        self.volumes: list[tuple[str, float, float]] = []  # the volume guard's, per group

    def process(self, element, edges, parent, boundaries, allocation=None):
        pause_point("recalibrate.optimize")
        group, value = element
        if group == ALL_GROUPS:
            yield from self._add(group, parent, parent, boundaries)
            return
        grid, boot = split_grid_value(value)
        if grid is None:  # only unrated rows: no operating point
            return
        grid = dense_grid(grid, edges)
        self.pending.append((group, grid, boot))
        self.pending_bytes += int(getattr(boot, "nbytes", 0))
        self.side_inputs = (edges, parent, boundaries, allocation)
        if (not self.batched or len(self.pending) >= graph_batch_size(grid.shape)
                or self.pending_bytes >= PENDING_BYTES):
            yield from self._optimize_pending()

    def finish_bundle(self):
        outputs = list(self._optimize_pending())
        for shard, buffer in sorted(self.buffers.items()):
            outputs.append((shard, self._chunk(buffer)))
        self.buffers, self.buffered = {}, 0
        for output in outputs:
            yield WindowedValue(output, GlobalWindow().max_timestamp(), [GlobalWindow()])
        volumes, self.volumes = self.volumes, []
        for volume in volumes:
            yield TaggedOutput(VOLUMES, WindowedValue(volume, GlobalWindow().max_timestamp(),
                                                      [GlobalWindow()]))

    def _optimize_pending(self):
        """Optimise the pending groups, their graph-method paths solved together
        (:func:`costlib.thresholds.point._optimize.prepare_graph_paths`; the points are those of
        each group optimised alone)."""
        if not self.pending:
            return
        pending, self.pending, self.pending_bytes = self.pending, [], 0
        edges, parent, boundaries, allocation = self.side_inputs
        config = self.config
        if self.batched:
            prepare_graph_paths(
                [grid for _, grid, _ in pending
                 if is_sufficient(grid, config.min_positives, config.min_negatives)],
                config.rule)
        for group, grid, boot in pending:
            result = optimize_one(config, group, grid, boot, edges, self.in_force)
            yield from self._add(group, result, parent, boundaries, grid, allocation)

    def _add(self, group: str, result: GroupResult | None, parent, boundaries,
             grid: ThresholdGrid | None = None, allocation=None):
        """Buffer a group's outputs in its shard; yield the chunks that are due.

        With a shared capacity (``capacity.total``) every group with a ``grid`` (not
        ``__all__``) also gets its ``capacity`` record from ``allocation``
        (:func:`costlib_pipelines.recalibrate.capacity.capacity_point`)."""
        if result is None:
            return
        if parent is not None:
            result = apply_fallback({group: result, ALL_GROUPS: parent},
                                    fallback=self.config.fallback)[group]
        fields = None
        if grid is not None and self.config.allocates_capacity:
            result, entry = capacity_point(group, grid, result, allocation, self.config)
            fields = capacity_fields(
                entry, float(self.config.capacity["total"]),
                math.nan if allocation is None else allocation["multiplier"])
            if entry is None:  # the record says why it has no thresholds
                fields["reason"] = not_allocated_reason(grid, self.config)
        if grid is not None and self.in_force is not None:  # the volume guard's figures
            self.volumes.append(decision_volumes(
                group, grid, result, self.config.decision_method, self.config.rule,
                self.in_force.get(group)))
        shard = shard_of(boundaries, group)
        buffer = self.buffers.setdefault(shard, [])
        buffer.append(group_outputs(result, self.config, self.run_id, self.settings,
                                    capacity=fields))
        self.buffered += 1
        if len(buffer) >= self.flush_groups:
            self.buffered -= len(buffer)
            yield shard, self._chunk(self.buffers.pop(shard))
        elif self.buffered >= MAX_BUFFERED_GROUPS:
            for shard, buffer in sorted(self.buffers.items()):
                yield shard, self._chunk(buffer)
            self.buffers, self.buffered = {}, 0

    @staticmethod
    def _chunk(buffer) -> tuple[bytes, bytes]:
        records = [r for records, _, _ in buffer for r in records]
        lines = [line for _, lines, _ in buffer for line in lines]
        curves = [c for _, _, curves in buffer for c in curves]
        return (_table_bytes(records_with_lines(records, lines)),
                _table_bytes(pa.Table.from_pylist(curves, schema=PN_CURVE_SCHEMA)))


def group_outputs(result: GroupResult, config: RunConfig, run_id: str, settings, *,
                  window_start=None, window_end=None, pane_index: int = 0, capacity=None):
    """One group's ``(records, JSON lines, PN curves)``: its ``operating_point.json``
    records (``settings``: :func:`~costlib_pipelines.io.records.point_settings` of ``config``),
    each record as a JSON line, and the PN curves its methods chose their points on."""
    records = operating_point_records(
        result, rule=config.rule, classifiers=config.classifiers,
        target_marginal_precision=config.target.marginal_precision,
        run_id=run_id, config_digest=config.digest, window_start=window_start,
        window_end=window_end, pane_index=pane_index, settings=settings, capacity=capacity,
    )
    lines = [records_to_jsonl([record]) for record in records]
    return records, lines, pn_curve_records(result, window_start=window_start,
                                            window_end=window_end)


def records_with_lines(records: list, lines: list[str]) -> pa.Table:
    """Records as an ``operating_point.json`` table carrying their JSON lines in
    :data:`JSONL_COLUMN` (records and lines of a shard travel and are written together)."""
    return records_to_table(records, "operating_point.json").append_column(
        JSONL_COLUMN, pa.array(lines, pa.string()))


def shard_path(run_dir: str, stem: str, shard: int, suffix: str) -> str:
    return f"{run_dir}/shards/{stem}-{shard:05d}.{suffix}"


def _by_group(table: pa.Table) -> pa.Table:
    """Rows sorted by group; rows of a group keep their order (Arrow's sort is stable)."""
    if table.num_rows == 0:
        return table
    return table.take(pc.sort_indices(table, sort_keys=[("group", "ascending")]))


class WriteShardFn(beam.DoFn):
    """``(shard, chunks)`` -> the shard's files sorted by group; yields ``shard``."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir

    def process(self, element):

        shard, chunks = element
        chunks = list(chunks)
        records = _by_group(pa.concat_tables([_read_table(r) for r, _ in chunks]))
        curves = _by_group(pa.concat_tables([_read_table(c) for _, c in chunks]))
        lines = records.column(JSONL_COLUMN).to_pylist()
        records = records.drop_columns([JSONL_COLUMN])
        write_parquet(shard_path(self.run_dir, "operating_points", shard, "parquet"), records)
        write_bytes_atomically(shard_path(self.run_dir, "operating_points", shard, "jsonl"),
                               "".join(lines).encode())
        write_parquet(shard_path(self.run_dir, "pn_curves", shard, "parquet"), curves)
        yield shard


def assemble_shards(run_dir: str, shards: Iterable[int]) -> int:
    """The written shards -> the run's three record files, streamed in shard order.

    Memory: one shard at a time. Writes nothing when there is no shard (no group had rated
    rows). Returns the number of shards.
    """
    shards = sorted(shards)
    if not shards:
        return 0
    _concatenate_parquet([shard_path(run_dir, "operating_points", s, "parquet")
                          for s in shards], f"{run_dir}/operating_points.parquet",
                         arrow_schema("operating_point.json"))
    _concatenate_bytes([shard_path(run_dir, "operating_points", s, "jsonl") for s in shards],
                       f"{run_dir}/operating_points.jsonl")
    _concatenate_parquet([shard_path(run_dir, "pn_curves", s, "parquet") for s in shards],
                         f"{run_dir}/pn_curves.parquet", PN_CURVE_SCHEMA)
    FileSystems.delete([f"{run_dir}/shards"])
    return len(shards)


class AssembleShardsFn(beam.DoFn):
    """One impulse, the written shard ids as a side input -> the run's record files
    (:func:`assemble_shards`); yields the number of shards."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir

    def process(self, _, shards: Iterable[int]):
        yield assemble_shards(self.run_dir, shards)


def _concatenate_parquet(paths: Sequence[str], path: str, schema: pa.Schema) -> None:
    """Parquet files -> one file (a row group per input), written to ``.tmp`` and renamed."""
    tmp = path + ".tmp"
    with FileSystems.create(tmp) as sink:
        with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
            for source in paths:
                with FileSystems.open(source) as fh:
                    table = pq.read_table(fh)
                if table.num_rows:
                    writer.write_table(table.cast(schema))
    FileSystems.rename([tmp], [path])


def _concatenate_bytes(paths: Sequence[str], path: str, block: int = 1 << 22) -> None:
    """Files -> one file, byte for byte, streamed; written to ``.tmp`` and renamed."""
    tmp = path + ".tmp"
    with FileSystems.create(tmp) as sink:
        for source in paths:
            with FileSystems.open(source) as fh:
                while data := fh.read(block):
                    sink.write(data)
    FileSystems.rename([tmp], [path])
