"""Files: matching input globs, reading Parquet row groups, and writing outputs atomically.

Everything goes through :class:`costlib_pipelines.io.filesystems.FileSystems` (Beam's for any path
with a scheme), so the same code reads
and writes local paths, ``gs://`` on Dataflow, or any other Beam filesystem.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from costlib_pipelines.io.filesystems import FileSystems, is_local

__all__ = [
    "InputError",
    "InputFile",
    "RowGroupRange",
    "RowGroupRead",
    "as_stored",
    "check_rows_read",
    "is_ignored",
    "match_inputs",
    "normalize_path",
    "open_parquet",
    "read_footers",
    "read_row_groups",
    "row_group_ranges",
    "row_group_reads",
    "write_bytes_atomically",
    "write_json",
    "write_parquet",
]


class InputError(ValueError):
    """An input file cannot be used (message names the file, and the row group if known)."""


#: Files a Spark or Hive reader skips: a name (below the matched root) starting with ``_``
#: (``_SUCCESS``, ``_temporary/``, ``_metadata``) or ``.`` (``.part-0.parquet.crc``), and checksums.
IGNORED_PREFIXES = ("_", ".")
IGNORED_SUFFIXES = (".crc",)

_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class InputFile:
    """One input file and what its Parquet footer says (for the run manifest)."""

    path: str
    rows: int
    row_groups: int
    schema: pa.Schema

    def record(self) -> dict[str, Any]:
        """``{"path", "rows", "row_groups"}``: the file's entry in a manifest's ``inputs``."""
        return {"path": self.path, "rows": self.rows, "row_groups": self.row_groups}


def split_patterns(patterns: str | Sequence[str]) -> list[str]:
    """The globs of ``--input``: comma-separated in a string, stripped, empty ones dropped."""
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    return [p.strip() for p in patterns if p.strip()]


def _is_remote(path: str) -> bool:
    return "://" in path


def normalize_path(path: str) -> str:
    """A local path made absolute and normal (``./a/../a/f`` -> ``/cwd/a/f``).

    Paths with a scheme (``gs://...``) are returned unchanged: object names are not paths
    (``a//b`` and ``a/./b`` are distinct objects), and a listing names each object once.
    """
    return path if _is_remote(path) else os.path.abspath(path)


def _identity(path: str) -> str:
    """What makes two matched paths the same file (symlinks resolved on local disks)."""
    return path if _is_remote(path) else os.path.realpath(path)


def _glob_root(pattern: str) -> str:
    """The directory part of a glob's literal prefix (``/d/x/*.parquet`` -> ``/d/x/``)."""
    literal = pattern[: _GLOB.search(pattern).start()]
    return literal[: literal.rfind("/") + 1]


def is_ignored(path: str, root: str) -> bool:
    """True for a file Spark or Hive readers skip (see :data:`IGNORED_PREFIXES`).

    Only the part of ``path`` below ``root`` (the directory a pattern names literally) is
    looked at: a file the user names in full is never ignored.
    """
    relative = path[len(root):] if path.startswith(root) else path.rsplit("/", 1)[-1]
    parts = [part for part in relative.split("/") if part]
    return path.endswith(IGNORED_SUFFIXES) or any(
        part.startswith(IGNORED_PREFIXES) for part in parts
    )


def _match_pattern(pattern: str) -> tuple[list[str], int]:
    """Files of one pattern, directories read recursively; and how many files were ignored.

    A glob matches files; with the same glob plus ``/**`` it also matches the files inside
    directories it matches (a Spark ``x.parquet/`` directory of part files). A literal path
    names a file or a directory (whose files are read). On object stores (``gs://``) a
    "directory" is the common prefix of its objects, which the same two matches find.
    """
    base = pattern.rstrip("/") or pattern
    direct, below = FileSystems.match([pattern, base + "/**"])
    inside = [m.path for m in below.metadata_list]
    if _GLOB.search(pattern):
        root = _glob_root(pattern)
        found = [m.path for m in direct.metadata_list] + inside
    elif inside:  # a literal directory (its own entry in ``direct`` is not a file)
        root = base + "/"
        found = inside
    else:  # a literal file: never ignored
        return [m.path for m in direct.metadata_list], 0
    kept = [path for path in found if not is_ignored(path, root)]
    return kept, len(found) - len(kept)


def match_inputs(patterns: str | Sequence[str]) -> list[str]:
    """Sorted paths of every input file, each once; every pattern must match a file.

    A file that more than one pattern names (the same path given twice, a path and a glob
    that covers it, ``./d/f`` and ``d/f``, a symlink and its target) is read once, with a
    warning on stderr naming the file and the patterns, so a command line that repeats an
    input does not pass unnoticed.

    Parameters
    ----------
    patterns : str or sequence of str
        Globs or paths (comma-separated in a string). A directory (or a glob matching one)
        is read recursively, skipping the files Spark and Hive skip (:func:`is_ignored`).

    Returns
    -------
    list of str
        Local paths absolute and normalised (:func:`normalize_path`); a file matched by
        several patterns, or by ``./d/f`` and ``d/f``, or through a symlink, appears once.

    Raises
    ------
    InputError
        No pattern given, or a pattern that matches no data file (naming the pattern).
    """
    patterns = split_patterns(patterns)
    if not patterns:
        raise InputError("no input pattern given")
    by_identity: dict[str, str] = {}
    named_by: dict[str, list[str]] = {}
    for pattern in patterns:
        paths, ignored = _match_pattern(pattern)
        if not paths:
            why = (f" ({ignored} matched file(s) ignored: names starting with '_' or '.', or "
                   "ending in '.crc', as Spark and Hive readers skip them)" if ignored else "")
            raise InputError(f"no input file matches {pattern}{why}")
        for path in map(normalize_path, paths):
            key = _identity(path)
            by_identity[key] = min(path, by_identity.get(key, path))
            named_by.setdefault(key, []).append(pattern)
    repeated = sorted((by_identity[k], p) for k, p in named_by.items() if len(p) > 1)
    if repeated:
        path, names = repeated[0]
        more = f" (and {len(repeated) - 1} more file(s))" if len(repeated) > 1 else ""
        print(f"warning: --input names {len(repeated)} file(s) more than once, each read once: "
              f"{path} by {' and '.join(repr(n) for n in names)}{more}; check the command line "
              "for a repeated or overlapping input", file=sys.stderr)
    return sorted(by_identity.values())


def open_parquet(path: str, read_dictionary: Sequence[str] = ()) -> pq.ParquetFile:
    """Open a Parquet file, turning every failure into an :class:`InputError` naming the file.

    Page checksums (CRC32, written with ``write_page_checksum=True``) are verified whenever a
    page has one; pages without one are read as before. Columns named in ``read_dictionary``
    are read as Arrow dictionary arrays when they are stored as strings or bytes (others are
    read as usual).
    """
    try:
        handle = FileSystems.open(path, compression_type="uncompressed")
        return pq.ParquetFile(handle, page_checksum_verification=True,
                              read_dictionary=list(read_dictionary) or None)
    except Exception as exc:  # pyarrow raises several exception types for bad footers
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from exc


def read_footers(paths: Sequence[str]) -> list[InputFile]:
    """Rows, row groups and Arrow schema of every file, from its footer only."""
    footers = []
    for path in paths:
        parquet = open_parquet(path)
        footers.append(InputFile(path=path, rows=parquet.metadata.num_rows,
                                 row_groups=parquet.num_row_groups, schema=parquet.schema_arrow))
    return footers


def check_rows_read(inputs: Sequence[dict[str, Any]], read: int) -> None:
    """Rows read by the pipeline must equal the rows the input footers hold.

    Raises
    ------
    RuntimeError
        They differ (a row group skipped or read twice).
    """
    expected = sum(int(entry["rows"]) for entry in inputs)
    if inputs and expected != read:
        raise RuntimeError(f"row accounting does not add up: the pipeline read {read} rows, "
                           f"but the {len(inputs)} input file footers hold {expected}")


def read_row_groups(
    path: str, columns: Sequence[str] | None = None, *, start: int = 0,
    stop: int | None = None, dictionary: Sequence[str] = (),
) -> Iterator[tuple[int, pa.Table]]:
    """``(row_group_index, table)`` for every row group of a Parquet file (or of ``start ..
    stop - 1``).

    A file with no row group yields nothing (it has zero rows). A row group that cannot be
    decoded raises :class:`InputError` naming the file and the row group. String columns
    named in ``dictionary`` come as dictionary arrays, decoded from the file's dictionary
    pages (for low-cardinality columns such as the group: no string per row is built).
    """
    for read in row_group_reads(path, columns, start=start, stop=stop, dictionary=dictionary):
        yield read.index, read.table()


def row_group_reads(
    path: str, columns: Sequence[str] | None = None, *, start: int = 0,
    stop: int | None = None, dictionary: Sequence[str] = (),
) -> list[RowGroupRead]:
    """The row groups of a Parquet file (or ``start .. stop - 1``) as reads any thread can run.

    The footer is read once, here (an unreadable file raises :class:`InputError` now). A local
    file is opened again by each :meth:`RowGroupRead.table` with that footer (an open costs
    microseconds), so the row groups of one file are decoded on several threads at once. On a
    remote filesystem (``gs://``) an open is a request: the reads share the handle opened here,
    one at a time, as a single reader would.
    """
    parquet = open_parquet(path, dictionary)
    metadata = parquet.metadata
    stop = metadata.num_row_groups if stop is None else min(stop, metadata.num_row_groups)
    names = tuple(columns) if columns else None
    shared = None if is_local(path) else _SharedReader(parquet, threading.Lock())
    return [RowGroupRead(path, index, names, tuple(dictionary), metadata, shared)
            for index in range(start, stop)]


@dataclass(frozen=True, eq=False)
class _SharedReader:
    """One open Parquet file whose row groups are read one at a time (remote paths)."""

    parquet: pq.ParquetFile
    lock: threading.Lock


@dataclass(frozen=True, eq=False)
class RowGroupRead:
    """One row group of a Parquet file, to be read on any thread (see :func:`row_group_reads`)."""

    path: str
    index: int
    columns: tuple[str, ...] | None
    dictionary: tuple[str, ...]
    metadata: pq.FileMetaData
    shared: _SharedReader | None = None  # a remote file's one handle (see row_group_reads)

    def table(self) -> pa.Table:
        """The row group's ``columns`` (:class:`InputError` naming the file and row group if
        it cannot be decoded; page checksums verified where written)."""
        columns = list(self.columns) if self.columns else None
        try:
            if self.shared is not None:
                with self.shared.lock:
                    return self.shared.parquet.read_row_group(self.index, columns=columns)
            with FileSystems.open(self.path, compression_type="uncompressed") as handle:
                parquet = pq.ParquetFile(handle, metadata=self.metadata,
                                         page_checksum_verification=True,
                                         read_dictionary=list(self.dictionary) or None)
                return parquet.read_row_group(self.index, columns=columns)
        except Exception as exc:
            what = ("a page checksum does not match: the file is corrupt"
                    if "checksum" in str(exc).lower() else "cannot be read")
            raise InputError(f"{self.path}: row group {self.index}: {what} ({exc})") from exc

    def batch(self) -> tuple[str, int, pa.Table]:
        """``(path, row_group_index, table)``: what the reading stages process."""
        return self.path, self.index, self.table()


def as_stored(table: pa.Table, path: str, columns: Sequence[str]) -> pa.Table:
    """``table`` with ``columns`` (read as dictionaries, :func:`read_row_groups`) back to the
    field the file at ``path`` stores (its footer is read only when one differs): what dead
    letters carry, the rows exactly as the file holds them."""
    changed = [name for name in columns if pa.types.is_dictionary(table.schema.field(name).type)]
    if not changed:
        return table
    stored = open_parquet(path).schema_arrow
    for name in changed:
        field = stored.field(name)
        if field.type != table.schema.field(name).type:
            table = table.set_column(table.schema.get_field_index(name), field,
                                     table.column(name).cast(field.type))
    return table


@dataclass(frozen=True)
class RowGroupRange:
    """A unit of parallel reading: row groups ``start .. stop - 1`` of one Parquet file."""

    path: str
    start: int
    stop: int


#: Rows a reading unit aims at (several row groups of one file, never a partial row group).
UNIT_ROWS = 1_000_000


def row_group_ranges(path: str, target_rows: int = UNIT_ROWS) -> Iterator[RowGroupRange]:
    """Split a file into consecutive row-group ranges of about ``target_rows`` rows each.

    From the footer only. Every row group is in exactly one range (a row group larger than
    ``target_rows`` is a range of its own); a file without row groups gives no range.
    """
    metadata = open_parquet(path).metadata
    start, rows = 0, 0
    for index in range(metadata.num_row_groups):
        rows += metadata.row_group(index).num_rows
        if rows >= target_rows:
            yield RowGroupRange(path, start, index + 1)
            start, rows = index + 1, 0
    if start < metadata.num_row_groups:
        yield RowGroupRange(path, start, metadata.num_row_groups)


def check_output_path(path: str, *, what: str = "output") -> str:
    """``path`` if a filesystem could hold it; else :class:`InputError` (one line), before any
    filesystem call sees it: empty, or with a NUL or other control character."""
    if not path.strip():
        raise InputError(f"{what} {path!r}: not a path")
    control = next((c for c in path if ord(c) < 32 or ord(c) == 127), None)
    if control is not None:
        raise InputError(f"{what} {path!r}: contains the control character {control!r}; "
                         "give a plain path")
    return path


def unwritable_reason(exc: OSError) -> str:
    """Why a path cannot be written, in words: ``not writable`` for a permission or a
    read-only filesystem, else the system's text (``No such file or directory``)."""
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "not writable"
    return exc.strerror or str(exc)


def make_local_directory(directory: str, error: type[InputError] = InputError) -> None:
    """Create a local output directory and its parents (``error``, naming the directory and
    why, when that is impossible: under a file, on a read-only or virtual filesystem)."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        reason = ("a file of that name is in the way" if isinstance(exc, FileExistsError)
                  else unwritable_reason(exc))
        raise error(f"{directory}: cannot create the output directory ({reason})") from exc


def write_output_file(path: str, data: bytes, *, what: str = "the output file") -> None:
    """Write one output file a person named (``costlib report --out``) atomically, its
    directory created when local; every path a filesystem refuses is an :class:`InputError`
    in one line (exit 2), never a traceback."""
    check_output_path(path, what=what)
    if not _is_remote(path):
        make_local_directory(os.path.dirname(os.path.abspath(path)))
    try:
        write_bytes_atomically(path, data)
    except OSError as exc:  # Beam's BeamIOError is an OSError too
        reason = unwritable_reason(exc) if exc.errno is not None else " ".join(str(exc).split())
        raise InputError(f"{path}: cannot write {what} ({reason})") from exc


def parquet_bytes(table: pa.Table, compression: str = "zstd") -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=compression)
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
