"""Reading the score stream: files split into row-group ranges, and the batches of an element.

The unit of parallel reading is a range of row groups (:class:`ReadingUnits`), not a file. An
element of the reading stages is a file path, a :class:`RowGroupRange` or a ready ``(source,
row_group, table)`` batch (as a TestStream provides); :func:`iter_batches` yields the batches of
any of them. Classes live in this module (never in ``__main__``) so that every runner can pickle
them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import apache_beam as beam

from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.files import UNIT_ROWS, RowGroupRange, row_group_ranges, row_group_reads

__all__ = [
    "ReadingUnits", "SplitFilesFn", "batch_reads", "dictionary_columns", "iter_batches",
]


def iter_batches(element, columns: list[str] | None, dictionary: Sequence[str] = ()):
    """``(source, row_group, table)`` for every batch of an element.

    An element is a path (every row group of the file), a :class:`RowGroupRange` (its row
    groups), or one ready batch. String columns named in ``dictionary`` are read from the
    files' dictionary pages, as dictionary arrays (:func:`costlib_pipelines.io.files.
    read_row_groups`; a ready batch comes as it is).
    """
    for read in batch_reads(element, columns, dictionary):
        yield read()


def batch_reads(element, columns: list[str] | None,
                dictionary: Sequence[str] = ()) -> list[Callable[[], tuple[str, int, Any]]]:
    """The batches of an element as reads any thread can run: ``read()`` gives ``(source,
    row_group, table)``, the batches :func:`iter_batches` yields, in the same order.

    A file's footer is read here, once; each read decodes its row group on whichever thread
    calls it (:class:`costlib_pipelines.io.files.RowGroupRead`), so a thread pool reads and
    validates the row groups of one element on every core.
    """
    if isinstance(element, str):
        return [read.batch for read in row_group_reads(element, columns, dictionary=dictionary)]
    if isinstance(element, RowGroupRange):
        return [read.batch for read in row_group_reads(
            element.path, columns, start=element.start, stop=element.stop,
            dictionary=dictionary)]
    return [functools.partial(_ready, element)]


def _ready(batch):
    """A ready ``(source, row_group, table)`` batch, as it came."""
    return batch


def dictionary_columns(config: RunConfig, element) -> list[str]:
    """The columns :func:`iter_batches` reads from the files' dictionary pages for ``element``.

    The group column comes as a dictionary array straight from the files' dictionary pages
    (validation would dictionary-encode it anyway: no string per row); a ready batch comes as
    it is (none). Dead letters get the column back as the file stores it
    (:func:`costlib_pipelines.io.files.as_stored` with these columns).
    """
    return [config.columns["group"]] if isinstance(element, (str, RowGroupRange)) else []


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
