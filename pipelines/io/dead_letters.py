"""Dead letters: each batch's bad rows written to their own Parquet file.

Shared by recalibrate and decide (``dead_letter/part-<digest>-rg<row group>.parquet``). Classes
live in this module (never in ``__main__``) so that every runner can pickle them.
"""

from __future__ import annotations

import hashlib

import apache_beam as beam

from costlib_pipelines.io.files import write_parquet

__all__ = ["WriteDeadLettersFn", "dead_letter_name"]


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
