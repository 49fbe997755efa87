"""Edges from a first pass over the data: edge sketches and fine histograms, summed.

``grid.edges: auto``: each batch's edge sketches (:class:`EdgeSketchFn`), summed
(:class:`SumEdgeSketches`, also for the sketches a grid pass carries to the next run);
``quantile``: each batch's fine histograms of the rated scores (:class:`FineHistogramFn`),
summed. :class:`DataEdges` puts either together. Classes live in this module (never in
``__main__``) so that every runner can pickle them.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np

from costlib.thresholds.binning import (
    EdgeSketch,
    decision_edges_from_sketch,
    fine_histogram,
    quantile_edges_from_histogram,
)
from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.batches import validate_batch
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.min_risk import MinRiskSettings, cost_weighted
from costlib_pipelines.io.plausibility import Plausibility
from costlib_pipelines.recalibrate.grids import grid_rows
from costlib_pipelines.recalibrate.reading import dictionary_columns, iter_batches

__all__ = [
    "DataEdges",
    "EdgeSketchFn",
    "FineHistogramFn",
    "SumEdgeSketches",
    "batch_edge_sketches",
    "decision_edges_from_sketches",
    "quantile_edges_from_fine",
]


class FineHistogramFn(beam.DoFn):
    """Per batch, the fine histogram of each classifier's rated scores (for quantile edges)."""

    def __init__(self, config: RunConfig, columns: list[str] | None):
        self.config = config
        self.columns = columns
        self.low, self.high = config.grid.range
        self.resolution = config.grid.quantile_resolution
        self.plausibility = Plausibility.from_config(config)

    def process(self, element):
        dictionary = dictionary_columns(self.config, element)
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
    low, high = config.grid.range
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
        dictionary = dictionary_columns(self.config, element)
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
        if config.grid.edges == "auto":
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
