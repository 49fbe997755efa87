"""Aggregating batches: partial grids per group, accounting, dead letters, bootstrap grids.

Elements are Arrow tables (one per Parquet row group) and numpy histograms, never Python rows.
All classes live in this module (never in ``__main__``) so that every runner can pickle them.

Batches are never elements of a PCollection in a file-based run: one DoFn reads a file's row
groups, validates each and histograms it (:class:`AggregateBatchesFn`), so only small partial
grids, counters and dead-letter tables cross stage boundaries (Beam pickles sampled elements to
estimate their size, which for whole batches cost ~70 MB per million rows). Its input is a file
path, or a ready ``(source, row_group, table)`` batch (as a TestStream provides).

Outputs of :class:`AggregateBatches`:

- ``grids``: ``(group, (shape, SparseCounts, rated_rows, audited_rows, positive_rows,
  negative_rows))`` partial grids, one per group present
  in a batch (and per period bucket in windowed mode, timestamped at the bucket start), plus the
  same rows summed under ``"__all__"``; valid unrated rows (label null) are the third channel
  of the counts (:class:`~costlib_pipelines.recalibrate.grids.SumGrids`);
- ``accounting``: a Counter per element, its batches summed (and, with
  ``plausibility.count_duplicate_item_ids``, one Counter of duplicate item ids per group);
  ``dead_letters``: ``(source, row_group, table)``;
- ``bootstrap``: ``(group, SparseBootstrapGrids)`` when bootstrap replicates are configured
  (replicate counts by occupied cell; made dense one group at a time in
  :func:`~costlib_pipelines.recalibrate.optimizing.optimize_one`).

Every accounting counter is also a Beam metric (:mod:`costlib_pipelines.io.accounting`),
incremented where it is produced.

The batches of one element are read, validated and histogrammed on the machine's cores
(:func:`costlib_pipelines.io.batch_threads.in_order`): Arrow and numpy release the GIL in
most of that work, and the outputs are yielded in batch order from the DoFn's own thread (Beam
metrics and outputs belong to it), so a run's outputs do not depend on the number of threads.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import NamedTuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam import pvalue
from apache_beam.pvalue import PCollection
from apache_beam.transforms.window import GlobalWindow, TimestampedValue
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from costlib.thresholds.binning import SketchingBinner, design_weights, ht_variance_weights
from costlib.thresholds.grid import (
    GRID_CHANNELS,
    census_partials,
    grouped_histograms,
    stack_partials,
    sum_sparse,
)
from costlib.thresholds.loop import ALL_GROUPS, SparseBootstrapGrids
from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.accounting import (
    CountDuplicateIds,
    keys_per_group,
    report_metrics,
)
from costlib_pipelines.io.batch_threads import batch_threads, in_order
from costlib_pipelines.io.batches import validate_batch
from costlib_pipelines.io.files import as_stored
from costlib_pipelines.io.min_risk import MinRiskSettings, cost_weighted
from costlib_pipelines.io.plausibility import MICROS_PER_DAY, PLAUSIBILITY, Plausibility
from costlib_pipelines.recalibrate.grids import grid_rows
from costlib_pipelines.recalibrate.reading import batch_reads, dictionary_columns

__all__ = ["AggregateBatches", "AggregateBatchesFn", "AggregateOutputs"]


class AggregateBatchesFn(beam.DoFn):
    """Read, validate and histogram batches: partial grids per group, accounting, dead letters.

    For each batch: the accounting Counter and any dead-letter table go to tagged outputs, then
    the valid rows (rated, and unrated in a third channel) give one partial grid per group (and
    per period bucket if windowed), and the all-groups partial as their sum.
    """

    def __init__(self, config: RunConfig, columns: list[str] | None, windowed: bool,
                 with_bootstrap: bool, sketch_rows: bool = False, threads: int | None = None):
        self.config = config
        # Threads per element (None: the machine's cores); the edge sketches of a bundle are
        # one binner's, so sketching runs in the DoFn's thread.
        self.threads = 1 if sketch_rows else threads
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
        read = dictionary_columns(self.config, element)  # dead letters: as_stored(..., read)

        def work(batch_read):
            source, row_group, table = batch_read()  # decoded on this thread
            batch = validate_batch(table, self.config, source=source, row_group=row_group,
                                   windowed=self.windowed, plausibility=self.plausibility)
            batch = cost_weighted(batch, table, self.min_risk)
            outputs = []
            if batch.dead_letters is not None:
                outputs.append(pvalue.TaggedOutput("dead_letters", (
                    source, row_group, as_stored(batch.dead_letters, source, read))))
            if self.plausibility.count_duplicate_item_ids and batch.group_codes.size:
                outputs.extend(pvalue.TaggedOutput("item_ids", keyed)
                               for keyed in keys_per_group(batch))
            outputs.extend(self.histograms(batch, edges))
            return batch.accounting, outputs

        threads = batch_threads() if self.threads is None else self.threads
        element_accounting: Counter = Counter()  # one accounting output and metric per element
        for accounting, outputs in in_order(work, batch_reads(element, self.columns, read),
                                            threads):
            element_accounting.update(accounting)
            yield from outputs
        if element_accounting:
            report_metrics(element_accounting)
            yield pvalue.TaggedOutput("accounting", element_accounting)

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
        """Partial grids of a batch's valid rows: ``(group, (shape, counts, rated_rows,
        audited_rows, positive_rows, negative_rows))`` (see
        :class:`~costlib_pipelines.recalibrate.grids.SumGrids`).

        Rated rows go to the negative/positive channels; when the batch has valid unrated rows
        (label null) they go to a third channel, in the same sort-and-count pass
        (:func:`costlib.thresholds.grid._sparse.grouped_histograms`). A batch without unrated rows
        gives
        exactly the 2-channel partials of the rated rows. Bootstrap replicates get the same rows.
        """
        n_groups = len(batch.group_names)
        rows, groups, scores, labels, weights, unrated, audited = grid_rows(batch)
        variances = None
        if batch.audit_probabilities is not None:
            # Horvitz–Thompson variance weights (1 - p) (w / p)^2 of the rated rows: channels
            # 3 and 4 of the partials (costlib.thresholds.grid._sparse.grouped_histograms)
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
        channels = GRID_CHANNELS if variances is not None else (2 if unrated is None else 3)
        n_cells = channels * math.prod(shape)
        bins = None
        if self.sketch_rows:  # bin and sketch the rows from one key computation
            bins = self._binner_for(edges)(scores, labels, weights, unrated)
        partials = grouped_histograms(codes, scores, labels, weights, edges, unrated=unrated,
                                      variances=variances, bins=bins)
        if variances is not None:
            certain = ~audited if unrated is None else ~audited & ~unrated
            partials = self._with_design(batch, partials, edges, n_groups, buckets,
                                         (codes[certain], scores[certain], labels[certain],
                                          weights[certain]))
        if weights is None:  # counts are rows: a code's rated rows are its channels 0 and 1
            rated_cells = 2 * math.prod(shape)
            rated_per_code = {code: int(c.counts[:np.searchsorted(c.cells, rated_cells)].sum())
                              for code, c in partials.items()}
        else:
            rated_per_code = np.bincount(codes if unrated is None else codes[~unrated],
                                         minlength=buckets.size * n_groups)
        n_codes = buckets.size * n_groups
        audited_per_code = np.zeros(n_codes, dtype=np.int64) if audited is None else np.bincount(
            codes[audited], minlength=n_codes)
        # rows of evidence (min_rated counts them): rated rows with a positive weight, unweighted
        entered = np.ones(codes.size, dtype=bool) if unrated is None else ~unrated
        if weights is not None:
            entered &= weights > 0
        positive_per_code = np.bincount(codes[entered & labels], minlength=n_codes)
        negative_per_code = np.bincount(codes[entered & ~labels], minlength=n_codes)
        per_bucket: dict[int, list] = {}
        for code, counts in partials.items():
            bucket_index, group_index = divmod(code, n_groups)
            rows_info = (int(rated_per_code[code]), int(audited_per_code[code]),
                         int(positive_per_code[code]), int(negative_per_code[code]))
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

    def _with_design(self, batch, partials, edges, n_groups, buckets, certain):
        """``partials`` widened to :data:`GRID_CHANNELS` channels: channels 5 and 6 hold the
        audit design's terms ``w² (1 - p) / p`` and ``p`` of every valid row with ``0 < p < 1``
        (audited and represented rows alike;
        :func:`costlib.thresholds.binning._rows.design_weights`,
        :attr:`costlib.thresholds.ThresholdGrid.design`), per group (and period bucket);
        channels 7-10 the census of the rows rated with ``p = 1``, ``certain = (codes, scores,
        labels, weights)``: ``sum w`` and ``sum w²`` per label
        (:attr:`costlib.thresholds.ThresholdGrid.census`)."""
        size = math.prod(e.size + 1 for e in edges)
        extras = [(census_partials(*certain, edges), 7 * size)]
        sampled, worst, expected = design_weights(batch.weights, batch.audit_probabilities)
        if sampled.any():
            rows = np.flatnonzero(sampled)
            codes = batch.group_codes.take(rows)
            if self.windowed:
                times = batch.event_times_us.take(rows) // self.period_us
                codes = np.searchsorted(buckets, times) * n_groups + codes
            scores = batch.scores.take(rows, axis=0)
            extras.append((grouped_histograms(
                np.concatenate([codes, codes]), np.concatenate([scores, scores]),
                np.repeat([False, True], rows.size), np.concatenate([worst, expected]), edges),
                5 * size))
        return stack_partials([(partials, 0), *extras], GRID_CHANNELS)

    def _bootstrap(self, batch, edges, codes, rows, buckets):
        """Replicate grids of the valid rows per group and for all groups (tagged output).

        ``rows`` (and their ``codes``) are the rows the point grids got. Unrated rows (label
        null) enter the replicates' unrated channel with their own Poisson multipliers, so the
        intervals see the same coverage limit as the point estimate; with audit probabilities
        rated rows weigh ``w / p`` before their multipliers
        (:class:`~costlib.thresholds.BootstrapGrids`).
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


def _duplicate_counter(element: tuple[str, int]) -> Counter:
    """``(group, duplicates)`` -> accounting counters (total, and per group when any)."""
    group, duplicates = element
    counter = Counter({f"{PLAUSIBILITY}duplicate_item_id": duplicates})
    if duplicates:
        counter[f"{PLAUSIBILITY}duplicate_item_id.{group}"] = duplicates
    report_metrics(counter)
    return counter


class AggregateBatches(beam.PTransform):
    """Sources (paths or batches) -> partial grids keyed by group, plus tagged side outputs.

    With ``plausibility.count_duplicate_item_ids`` the item-id keys of every group are combined
    (:class:`CountDuplicateIds`) and the duplicate counts join the accounting; batch runs only
    (in windowed runs accounting panes accumulate, which would count duplicates again; the
    config refuses the combination when it is read).
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
