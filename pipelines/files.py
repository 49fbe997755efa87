"""Files: matching input globs, reading Parquet row groups, and writing outputs atomically.

Everything goes through :class:`apache_beam.io.filesystems.FileSystems`, so the same code reads
and writes local paths, ``gs://`` on Dataflow, or any other Beam filesystem.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

__all__ = [
    "InputError",
    "match_inputs",
    "read_row_groups",
    "write_bytes_atomically",
    "write_json",
    "write_parquet",
]


class InputError(ValueError):
    """An input file cannot be used (message names the file, and the row group if known)."""


def match_inputs(patterns: str | Sequence[str]) -> list[str]:
    """Sorted, de-duplicated paths matching one or more globs (comma-separated allowed)."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p.strip()]
    paths: set[str] = set()
    for result in FileSystems.match(list(patterns)):
        paths.update(m.path for m in result.metadata_list)
    if not paths:
        raise InputError(f"no input file matches {', '.join(patterns)}")
    return sorted(paths)


def open_parquet(path: str) -> pq.ParquetFile:
    """Open a Parquet file, turning every failure into an :class:`InputError` naming the file."""
    try:
        handle = FileSystems.open(path, compression_type="uncompressed")
        return pq.ParquetFile(handle)
    except Exception as exc:  # pyarrow raises several exception types for bad footers
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from exc


def read_row_groups(
    path: str, columns: Sequence[str] | None = None
) -> Iterator[tuple[int, pa.Table]]:
    """``(row_group_index, table)`` for every row group of a Parquet file.

    A file with no row group yields nothing (it has zero rows). A row group that cannot be
    decoded raises :class:`InputError` naming the file and the row group.
    """
    parquet = open_parquet(path)
    for index in range(parquet.num_row_groups):
        try:
            table = parquet.read_row_group(index, columns=list(columns) if columns else None)
        except Exception as exc:
            raise InputError(f"{path}: row group {index} cannot be read ({exc})") from exc
        yield index, table


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def write_bytes_atomically(path: str, data: bytes) -> None:
    """Write to ``path + '.tmp'`` then rename, so readers never see a partial file."""
    tmp = path + ".tmp"
    with FileSystems.create(tmp) as fh:
        fh.write(data)
    # Rename replaces an existing file: atomically on local disks (os.rename); on GCS by a copy
    # over the destination. There is never a moment without the file.
    FileSystems.rename([tmp], [path])


def write_parquet(path: str, table: pa.Table) -> None:
    write_bytes_atomically(path, parquet_bytes(table))


def write_json(path: str, value: Any) -> None:
    write_bytes_atomically(path, (json.dumps(value, indent=2, sort_keys=True) + "\n").encode())
