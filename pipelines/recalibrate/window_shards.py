"""Windowed recalibration sharded by group: no stage sees all groups' results on one key.

A windowed run's per-group results (one per group and pane of an event-time window, from
:class:`~costlib_pipelines.recalibrate.optimizing.OptimizeGroupFn`) go through three stages:

1. :class:`KeyByShardFn` keys each result by its *shard*, ``crc32(group) mod shards``
   (:func:`window_shard_of`: stable across processes and runs, unlike Python's salted
   ``hash``). The all-groups result ``"__all__"`` (the fallback parent) is sent to its own
   shard as an ordinary group *and* to every other shard marked parent-only, so every shard
   can apply the fallback while the parent's own records are written once, in its own shard.
2. A ``GroupByKey`` by shard and :class:`WriteWindowShardFn`, per (window, shard): the newest
   pane of each of the shard's groups, :func:`costlib.thresholds.apply_fallback` with
   the newest parent, the records and PN curves, written sorted by group as
   ``windows/<start>_<end>/shards/{operating_points-NNNNN.parquet,pn_curves-NNNNN.parquet}``
   (atomic writes; a name depends only on window and shard, so a retried or late firing
   overwrites its own shard). The records' JSON lines are a column of the records file, so an
   assembly that reads a shard while it is rewritten gets records and lines of one version.
   It yields ``(window directory, shard)``.
3. A ``GroupByKey`` by window directory of those tiny ids and :class:`AssembleWindowFn`:
   the shard files are merged by group (:func:`assemble_window`, a k-way merge: each shard
   is sorted by group and a group lives in one shard) into the window's
   ``operating_points.parquet``/``.jsonl`` and ``pn_curves.parquet``, with the rows, schemas
   and order (by group, then as the records are built) that one worker holding all groups
   would write, whatever the number of shards. Memory: one Parquet batch per shard and one
   output row group.

Triggers. The windowing's trigger is ``AfterWatermark(late=AfterCount(1))``, accumulating;
both downstream ``GroupByKey`` s inherit its continuation trigger, the same trigger, also
accumulating:

* On time: a (window, shard) fires when the watermark passes the window's end; that
  watermark is held back until every group's on-time result of the window has reached the
  shard ``GroupByKey``, so the on-time shard pane holds all its groups. The shard ids leave
  stage 2 in the same window, so the assembly ``GroupByKey``'s watermark passes the window's
  end only after every shard's on-time files are written and its id emitted: the on-time
  assembly sees every shard's on-time output.
* Late: a late pane of a group (and of ``"__all__"``, which goes to every shard) is one late
  element at its shard(s); ``AfterCount(1)`` fires the shard again, and accumulation gives it
  all elements so far, so the shard file is rewritten whole with the newest pane of every
  group of the shard. Only then is the shard's id emitted: a late element at the assembly,
  which fires again with (accumulating) every shard id seen so far, and re-reads every shard
  file from storage, i.e. the newest version of each (the other shards are unchanged).
  The window's files are upserted: the newest pane of each group wins, and ``pane_index`` in
  the records is that group's pane. Late outputs of one ``GroupByKey`` are within the next
  one's allowed lateness (the windowing, allowed lateness included, carries over to both), as
  they were for the single ``GroupByKey`` that followed the optimisation before; the tests
  send late data through the whole chain.
* Cost: late rows change ``"__all__"`` as well as their group, so a late element rewrites
  every shard that has groups, and the window may be assembled once per shard firing (each
  assembly reads every shard file). A late result of one group alone (as in the tests of the
  stage) rewrites one shard and assembles once.

Each assembly reads the shard files from storage, not from its pane, so a firing that runs
after a shard was rewritten includes it; the last firing of a window runs after the last
shard write and leaves the newest files. That relies on a key's firings being processed one
after another (runners do: a GroupByKey's output for one key and window is produced and
consumed by one keyed work item at a time); assemblies write through unique temporary names,
so even overlapping ones never mix bytes in one file. Shard files stay while the pipeline
runs (a late firing of one shard needs the others); :func:`remove_window_shards` deletes
them when a run has finished (the launcher calls it).

The number of shards (:data:`SHARDS`) only changes which worker does what, never a byte of
the window's files.
"""

from __future__ import annotations

import datetime as dt
import heapq
import uuid
import zlib
from collections.abc import Iterable, Iterator

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq

from costlib.thresholds.loop import ALL_GROUPS, apply_fallback
from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.files import write_parquet
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.records import (
    PN_CURVE_SCHEMA,
    arrow_schema,
    point_settings,
)
from costlib_pipelines.recalibrate.shards import (
    JSONL_COLUMN,
    group_outputs,
    records_with_lines,
    shard_path,
)

__all__ = [
    "SHARDS",
    "AssembleWindowFn",
    "KeyByShardFn",
    "WriteWindowShardFn",
    "WriteWindows",
    "assemble_window",
    "remove_window_shards",
    "window_bounds",
    "window_directory",
    "window_shard_of",
    "write_window_shard",
]

#: Shards per window (keys of the per-shard ``GroupByKey``). Results do not depend on it.
SHARDS = 16
#: Rows per output row group: pyarrow's default maximum, so a window's files are byte for byte
#: what one ``pyarrow.parquet.write_table`` of all its rows would write.
ROW_GROUP_ROWS = 1024 * 1024
#: Rows read from a shard file at a time during the merge.
READ_BATCH_ROWS = 65_536


def window_shard_of(group: str, shards: int) -> int:
    """The shard of ``group``: ``crc32(UTF-8 bytes of the name) mod shards`` (stable)."""
    return zlib.crc32(group.encode("utf-8", "surrogatepass")) % shards


def window_bounds(window) -> tuple[dt.datetime, dt.datetime]:
    """Start and end of an event-time window as UTC datetimes."""
    return (window.start.to_utc_datetime().replace(tzinfo=dt.UTC),
            window.end.to_utc_datetime().replace(tzinfo=dt.UTC))


def window_directory(run_dir: str, window) -> str:
    """``run_dir/windows/<start>_<end>`` of an event-time window (UTC, to the second)."""
    start, end = window_bounds(window)
    return f"{run_dir}/windows/{start:%Y%m%dT%H%M%S}_{end:%Y%m%dT%H%M%S}"


class KeyByShardFn(beam.DoFn):
    """``(_, (GroupResult, pane index))`` -> ``(shard, (result, pane index, own))``.

    ``own`` is False only on the parent-only copies of ``"__all__"`` sent to the shards other
    than its own (fallback side input of those shards; their records are not written there).
    """

    def __init__(self, shards: int):
        if shards < 1:
            raise ValueError(f"shards must be at least 1, got {shards}")
        self.shards = shards

    def process(self, element):
        _, (result, pane_index) = element
        home = window_shard_of(result.group, self.shards)
        yield home, (result, pane_index, True)
        if result.group == ALL_GROUPS:
            for shard in range(self.shards):
                if shard != home:
                    yield shard, (result, pane_index, False)


def _newest(items) -> tuple[dict, tuple | None]:
    """Accumulated ``(result, pane, own)`` -> newest ``(result, pane)`` per own group, and the
    newest ``"__all__"`` ``(result, pane)`` (own or parent-only), or None."""
    latest: dict = {}
    parent = None
    for result, pane, own in items:
        if result.group == ALL_GROUPS and (parent is None or pane > parent[1]):
            parent = (result, pane)
        if own:
            best = latest.get(result.group)
            if best is None or pane > best[1]:
                latest[result.group] = (result, pane)
    return latest, parent


class WriteWindowShardFn(beam.DoFn):
    """``(shard, accumulated results)`` of one window -> the shard's files; yields
    ``(window directory, shard)`` after they are written (nothing for a shard without groups
    of its own)."""

    def __init__(self, config: RunConfig, run_dir: str, run_id: str):
        self.config = config
        self.run_dir = run_dir
        self.run_id = run_id

    def process(self, element, window=beam.DoFn.WindowParam):
        shard, items = element
        latest, parent = _newest(items)
        if not latest:
            return
        yield write_window_shard(self.config, self.run_dir, self.run_id, window, latest,
                                 None if parent is None else parent[0], shard)


def write_window_shard(config: RunConfig, run_dir: str, run_id: str, window,
                       latest: dict, parent, shard: int) -> tuple[str, int]:
    """Write one shard of a window: ``latest`` maps each of the shard's groups to its newest
    ``(GroupResult, pane index)``, ``parent`` is the newest ``"__all__"`` result (or None) for
    the fallback; returns ``(window directory, shard)``."""
    results = {g: r for g, (r, _) in latest.items()}
    if parent is not None:
        results[ALL_GROUPS] = parent
    results = apply_fallback(results, fallback=config.fallback)
    directory = window_directory(run_dir, window)
    start, end = window_bounds(window)
    settings = point_settings(config)
    records, lines, curves = [], [], []
    for group in sorted(latest):
        group_records, group_lines, group_curves = group_outputs(
            results[group], config, run_id, settings, window_start=start,
            window_end=end, pane_index=latest[group][1])
        records += group_records
        lines += group_lines
        curves += group_curves
    write_parquet(shard_path(directory, "operating_points", shard, "parquet"),
                  records_with_lines(records, lines))
    write_parquet(shard_path(directory, "pn_curves", shard, "parquet"),
                  pa.Table.from_pylist(curves, schema=PN_CURVE_SCHEMA))
    return directory, shard


class WriteWindows(beam.PTransform):
    """Per-group window results -> the windows' files, sharded by group (stages 1-3 of the
    module). Input: ``(any key, (GroupResult, pane index))`` as
    :class:`~costlib_pipelines.recalibrate.optimizing.OptimizeGroupFn` yields them, in their
    event-time windows; output: ``(window directory, number of records)`` per assembly. ``shards``:
    default :data:`SHARDS` (read when the transform is applied)."""

    def __init__(self, config: RunConfig, run_dir: str, run_id: str, shards: int | None = None):
        super().__init__()
        self.config, self.run_dir, self.run_id, self.shards = config, run_dir, run_id, shards

    def expand(self, results):
        shards = SHARDS if self.shards is None else self.shards
        return (
            results
            | "ByShard" >> beam.ParDo(KeyByShardFn(shards))
            | "PerShard" >> beam.GroupByKey()
            | "WriteShard" >> beam.ParDo(WriteWindowShardFn(self.config, self.run_dir,
                                                            self.run_id))
            | "PerWindow" >> beam.GroupByKey()  # by window directory: shard ids only
            | "Assemble" >> beam.ParDo(AssembleWindowFn())
        )


class AssembleWindowFn(beam.DoFn):
    """``(window directory, shard ids so far)`` -> the window's three files
    (:func:`assemble_window`); yields ``(window directory, number of records)``."""

    def process(self, element):
        directory, shards = element
        yield directory, assemble_window(directory, shards)


def _group_runs(table: pa.Table) -> Iterator[tuple[str, int, int]]:
    """``(group, offset, length)`` of each run of equal ``group`` values of ``table``."""
    groups = table.column("group").to_pylist()
    start = 0
    for i in range(1, len(groups) + 1):
        if i == len(groups) or groups[i] != groups[start]:
            yield groups[start], start, i - start
            start = i


def _blocks(path: str) -> Iterator[tuple[str, pa.Table, list[bytes]]]:
    """A shard file's rows as ``(group, rows, JSON lines)`` blocks of one group, in file
    order (the lines from the file's :data:`~costlib_pipelines.recalibrate.shards.JSONL_COLUMN`,
    which is dropped from the rows; ``[]`` for a file without it)."""
    with FileSystems.open(path) as fh:
        for batch in pq.ParquetFile(fh).iter_batches(batch_size=READ_BATCH_ROWS):
            table = pa.Table.from_batches([batch])
            lines = None
            if JSONL_COLUMN in table.column_names:
                lines = table.column(JSONL_COLUMN)
                table = table.drop_columns([JSONL_COLUMN])
            for group, offset, length in _group_runs(table):
                text = ([line.encode() for line in lines.slice(offset, length).to_pylist()]
                        if lines is not None else [])
                yield group, table.slice(offset, length), text


class _AtomicParquet:
    """A Parquet file written in row groups of :data:`ROW_GROUP_ROWS` rows to a unique
    temporary name, renamed over ``path`` on :meth:`close`. Each row group is written from
    contiguous arrays (the writer's pages follow the chunks it is given), so the file is the
    one ``pyarrow.parquet.write_table`` of the same rows writes."""

    def __init__(self, path: str, schema: pa.Schema):
        self.path, self.schema = path, schema
        self.tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        self.sink = FileSystems.create(self.tmp)
        self.writer = pq.ParquetWriter(self.sink, schema, compression="zstd")
        self.buffer: list[pa.Table] = []
        self.buffered = 0
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        self.buffer.append(table)
        self.buffered += table.num_rows
        while self.buffered >= ROW_GROUP_ROWS:
            self._flush(ROW_GROUP_ROWS)

    def _flush(self, rows: int) -> None:
        table = pa.concat_tables(self.buffer).cast(self.schema).combine_chunks()
        self.writer.write_table(table.slice(0, rows), row_group_size=ROW_GROUP_ROWS)
        rest = table.slice(rows)
        self.buffer, self.buffered = ([rest] if rest.num_rows else []), rest.num_rows
        self.rows += rows

    def close(self) -> None:
        if self.buffered or self.rows == 0:  # the rest; an empty file gets its empty row group
            table = (pa.concat_tables(self.buffer).cast(self.schema).combine_chunks()
                     if self.buffer else self.schema.empty_table())
            self.writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self.writer.close()
        self.sink.close()
        FileSystems.rename([self.tmp], [self.path])


def _tagged(index: int, source: Iterator) -> Iterator:
    for group, table, text in source:
        yield group, index, table, text


def _merge(sources: list[Iterator], out: _AtomicParquet, lines_sink=None) -> int:
    """k-way merge of per-shard group blocks by group name (code point order, as ``sorted``)
    into ``out`` (and the JSON lines into ``lines_sink``); returns the rows written."""
    rows = 0
    keyed = [_tagged(index, source) for index, source in enumerate(sources)]
    for _, _, table, text in heapq.merge(*keyed, key=lambda block: (block[0], block[1])):
        out.write(table)
        rows += table.num_rows
        if lines_sink is not None:
            for line in text:
                lines_sink.write(line)
    out.close()
    return rows


def assemble_window(directory: str, shards: Iterable[int]) -> int:
    """A window's shard files -> its ``operating_points.parquet``/``.jsonl`` and
    ``pn_curves.parquet``, merged by group; returns the number of records.

    Every shard file is sorted by group and a group is in one shard only, so merging the
    shards by group name gives the rows sorted by group, each group's rows in their order:
    the files do not depend on how the groups were sharded. Each file is written to a unique
    temporary name and renamed (readers never see a partial file).
    """
    shards = sorted(set(shards))
    points = [shard_path(directory, "operating_points", s, "parquet") for s in shards]
    curves = [shard_path(directory, "pn_curves", s, "parquet") for s in shards]
    jsonl_path = f"{directory}/operating_points.jsonl"
    jsonl_tmp = f"{jsonl_path}.{uuid.uuid4().hex}.tmp"
    with FileSystems.create(jsonl_tmp) as sink:
        text = _TextSink(sink)
        count = _merge([_blocks(p) for p in points],
                       _AtomicParquet(f"{directory}/operating_points.parquet",
                                      arrow_schema("operating_point.json")), text)
        text.flush()
    FileSystems.rename([jsonl_tmp], [jsonl_path])
    _merge([_blocks(p) for p in curves],
           _AtomicParquet(f"{directory}/pn_curves.parquet", PN_CURVE_SCHEMA))
    return count


class _TextSink:
    """Bytes lines -> a binary sink in blocks of about 4 MiB."""

    def __init__(self, sink, block: int = 1 << 22):
        self.sink, self.block = sink, block
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, line: bytes) -> None:
        self.parts.append(line)
        self.size += len(line)
        if self.size >= self.block:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.sink.write(b"".join(self.parts))
        self.parts, self.size = [], 0


def remove_window_shards(run_dir: str) -> int:
    """Delete every ``windows/*/shards`` directory of a finished run, and the temporary files
    a failed (then retried) assembly left in a window directory; returns how many shard
    directories were deleted."""
    matched = FileSystems.match([f"{run_dir}/windows/*/shards/*"])[0].metadata_list
    directories = sorted({m.path.rsplit("/", 1)[0] for m in matched})
    if directories:
        FileSystems.delete(directories)
    leftovers = [m.path for m in
                 FileSystems.match([f"{run_dir}/windows/*/*.tmp"])[0].metadata_list]
    if leftovers:
        FileSystems.delete(leftovers)
    return len(directories)
