"""The landing directory a followed stream is read from, and the writer's contract.

A producer lands score files in one directory (the glob ``--follow`` names) and says how far
its event times are complete:

1. **A file counts once it is complete under its final name.** Write it elsewhere (or under a
   name starting with ``.`` or ``_``, or ending in ``.tmp``: never matched) and rename it into
   place; that rename is atomic on one filesystem. A file written in place is waited for until
   Parquet's footer is on disk (its last four bytes are the magic ``PAR1``, which writers put
   last). A file without that footer whose last change is older than ``settle_seconds`` is
   taken as it is and dead-lettered as unreadable, so a broken file never blocks the stream.
   Names are never reused: a file is read once, whatever happens to it later.
2. **The watermark file** ``_WATERMARK`` next to the files holds one ISO 8601 time (UTC when it
   has no offset): *every file with rows before this time has landed*. Replace it atomically
   (write, then rename) as time moves on; it never moves back (a smaller value is ignored).
   Event-time windows that end at or before it are judged once every file that was in the
   directory when the watermark was read has been read.
3. A file landing later with rows in a judged window is *late*: within
   ``windowing.allowed_lateness_days`` after the window's end (in watermark time) the window is
   judged again with the late rows (a late pane); after that its rows are counted as too late.

:func:`list_landed` lists the complete files, :func:`read_watermark` reads the watermark file,
and :class:`PollLanding` turns both into one poll's outputs (a ``Watch`` poll function; the
streaming jobs call it once a tick and keep what they emitted,
:class:`~costlib_pipelines.follow.recalibrate_stream.PollLandingFn`): :class:`LandedFile` per
file and :class:`WatermarkMark` per watermark value.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import time
from dataclasses import dataclass

from apache_beam.io.watch import PollFn, PollResult
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from costlib_pipelines.io.files import InputError, check_output_path

__all__ = [
    "WATERMARK_FILE",
    "LandedFile",
    "PollLanding",
    "WatermarkMark",
    "check_landing",
    "is_complete_parquet",
    "landed_key",
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
    windows ending at or before it are judged once all of ``files`` have been read."""

    watermark_us: int
    files: tuple[str, ...]


def landed_key(output: LandedFile | WatermarkMark) -> str:
    """The key outputs are emitted once by: a path is read once, a watermark used once."""
    if isinstance(output, LandedFile):
        return f"file:{output.path}"
    return f"watermark:{output.watermark_us}"


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


def list_landed(pattern: str, *, settle_seconds: float, now: float | None = None
                ) -> list[LandedFile]:
    """The files under ``pattern`` that count (see the module): complete Parquet files, and
    files without a footer unchanged for ``settle_seconds`` (``complete=False``), by path."""
    now = time.time() if now is None else now
    landed = []
    for path in sorted(glob.glob(pattern)):
        if _ignored(os.path.basename(path)) or not os.path.isfile(path):
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


class PollLanding(PollFn):
    """One poll of the landing glob: every file that counts, then the watermark
    with the files listed (files first, so a watermark never names a file not yet emitted).
    Whoever polls emits each key (:func:`landed_key`) once."""

    def __init__(self, settle_seconds: float):
        self.settle_seconds = settle_seconds

    def __call__(self, pattern: str) -> PollResult:
        landed = list_landed(pattern, settle_seconds=self.settle_seconds)
        watermark = read_watermark(os.path.dirname(pattern) or ".")
        now = Timestamp.now()
        outputs: list = [TimestampedValue(f, now) for f in landed]
        if watermark is not None:
            outputs.append(TimestampedValue(
                WatermarkMark(watermark, tuple(f.path for f in landed)), now))
        return PollResult.incomplete(outputs)


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
