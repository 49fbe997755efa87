"""The state of a followed stream's windows: partial grids by period, the producer's watermark,
and which windows are judged; no Beam here (the judging DoFn keeps one book in its state).

Windows are Beam's ``SlidingWindows(size, period)`` of a batch windowed run: starts at multiples
of ``period`` (from the epoch), each ``[start, start + size)``. The readers histogram every file
into partial grids per *period bucket* ``[b, b + period)`` and group, as a batch windowed run
does (:class:`~costlib_pipelines.recalibrate.aggregating.AggregateBatchesFn`), and a bucket
belongs to the windows whose span holds its start ``b``. A window's grid is the sum of its
buckets' partials: the same sums, so the same points, as the batch run over the same rows.

The book does not use Beam's watermark. It advances on the producer's watermark
(:class:`~costlib_pipelines.follow.landing.WatermarkMark`) once every file listed with it has
been read: the watermark is part of the checkpointed state, so it survives a restart as it was
(Beam restarts watermarks after a restore, apache/beam#25975, which let a late file reopen a
closed window as if it were new). Windows:

- *final* when the watermark reaches their end: judged once (pane 0), in order of end;
- *late* when a file brings rows to a judged window before ``end + allowed_lateness``: judged
  again with every row so far (pane 1, 2, ...);
- *expired* after ``end + allowed_lateness``: their buckets are dropped once no open window
  needs them; rows that arrive for expired windows only are counted as too late.

A file is added once: a path seen before is ignored (a restart replays elements read after the
last checkpoint; the book from that checkpoint has not seen them, so nothing is counted twice).

What the book keeps is bounded by the windows open at a time, not by how long the stream has
run:

- ``grids``/``boots``: the buckets of windows not retired; ``panes``: the judged windows not
  retired (:meth:`WindowBook.expire`);
- ``files``: a path is kept until a mark listing it has arrived and every window its rows touch
  is retired (then only a file landing again under the same name could be counted again, and
  its rows would all be too late); so the paths of about ``size + allowed lateness`` of event
  time, plus those read since the last mark;
- ``marks``: the marks waiting for files (each lists the files emitted since the previous one);
- ``dead_files``: the :data:`DEAD_FILES_KEPT` most recent, and a count (every one has its
  dead-letter record on disk).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from costlib.thresholds.loop import ALL_GROUPS

__all__ = ["DEAD_FILES_KEPT", "FilePartials", "WindowBook"]

#: How many dead-lettered files the book names (the most recent); all are counted.
DEAD_FILES_KEPT = 50


@dataclass
class FilePartials:
    """What a reader made of one landed file.

    ``grids``/``boots``: ``(bucket start µs, group, partial)``; ``accounting``: the row
    accounting; ``event_range``: ``(min, max)`` event time in µs or None; ``dead``: why the
    whole file was dead-lettered (None when it was read).
    """

    path: str
    grids: list[tuple[int, str, Any]] = field(default_factory=list)
    boots: list[tuple[int, str, Any]] = field(default_factory=list)
    accounting: Counter = field(default_factory=Counter)
    event_range: tuple[int, int] | None = None
    dead: str | None = None


@dataclass
class WindowBook:
    """Partial grids by bucket and group, the watermark, and the panes of judged windows.

    ``grid_sum`` and ``boot_sum`` are the combiners of the batch run (``SumGrids``,
    ``SumBootstrapGrids``): accumulators are added to, compacted and merged with them.
    """

    size_us: int
    period_us: int
    lateness_us: int
    grids: dict[int, dict[str, Any]] = field(default_factory=dict)
    boots: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: Paths added and not forgotten yet: the start of the last window their rows touch
    #: (None: no rows).
    files: dict[str, int | None] = field(default_factory=dict)
    #: Paths added that no mark has listed yet (kept until one does).
    unlisted: set[str] = field(default_factory=set)
    files_added: int = 0
    #: The most recent dead-lettered files (path: reason), and how many there were in all.
    dead_files: dict[str, str] = field(default_factory=dict)
    dead_total: int = 0
    #: Marks waiting for files, by watermark: ``(watermark µs, files not read yet)``.
    marks: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    watermark_us: int | None = None
    panes: dict[int, int] = field(default_factory=dict)
    #: Windows starting at or before this are retired (judged, or final without data, and
    #: past their allowed lateness): never judged again, their buckets dropped.
    retired_through_us: int | None = None
    event_min_us: int | None = None
    event_max_us: int | None = None
    accounting: Counter = field(default_factory=Counter)

    # ------------------------------------------------------------------ geometry
    def windows_of(self, bucket_us: int) -> list[int]:
        """Starts of the windows holding the bucket that starts at ``bucket_us``."""
        first = bucket_us - bucket_us % self.period_us
        starts = []
        start = first
        while start + self.size_us > bucket_us:
            starts.append(start)
            start -= self.period_us
        return starts

    def expired(self, start_us: int) -> bool:
        """Whether the window starting at ``start_us`` is past its allowed lateness."""
        return (self.watermark_us is not None
                and start_us + self.size_us + self.lateness_us <= self.watermark_us)

    def buckets_of(self, start_us: int) -> list[int]:
        """The buckets with data inside the window starting at ``start_us``."""
        end = start_us + self.size_us
        return sorted(b for b in self.grids if start_us <= b < end)

    # ------------------------------------------------------------------ updates
    def add_file(self, partials: FilePartials, grid_sum, boot_sum) -> list[int]:
        """Add a file's partials; returns the judged windows it changes (late panes due),
        in order of end. A file added before (and not forgotten) changes nothing."""
        if partials.path in self.files:
            return []
        self.files_added += 1
        starts_touched = [self.windows_of(b)[0] for b, _, _ in (*partials.grids,
                                                                 *partials.boots)]
        self.files[partials.path] = max(starts_touched) if starts_touched else None
        waiting = [i for i, (_, files) in enumerate(self.marks) if partials.path in files]
        for i in waiting:
            watermark, files = self.marks[i]
            self.marks[i] = (watermark, tuple(f for f in files if f != partials.path))
        if not waiting:
            self.unlisted.add(partials.path)
        if partials.dead is not None:
            self.dead_total += 1
            self.dead_files[partials.path] = partials.dead
            while len(self.dead_files) > DEAD_FILES_KEPT:
                del self.dead_files[next(iter(self.dead_files))]
        self.accounting.update(partials.accounting)
        if partials.event_range is not None:
            low, high = partials.event_range
            self.event_min_us = low if self.event_min_us is None else min(self.event_min_us, low)
            self.event_max_us = high if self.event_max_us is None else max(self.event_max_us,
                                                                            high)
        late: set[int] = set()
        # rated rows too late: the all-groups partial holds every row once (when there is one)
        parent = any(group == ALL_GROUPS for _, group, _ in partials.grids)
        for store, combine, items, counted in ((self.grids, grid_sum, partials.grids, True),
                                               (self.boots, boot_sum, partials.boots, False)):
            for bucket, group, value in items:
                starts = self.windows_of(bucket)
                if all(self.expired(s) for s in starts):
                    if counted and (group == ALL_GROUPS or not parent):
                        self.accounting["too_late.rated_rows"] += int(value[2])
                        self.accounting["too_late.partials"] += 1
                    continue
                groups = store.setdefault(bucket, {})
                acc = groups.get(group, combine.create_accumulator())
                groups[group] = combine.compact(combine.add_input(acc, value))
                late.update(s for s in starts if s in self.panes and not self.expired(s))
        return sorted(late)

    def add_mark(self, watermark_us: int, files: tuple[str, ...]) -> None:
        """Keep the producer's watermark until every file listed with it (not added yet) is
        added (a mark not newer than the watermark moves nothing, but is waited for all the
        same: its files are earlier); its files are no longer :attr:`unlisted`."""
        self.unlisted.difference_update(files)
        waiting = tuple(f for f in files if f not in self.files)
        self.marks.append((watermark_us, waiting))
        self.marks.sort(key=lambda m: m[0])

    def advance(self) -> list[int]:
        """Move the watermark through the marks whose files, and every earlier mark's, are
        all added; returns the windows that are final and not judged yet, in order of end
        (then start)."""
        ready = 0
        while ready < len(self.marks) and not self.marks[ready][1]:
            ready += 1
        if not ready:
            return []
        newest = self.marks[ready - 1][0]
        self.marks = self.marks[ready:]
        if self.watermark_us is None or newest > self.watermark_us:
            self.watermark_us = newest
        return self.final_unjudged()

    def final_unjudged(self) -> list[int]:
        """Windows with data whose end the watermark reached and which have no pane yet (a
        watermark that jumps past a window's allowed lateness judges it all the same: its
        buckets are dropped only after, by :meth:`expire`)."""
        if self.watermark_us is None:
            return []
        retired = self.retired_through_us
        starts = {s for b in self.grids for s in self.windows_of(b)
                  if s + self.size_us <= self.watermark_us and s not in self.panes
                  and (retired is None or s > retired)}
        return sorted(starts)

    def next_pane(self, start_us: int) -> int:
        """The pane index the window's next judgement gets (0 for the on-time one)."""
        self.panes[start_us] = self.panes.get(start_us, -1) + 1
        return self.panes[start_us]

    def window_sums(self, start_us: int, grid_sum, boot_sum
                    ) -> dict[str, tuple[Any, Any]]:
        """Per group, the window's summed grid (``grid_sum``'s output) and replicate grids
        (None without bootstrap): the sums of its buckets' accumulators (never modified)."""
        buckets = self.buckets_of(start_us)
        groups = sorted({g for b in buckets for g in self.grids[b]})
        sums = {}
        for group in groups:
            accs = [self.grids[b][group] for b in buckets if group in self.grids[b]]
            grid = grid_sum.extract_output(grid_sum.merge_accumulators(accs))
            boot_accs = [self.boots[b][group] for b in buckets
                         if group in self.boots.get(b, {})]
            boot = (boot_sum.extract_output(boot_sum.merge_accumulators(boot_accs))
                    if boot_accs else None)
            sums[group] = (grid, boot)
        return sums

    def expire(self) -> None:
        """Retire the expired windows: drop their panes, and the buckets only they hold;
        forget the paths listed by a mark whose rows are all in retired windows.

        Called after the watermark's final windows are judged, so every expired window was
        judged or had no data when it was final."""
        if self.watermark_us is None:
            return
        retired = self.watermark_us - self.size_us - self.lateness_us
        self.retired_through_us = retired
        for bucket in [b for b in self.grids if self.expired(b)]:
            del self.grids[bucket]
            self.boots.pop(bucket, None)
        for start in [s for s in self.panes if self.expired(s)]:
            del self.panes[start]
        for path in [p for p, last in self.files.items()
                     if p not in self.unlisted and (last is None or last <= retired)]:
            del self.files[path]

    def time_range(self) -> dict[str, str] | None:
        """The event-time range the windows' eligibility is judged on: the earliest event read
        to the later of the latest event and the watermark (ISO 8601), None before any row."""
        if self.event_min_us is None:
            return None
        high = max(self.event_max_us or self.event_min_us, self.watermark_us or 0)
        return {"min_utc": _iso(self.event_min_us), "max_utc": _iso(high)}

    def status(self) -> dict[str, Any]:
        """What ``costlib status`` shows of the stream."""
        return {
            "files_read": self.files_added - self.dead_total,
            "files_dead_lettered": dict(sorted(self.dead_files.items())),
            "files_dead_lettered_total": self.dead_total,
            "watermark_utc": None if self.watermark_us is None else _iso(self.watermark_us),
            "watermarks_waiting": len(self.marks),
            "open_buckets": len(self.grids),
            "event_time_range": self.time_range(),
            "row_accounting": self.row_accounting(),
        }

    def row_accounting(self) -> dict[str, Any]:
        """The rows read so far as a batch run's manifest shows them (read = used + unrated +
        dead-lettered), plus the files read and dead-lettered whole and the rows too late."""
        from costlib_pipelines.io.runs import check_accounting

        rows = {k: v for k, v in self.accounting.items()
                if not k.startswith(("files_", "too_late."))}
        extra = {k: v for k, v in self.accounting.items()
                 if k.startswith(("files_", "too_late."))}
        return {**check_accounting(rows), **dict(sorted(extra.items()))}


def _iso(micros: int) -> str:
    import datetime as dt

    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
            + dt.timedelta(microseconds=micros)).isoformat()
