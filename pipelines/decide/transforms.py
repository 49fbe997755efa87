"""The Beam DoFns of the decide stage (:func:`costlib_pipelines.decide.pipeline.build_decide`).

:class:`DecideFileFn` reads, validates and decides a file's row groups and writes the rows
without a set (sets are decoded in place with ``decoding.sets_contiguous``, else sent to the
shuffle); :class:`DecodeBucketFn` decodes and writes a shuffled bucket's sets;
:class:`CheckSetsFn` stops the run when a set decoded in place is in two row groups.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam import pvalue
from numpy.typing import NDArray

from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.audit_columns import AuditSettings
from costlib_pipelines.decide.contiguous import ContiguousBatch, decode_contiguous_batches
from costlib_pipelines.decide.records import (
    _counts,
    decide_columns,
    decision_table_and_audit,
    decoding_settings,
    sets_contiguous,
    with_topk,
    write_decisions,
)
from costlib_pipelines.decide.sets import (
    PROBABILITY,
    TOPK_FIELDS,
    _as_dictionary,
    _narrowed,
    decode_sets,
    encode_sets,
    set_id_hashes,
    shuffled_rows,
    split_sets,
)
from costlib_pipelines.io import min_risk
from costlib_pipelines.io.accounting import report_metrics
from costlib_pipelines.io.batch_threads import batch_threads, in_order
from costlib_pipelines.io.batches import ValidatedBatch, validate_batch
from costlib_pipelines.io.dead_letters import dead_letter_name
from costlib_pipelines.io.files import (
    InputError,
    RowGroupRead,
    as_stored,
    read_row_groups,
    row_group_reads,
)
from costlib_pipelines.io.published_points import DecisionThresholds
from costlib_pipelines.pause import pause_point

__all__ = [
    "CheckSetsFn",
    "as_stored",
]


#: Set rows (``decoding.sets_contiguous``) whose sets are decoded together: the row groups of
#: a file are gathered until they hold this many (sets of ragged sizes are decoded size by
#: size, and each size costs some 200 numpy calls however few sets it has).
DECODE_ROWS = 400_000


class DecideFileFn(beam.DoFn):
    """Input path -> per row group: read, validate, decide; writes rows without a set.

    Reading, validation and the threshold decisions of a row group happen in one call, so no
    PCollection ever holds a whole batch: Beam samples the elements of every PCollection for
    size estimates by encoding them, which for Arrow batches (pickled) costs about as much as
    the decisions themselves. Outputs are small: main ``(bucket, bytes)`` of rows to decode in
    sets (top-k path only), tagged ``"counters"`` (row accounting of the file, and counts of
    the rows written) and ``"dead_letters"`` (``(source, row_group, table)`` of bad rows).

    With ``decoding.sets_contiguous`` the sets are decoded here, the sets of a few row groups
    of the file together (:data:`DECODE_ROWS`, :func:`decode_contiguous_batches`), every row
    is written to its row group's file (on a writer thread, :meth:`write_behind`), and the
    sets' hashes go out tagged ``"set_hashes"`` for :class:`CheckSetsFn`.
    """

    def __init__(self, thresholds: DecisionThresholds, config: RunConfig, directory: str,
                 audit: AuditSettings | None = None, threads: int | None = None):
        self.thresholds = thresholds
        self.threads = threads  # row groups decided at once (None: the machine's cores)
        self.config = config
        self.audit = audit
        self.columns = decide_columns(config)
        settings = decoding_settings(config)
        self.loss = settings["loss"]
        self.params = dict(settings["params"])
        self.buckets = int(settings["buckets"])
        self.topk = with_topk(config)
        self.contiguous = sets_contiguous(config)
        self.writer: ThreadPoolExecutor | None = None  # made on the first write behind
        self.writing: list[tuple[Future, int]] = []  # writes in flight and their rows
        self.directory = directory
        self.min_risk = min_risk.decide_settings(config)

    def process(self, path: str):
        pause_point("decide.pipeline")
        # the group (and set id) columns come as dictionary arrays straight from the file's
        # dictionary pages (validation and the decision columns would dictionary-encode them
        # anyway); dead letters get the columns back as the file stores them
        dictionary = [self.config.columns["group"]]
        if self.topk:  # set ids too: distinct values checked (records.set_id_dictionary)
            dictionary.append(self.config.columns["set_id"])
        if self.contiguous:  # sets span row groups: one batch after the other
            batches = read_row_groups(path, self.columns, dictionary=dictionary)
            yield from self._contiguous(path, batches, dictionary)
            return

        def work(read: RowGroupRead) -> tuple[Counter, list]:
            row_group, table = read.index, read.table()  # decoded on this thread
            batch = validate_batch(table, self.config, source=path, row_group=row_group,
                                   for_decisions=True)
            outputs: list = []
            if batch.dead_letters is not None:
                outputs.append(pvalue.TaggedOutput("dead_letters", (
                    path, row_group, as_stored(batch.dead_letters, path, dictionary))))
            outputs.extend(self.decide(batch, table))
            return batch.accounting, outputs

        # Row groups on every core, outputs in row-group order from this thread
        # (costlib_pipelines.io.batch_threads): the same outputs as one thread.
        threads = batch_threads() if self.threads is None else self.threads
        reads = row_group_reads(path, self.columns, dictionary=dictionary)
        file_accounting: Counter = Counter()  # one counters output and metric per file
        for accounting, outputs in in_order(work, reads, threads):
            file_accounting.update(accounting)
            yield from outputs
        if file_accounting:
            report_metrics(file_accounting)
            yield pvalue.TaggedOutput("counters", file_accounting)

    def _contiguous(self, path: str, batches, dictionary: list[str]):
        pending: list[tuple[ValidatedBatch, ContiguousBatch]] = []  # sets not decoded yet
        for row_group, table in batches:
            batch = validate_batch(table, self.config, source=path, row_group=row_group,
                                   for_decisions=True)
            report_metrics(batch.accounting)
            yield pvalue.TaggedOutput("counters", batch.accounting)
            if batch.dead_letters is not None:
                yield pvalue.TaggedOutput("dead_letters", (
                    path, row_group, as_stored(batch.dead_letters, path, dictionary)))
            yield from self.decide(batch, table, pending)
            if sum(int(part.in_set.sum()) for _, part in pending) >= DECODE_ROWS:
                yield from self.decode_pending(pending)
        yield from self.decode_pending(pending)

    def decide(self, batch: ValidatedBatch, raw: pa.Table | None = None,
               pending: list[tuple[ValidatedBatch, ContiguousBatch]] | None = None):
        """Threshold decisions of a batch; set rows out as ``(bucket, bytes)``, others written.

        With ``decoding.sets_contiguous`` a batch with set rows is appended to ``pending``
        (decoded and written by :meth:`decode_pending`), or decoded at once without it.
        """
        table, audit_counters = decision_table_and_audit(
            batch, self.thresholds, self.config.rule, self.loss, self.audit)
        if raw is not None and self.min_risk is not None:
            table, risk_counters = min_risk.with_min_risk(table, self.min_risk, raw, batch)
            yield pvalue.TaggedOutput("counters", risk_counters)
        if audit_counters:
            yield pvalue.TaggedOutput("counters", audit_counters)
        counts = None
        if self.topk:
            in_set = ~(np.isnan(batch.probabilities) | table.column("set_id").is_null()
                       .to_numpy(zero_copy_only=False))
            if in_set.any() and self.contiguous:
                part = ContiguousBatch(table, batch.probabilities, in_set, batch.source,
                                       batch.row_group, batch.valid_rows,
                                       self.config.columns["set_id"])
                if pending is None:
                    yield from self.decode_pending([(batch, part)])
                else:
                    pending.append((batch, part))
                return
            if in_set.any():
                yield from self.shuffle_sets(table, batch.probabilities, in_set)
                table = table.filter(pa.array(~in_set))
        if table.num_rows:
            path = f"{self.directory}/{dead_letter_name(batch.source, batch.row_group)}"
            if self.contiguous:  # the longest writes: behind the next row group's work
                self.write_behind(path, table)
            else:
                write_decisions(path, table)
            yield pvalue.TaggedOutput("counters", counts or _counts(table))

    def decode_pending(self, pending: list[tuple[ValidatedBatch, ContiguousBatch]]):
        """Decode the sets of the ``pending`` batches together (:func:`decode_contiguous_
        batches`), write every batch's rows behind (:meth:`write_behind`), and empty
        ``pending``: the sets' hashes and the counts of every batch out."""
        if not pending:
            return
        decoded = decode_contiguous_batches([part for _, part in pending], self.loss,
                                            self.params)
        for (batch, _), result in zip(pending, decoded, strict=True):
            yield from self.set_hashes(batch, result.hashes)
            self.write_behind(
                f"{self.directory}/{dead_letter_name(batch.source, batch.row_group)}",
                result.table)
            yield pvalue.TaggedOutput("counters", result.counts)
        pending.clear()

    def write_behind(self, path: str, table: pa.Table) -> None:
        """Write ``table`` on the writer thread (Parquet encoding releases the GIL) while the
        next row groups are read and decoded. Writes queue up to :data:`DECODE_ROWS` rows in
        flight (older ones are waited for first; one set of gathered row groups is written
        while the next is read and decoded), and ``finish_bundle`` waits for all (re-raising
        a failed write), as in :class:`DecodeBucketFn`."""
        while self.writing and sum(rows for _, rows in self.writing) + table.num_rows > (
                DECODE_ROWS):
            self.writing.pop(0)[0].result()
        if self.writer is None:
            self.writer = ThreadPoolExecutor(max_workers=1)
        self.writing.append((self.writer.submit(write_decisions, path, table), table.num_rows))

    def wait_for_write(self) -> None:
        """Wait for the writes in flight, if any (re-raising the first error)."""
        writing, self.writing = self.writing, []
        for future, _ in writing:
            future.result()

    def start_bundle(self):
        self.writing = []

    def finish_bundle(self):
        self.wait_for_write()

    def teardown(self):
        if self.writer is not None:
            self.writer.shutdown()

    def set_hashes(self, batch: ValidatedBatch, hashes: NDArray[np.uint64]):
        """``(shard, (source, row group, hash bytes))`` per hash shard present, tagged
        ``"set_hashes"``: the batch's sets for :class:`CheckSetsFn`."""
        shard = (hashes % np.uint64(self.buckets)).astype(np.int64)
        order = np.argsort(shard, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(shard, minlength=self.buckets))])
        hashes = hashes[order]
        for b in np.flatnonzero(np.diff(bounds)).tolist():
            yield pvalue.TaggedOutput("set_hashes", (int(b), (
                batch.source, batch.row_group,
                hashes[bounds[b]:bounds[b + 1]].tobytes())))

    def shuffle_sets(self, table: pa.Table, probabilities: NDArray[np.float64],
                     in_set: NDArray[np.bool_]):
        """``(bucket, bytes)`` per set-id bucket present (:func:`split_sets`)."""
        sets = _narrowed(table.drop_columns(list(TOPK_FIELDS)).append_column(
            PROBABILITY, pa.array(probabilities)))  # top-k fields are set after decoding
        for bucket, part in split_sets(sets, np.flatnonzero(in_set), self.buckets):
            yield bucket, encode_sets(part)


class DecodeBucketFn(beam.DoFn):
    """``(bucket, [IPC bytes])`` -> the bucket's sets decoded, written to ``part-bucket-N``.

    A bucket's file is written on a second thread while the next bucket is decoded (Parquet
    encoding releases the GIL: on 2 free cores the writes, ~0.2 s per 1M rows, hide behind
    the decoding). At most one write is in flight, and ``finish_bundle`` waits for the last,
    so a bundle commits only once its files exist; a failed write re-raises there and fails
    the bundle.
    """

    def __init__(self, config: RunConfig, directory: str):
        settings = decoding_settings(config)
        self.loss = settings["loss"]
        self.params = dict(settings["params"])
        self.directory = directory

    def setup(self):
        self.writer = ThreadPoolExecutor(max_workers=1)

    def start_bundle(self):
        self.writing: Future | None = None

    def process(self, element):
        bucket, payloads = element
        decided = decode_sets(shuffled_rows(list(payloads)), self.loss, self.params)
        self.wait_for_write()
        self.writing = self.writer.submit(
            write_decisions, f"{self.directory}/part-bucket-{bucket:05d}.parquet", decided)
        yield _counts(decided, sets=len(decided.column("set_id").combine_chunks().dictionary))

    def wait_for_write(self) -> None:
        """Wait for the write in flight, if any (re-raising its error)."""
        writing, self.writing = self.writing, None
        if writing is not None:
            writing.result()

    def finish_bundle(self):
        self.wait_for_write()

    def teardown(self):
        self.writer.shutdown()


class CheckSetsFn(beam.DoFn):
    """``(shard, [(source, row group, set hashes)])`` -> ``Counter(topk_sets_checked=n)``;
    stops the run when a set id is in two row groups (``decoding.sets_contiguous``).

    Every batch decoded in place sends one :func:`set_id_hashes` value per set, sharded by
    hash (``decoding.buckets`` shards, checked in parallel). A hash seen in two row groups is
    confirmed on the set ids themselves (the two row groups' ``set_id`` columns are read
    again): a true split raises :class:`InputError` naming the set and both row groups; a
    64-bit hash collision of two different ids is no error. The check sees every set of the
    run, whatever file, bundle or worker it was decoded in, and the run's manifest is written
    only after it passed: a split set makes the run fail (exit 2), never publishes two
    half-sets.
    """

    def __init__(self, config: RunConfig):
        self.config = config

    def process(self, element):
        _shard, parts = element
        parts = sorted(parts)  # a deterministic message whatever order the parts came in
        hashes = [np.frombuffer(data, dtype=np.uint64) for _, _, data in parts]
        values = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
        origin = np.repeat(np.arange(len(parts)), [h.size for h in hashes])
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        for i in np.flatnonzero(ordered[1:] == ordered[:-1]).tolist():
            first, second = parts[origin[order[i]]], parts[origin[order[i + 1]]]
            shared = self.shared_set_ids(first[:2], second[:2], ordered[i])
            if shared:
                raise InputError(
                    f"set {shared[0]!r} (column {self.config.columns['set_id']}) is in two row "
                    f"groups: {first[0]} row group {first[1]} and {second[0]} row group "
                    f"{second[1]}, but the config declares decoding.sets_contiguous: true "
                    f"(every set's rows consecutive in one row group); the sets were decoded "
                    f"in parts, so the run stops before its manifest: write the stream set by "
                    f"set, or set decoding.sets_contiguous: false to gather sets with a shuffle")
        yield Counter(topk_sets_checked=int(values.size))

    def shared_set_ids(self, first: tuple[str, int], second: tuple[str, int],
                       value: np.uint64) -> list[str]:
        """Set ids with hash ``value`` in both row groups (``(source, row group)``)."""
        if first == second:  # one row group holds each of its sets once (runs checked)
            return []
        found = []
        for source, row_group in (first, second):
            column = self.config.columns["set_id"]
            ids = next(read_row_groups(source, [column], start=row_group,
                                       stop=row_group + 1))[1].column(column)
            distinct = _as_dictionary(ids.drop_null()).dictionary
            found.append({v for v, h in zip(distinct.to_pylist(), set_id_hashes(distinct),
                                            strict=True) if h == value})
        return sorted(found[0] & found[1])
