"""The landing directory a followed stream is read from, and the writer's contract.

A producer lands score files in one directory (the glob ``--follow`` names) and says how far
its event times are complete:

1. **A file counts once it is complete under its final name.** Write it elsewhere (or under a
   name starting with ``.`` or ``_``, or ending in ``.tmp``: never matched) and rename it into
   place; that rename is atomic on one filesystem. A file written in place is waited for until
   Parquet's footer is on disk (its last four bytes are the magic ``PAR1``, which writers put
   last). A file without that footer whose last change is older than ``settle_seconds`` is
   taken as it is and dead-lettered as unreadable, so a broken file never blocks the stream.
   Names are never reused. A file is read once while it stays in the directory; a name that
   leaves the directory is forgotten (so what the job keeps is bounded by the directory's
   size, not by time). A name used again is either ignored (the job still holds the first
   file's rows in open windows) or read as a new file whose rows are late or too late.
2. **The watermark file** ``_WATERMARK`` next to the files holds one ISO 8601 time (UTC when it
   has no offset): *every file with rows before this time has landed*. Replace it atomically
   (write, then rename) as time moves on; it never moves back (a smaller value is ignored).
   Event-time windows that end at or before it are judged once every file that was in the
   directory when the watermark was read has been read.
3. A file landing later with rows in a judged window is *late*: within
   ``windowing.allowed_lateness_days`` after the window's end (in watermark time) the window is
   judged again with the late rows (a late pane); after that its rows are counted as too late.

:func:`list_landed` lists the complete files, :func:`read_watermark` reads the watermark file,
and :class:`LandingCursor` turns both into one poll's new outputs (the streaming jobs poll once
a tick and keep the cursor in their state,
:class:`~costlib_pipelines.follow.recalibrate_stream.PollLandingFn`): a :class:`LandedFile` per
new file and a :class:`WatermarkMark` per larger watermark, listing the files emitted since the
previous mark.

What a cursor keeps is bounded: the names emitted that are still in the directory, the largest
watermark emitted, and the files emitted since the last mark. A poll stats only new names and
opens only new names that are not complete yet.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import glob
import os
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from costlib_pipelines.io.files import InputError, check_output_path

__all__ = [
    "WATERMARK_FILE",
    "LandedFile",
    "LandingCursor",
    "WatermarkMark",
    "check_landing",
    "is_complete_parquet",
    "list_landed",
    "read_watermark",
]

#: The producer's watermark file, in the directory of the landing glob.
WATERMARK_FILE = "_WATERMARK"
#: Parquet's magic, first and last four bytes of a complete file.
PARQUET_MAGIC = b"PAR1"
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True, order=True)
class LandedFile:
    """A complete file under the landing glob (``complete`` False: taken unsettled, broken)."""

    path: str
    size: int
    complete: bool = True


@dataclass(frozen=True, order=True)
class WatermarkMark:
    """The producer's watermark (microseconds since the epoch) and the files listed with it:
    windows ending at or before it are judged once all of ``files`` have been read, and every
    earlier mark's. A poller lists the files it emitted since its previous mark (so the marks
    up to this one list every file that was in the directory when the watermark was read)."""

    watermark_us: int
    files: tuple[str, ...]


def _ignored(name: str) -> bool:
    return name.startswith((".", "_")) or name.endswith(".tmp")


def is_complete_parquet(path: str) -> bool:
    """Whether ``path`` starts and ends with Parquet's magic (its footer has been written)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            fh.seek(0, os.SEEK_END)
            if fh.tell() < 12:
                return False
            fh.seek(-4, os.SEEK_END)
            return head == PARQUET_MAGIC and fh.read(4) == PARQUET_MAGIC
    except OSError:
        return False


def _names(pattern: str) -> list[str]:
    """The paths under ``pattern`` (a glob in the file name only) that are not ignored, by
    path; :class:`OSError` when the directory cannot be listed (not an empty directory)."""
    directory, name = os.path.split(pattern)
    return sorted(os.path.join(directory, n) for n in os.listdir(directory or ".")
                  if fnmatch.fnmatchcase(n, name) and not _ignored(n))


def list_landed(pattern: str, *, settle_seconds: float, now: float | None = None,
                known: Collection[str] = (), paths: list[str] | None = None
                ) -> list[LandedFile]:
    """The files under ``pattern`` that count (see the module): complete Parquet files, and
    files without a footer unchanged for ``settle_seconds`` (``complete=False``), by path.

    Paths in ``known`` (emitted before) are skipped without a stat or an open; ``paths``: the
    directory's listing when the caller has it."""
    now = time.time() if now is None else now
    landed = []
    if paths is None:
        paths = [p for p in sorted(glob.glob(pattern)) if not _ignored(os.path.basename(p))]
    for path in paths:
        if path in known or not os.path.isfile(path):
            continue
        try:
            stat = os.stat(path)
        except OSError:  # renamed or removed meanwhile
            continue
        if is_complete_parquet(path):
            landed.append(LandedFile(path, stat.st_size))
        elif now - stat.st_mtime >= settle_seconds:
            landed.append(LandedFile(path, stat.st_size, complete=False))
    return landed


def parse_watermark(text: str) -> int:
    """Microseconds since the epoch of an ISO 8601 time (UTC when it has no offset), exactly
    (no float rounding); ``ValueError`` otherwise."""
    value = dt.datetime.fromisoformat(text.strip())
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - EPOCH) // dt.timedelta(microseconds=1)


def read_watermark(directory: str) -> int | None:
    """The watermark in ``directory/_WATERMARK`` (microseconds), or None when it is missing or
    does not hold a time (a half-written file is read again at the next poll)."""
    try:
        with open(os.path.join(directory, WATERMARK_FILE), encoding="utf-8") as fh:
            return parse_watermark(fh.read())
    except (OSError, ValueError):
        return None


@dataclass
class LandingCursor:
    """What a poller emitted: the names still in the directory (``emitted``), the largest
    watermark (``watermark_us``) and the files emitted since its last mark (``unmarked``;
    before the first mark none are kept: the first lists every name emitted).

    Its size is bounded by the directory's size plus the files of one watermark interval,
    whatever the time the stream has run."""

    emitted: set[str] = field(default_factory=set)
    watermark_us: int | None = None
    unmarked: list[str] = field(default_factory=list)

    def poll(self, pattern: str, settle_seconds: float, now: float | None = None
             ) -> list[LandedFile | WatermarkMark]:
        """One poll: the new files, then a mark when the watermark grew (files first, so a
        mark never names a file not emitted yet). Updates the cursor."""
        try:
            paths = _names(pattern)
        except OSError:  # the directory cannot be listed now: forget nothing, poll again
            return []
        self.emitted.intersection_update(paths)  # a name that left the directory: forgotten
        fresh: list[LandedFile | WatermarkMark] = []
        for landed in list_landed(pattern, settle_seconds=settle_seconds, now=now,
                                  known=self.emitted, paths=paths):
            self.emitted.add(landed.path)
            if self.watermark_us is not None:  # before the first mark: all that is emitted
                self.unmarked.append(landed.path)
            fresh.append(landed)
        watermark = read_watermark(os.path.dirname(pattern) or ".")
        if watermark is not None and (self.watermark_us is None
                                      or watermark > self.watermark_us):
            listed = sorted(self.emitted) if self.watermark_us is None else self.unmarked
            fresh.append(WatermarkMark(watermark, tuple(listed)))
            self.watermark_us, self.unmarked = watermark, []
        return fresh


def check_landing(pattern: str) -> str:
    """``pattern`` if it is a glob of files in one existing local directory (no glob in the
    directory part); else :class:`InputError`, before any other filesystem call sees it."""
    check_output_path(pattern, what="--input (the landing glob)")
    if "://" in pattern:
        raise InputError(f"--input {pattern!r}: --follow watches a local (or mounted) "
                         "directory; a scheme:// path is not supported")
    directory, name = os.path.split(os.path.abspath(pattern))
    if any(c in directory for c in "*?[") or not name:
        raise InputError(f"--input {pattern!r}: give the landing directory's files as "
                         "DIR/*.parquet (a glob in the file name only)")
    if not os.path.isdir(directory):
        raise InputError(f"--input {pattern!r}: landing directory {directory} does not exist")
    return os.path.join(directory, name)
