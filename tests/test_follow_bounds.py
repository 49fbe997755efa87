"""What the followed stream keeps stays bounded however long it runs, and bounding it changes
no judged window.

- The poller's cursor (:class:`LandingCursor`) against a real landing directory that keeps a
  fixed number of files: its pickled size after 5,000 files is that after 500.
- The window book fed thousands of files over many windows: its pickled size does not grow
  with the number of files, and every window's last pane equals a naive computation that
  keeps everything (which windows a row counts for, from the order of arrival alone), also
  when the book is restored from a pickle at random points and the elements after it replayed.
"""

from __future__ import annotations

import datetime as dt
import pickle
import random
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from follow_support import Adding
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib_pipelines.follow import landing
from costlib_pipelines.follow.landing import LandedFile, LandingCursor, WatermarkMark, list_landed
from costlib_pipelines.follow.window_book import DEAD_FILES_KEPT, FilePartials, WindowBook

HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US


# ----------------------------------------------------------------------------- the poller
@pytest.fixture(scope="module")
def parquet_bytes(tmp_path_factory):
    path = tmp_path_factory.mktemp("one") / "x.parquet"
    pq.write_table(pa.table({"x": [1]}), path)
    return path.read_bytes()


def land(directory, name, data):
    (directory / f".{name}").write_bytes(data)
    (directory / f".{name}").rename(directory / name)


def test_the_cursor_keeps_only_names_still_in_the_directory(tmp_path, parquet_bytes):
    """5,000 files land, the directory keeps the newest 200 (older ones moved out): the
    cursor emits each file once, and its pickled size does not grow with the files landed."""
    pattern = str(tmp_path / "*.parquet")
    cursor, emitted, sizes = LandingCursor(), [], {}
    for i in range(5_000):
        land(tmp_path, f"f{i:07d}.parquet", parquet_bytes)
        if i >= 200:
            (tmp_path / f"f{i - 200:07d}.parquet").unlink()
        if i % 10 == 9:
            watermark = dt.datetime(2026, 1, 1) + dt.timedelta(hours=i)
            (tmp_path / "_WATERMARK").write_text(watermark.isoformat())
            emitted += cursor.poll(pattern, settle_seconds=60)
        if i + 1 in (500, 5_000):
            sizes[i + 1] = len(pickle.dumps(cursor))
    files = [o.path for o in emitted if isinstance(o, LandedFile)]
    assert files == [str(tmp_path / f"f{i:07d}.parquet") for i in range(5_000)]
    assert len(cursor.emitted) == 200
    assert sizes[5_000] <= 1.1 * sizes[500], sizes
    marks = [o for o in emitted if isinstance(o, WatermarkMark)]
    assert [m.watermark_us for m in marks] == sorted({m.watermark_us for m in marks})
    listed = [f for m in marks for f in m.files]  # each file listed once, by the next mark
    assert sorted(listed) == sorted(files[: len(listed)]) and len(set(listed)) == len(listed)


def test_without_a_watermark_the_cursor_keeps_only_the_names(tmp_path, parquet_bytes):
    """A directory without ``_WATERMARK`` (the score files ``decide --follow`` reads): nothing
    waits for a mark, so nothing but the names in the directory is kept; the first watermark
    lists every file emitted before it."""
    pattern = str(tmp_path / "*.parquet")
    cursor = LandingCursor()
    for i in range(300):
        land(tmp_path, f"f{i:04d}.parquet", parquet_bytes)
        if i >= 20:
            (tmp_path / f"f{i - 20:04d}.parquet").unlink()
        cursor.poll(pattern, settle_seconds=60)
    assert cursor.unmarked == [] and len(cursor.emitted) == 20
    (tmp_path / "_WATERMARK").write_text("2026-01-01")
    (mark,) = cursor.poll(pattern, settle_seconds=60)
    assert mark.files == tuple(str(tmp_path / f"f{i:04d}.parquet") for i in range(280, 300))


def test_a_poll_opens_only_new_files(tmp_path, parquet_bytes, monkeypatch):
    for i in range(5):
        land(tmp_path, f"f{i}.parquet", parquet_bytes)
    opened = []
    real = landing.is_complete_parquet
    monkeypatch.setattr(landing, "is_complete_parquet", lambda p: opened.append(p) or real(p))
    cursor = LandingCursor()
    assert len(cursor.poll(str(tmp_path / "*.parquet"), settle_seconds=60)) == 5
    land(tmp_path, "f5.parquet", parquet_bytes)
    opened.clear()
    assert [o.path for o in cursor.poll(str(tmp_path / "*.parquet"), settle_seconds=60)] == [
        str(tmp_path / "f5.parquet")]
    assert opened == [str(tmp_path / "f5.parquet")]
    assert list_landed(str(tmp_path / "*.parquet"), settle_seconds=60,
                       known={str(tmp_path / "f0.parquet")})[0].path.endswith("f1.parquet")


def test_a_restored_cursor_emits_what_its_checkpoint_had_not(tmp_path, parquet_bytes):
    """A restore from a checkpoint: the files landed after it are emitted again, and the next
    mark lists every file emitted since the checkpoint's last mark."""
    pattern = str(tmp_path / "*.parquet")
    cursor = LandingCursor()
    land(tmp_path, "a.parquet", parquet_bytes)
    (tmp_path / "_WATERMARK").write_text("2026-01-01")
    cursor.poll(pattern, settle_seconds=60)
    land(tmp_path, "b.parquet", parquet_bytes)
    cursor.poll(pattern, settle_seconds=60)  # b: emitted, not listed by a mark yet
    checkpoint = pickle.dumps(cursor)
    land(tmp_path, "c.parquet", parquet_bytes)
    (tmp_path / "_WATERMARK").write_text("2026-01-02")
    first = cursor.poll(pattern, settle_seconds=60)
    again = pickle.loads(checkpoint).poll(pattern, settle_seconds=60)
    assert first == again
    assert [o.path for o in again[:-1]] == [str(tmp_path / "c.parquet")]
    assert again[-1].files == (str(tmp_path / "b.parquet"), str(tmp_path / "c.parquet"))


def test_a_directory_that_cannot_be_listed_forgets_nothing(tmp_path, parquet_bytes):
    land(tmp_path, "a.parquet", parquet_bytes)
    cursor = LandingCursor()
    cursor.poll(str(tmp_path / "*.parquet"), settle_seconds=60)
    assert cursor.poll(str(tmp_path / "gone" / "*.parquet"), settle_seconds=60) == []
    assert cursor.emitted == {str(tmp_path / "a.parquet")}


# ----------------------------------------------------------------------------- the book
SIZE, PERIOD, LATENESS = 2 * DAY_US, DAY_US, DAY_US
HOURS_PER_FILE = 5


def stream(n_files: int, rng: random.Random, *, late_every: int = 13, too_late_every: int = 97,
           twice: bool = True):
    """The elements a poller emits for ``n_files`` files of 5 hours of event time each, the
    watermark after each file at the end of the event time landed so far: some files land a
    few files later (late: within the allowed lateness), some much later (too late), one in
    nine is dead-lettered. A mark lists the files emitted since the previous mark. Some files
    reach the judge after their mark, some twice (``twice``)."""
    order = list(range(n_files))
    for i in range(0, n_files, late_every):
        j = min(n_files - 1, i + rng.randint(1, 4))
        if j == i:
            continue
        order.remove(i)
        order.insert(order.index(j) + 1, i)
    for i in range(5, n_files, too_late_every):
        j = min(n_files - 1, i + 30)
        if i in order and j > i:
            order.remove(i)
            order.insert(order.index(j) + 1, i)
    elements, since, landed_through, watermark = [], [], 0, 0
    for i in order:
        path = f"/land/part-{i:09d}.parquet"
        dead = i % 9 == 7
        hour = i * HOURS_PER_FILE
        grids = [] if dead else [((hour + h) // 24 * DAY_US, "g", (None, None, 1 + (i + h) % 3))
                                 for h in range(HOURS_PER_FILE)]
        elements.append(FilePartials(path, grids=grids, accounting=Counter(read=1),
                                     dead="unreadable" if dead else None))
        since.append(path)
        landed_through = max(landed_through, i + 1)
        if landed_through * HOURS_PER_FILE * HOUR_US > watermark:  # as a poller: on a move
            watermark = landed_through * HOURS_PER_FILE * HOUR_US
            elements.append(WatermarkMark(watermark, tuple(since)))
            since = []
    # what the judge may see besides: a file after its mark (a slow reader), and a file
    # delivered twice (at-least-once delivery), up to 60 elements later
    for k in range(len(elements) - 3, -1, -1):
        if isinstance(elements[k], FilePartials) and rng.random() < 0.1:
            elements.insert(k + rng.randint(2, 3), elements.pop(k))
    for k in range(len(elements) - 1, -1, -1):
        if twice and isinstance(elements[k], FilePartials) and rng.random() < 0.05:
            elements.insert(min(len(elements), k + rng.randint(1, 60)), elements[k])
    return elements


def reference(elements) -> dict[int, int]:
    """Every window's last pane, naively: a row counts for a window when it arrives before the
    window is past its allowed lateness (the watermark: the newest mark whose files and every
    earlier mark's have all arrived), and a window is judged once the watermark reaches its
    end; everything kept, nothing forgotten."""
    arrived, marks, watermark = set(), [], None
    sums: Counter = Counter()
    for element in elements:
        if isinstance(element, FilePartials):
            if element.path in arrived:
                continue
            arrived.add(element.path)
            for bucket, _, value in element.grids:
                for start in range(bucket - bucket % PERIOD, bucket - SIZE, -PERIOD):
                    if watermark is None or start + SIZE + LATENESS > watermark:
                        sums[start] += value[2]
        elif watermark is None or element.watermark_us > watermark:
            marks = sorted([*marks, element], key=lambda m: m.watermark_us)
        while marks and set(marks[0].files) <= arrived:
            watermark = max(watermark or 0, marks.pop(0).watermark_us)
    return {s: v for s, v in sums.items() if watermark is not None and s + SIZE <= watermark}


def run_book(elements, restarts: list[tuple[int, int]] = ()):
    """Feed ``elements`` one at a time to a book as the judge does; at each ``(checkpoint,
    crash)`` pair the book is pickled after element ``checkpoint`` and, at element ``crash``,
    restored from that pickle and the elements after the checkpoint replayed. Returns the
    last pane's sum per window, every (window, pane) judged with its sums, and the largest
    pickled size seen."""
    adding = Adding()
    book = WindowBook(SIZE, PERIOD, LATENESS)
    judged: dict[tuple[int, int], set[int]] = {}
    last: dict[int, int] = {}
    checkpoints = dict(restarts)
    crashes = {crash: check for check, crash in restarts}
    saved, largest, i, replays = {}, 0, 0, set()
    while i < len(elements):
        element = elements[i]
        if isinstance(element, FilePartials):
            due = book.add_file(element, adding, adding)
        else:
            book.add_mark(element.watermark_us, element.files)
            due = []
        for start in [*due, *book.advance()]:
            pane = book.next_pane(start)
            total = book.window_sums(start, adding, adding)["g"][0]
            judged.setdefault((start, pane), set()).add(total)
            last[start] = total
        book.expire()
        blob = pickle.dumps(book)
        largest = max(largest, len(blob))
        if i in checkpoints:
            saved[i] = blob
        i += 1
        if i in crashes and i not in replays:
            replays.add(i)
            book = pickle.loads(saved[crashes[i]])
            i = crashes[i] + 1
    return last, judged, largest, book


def test_the_book_stays_bounded_and_judges_as_the_naive_computation():
    """Without files delivered twice (Flink's exactly-once delivery) the pickled book does not
    grow with the files; with them (at-least-once), the windows are still the same."""
    rng = random.Random(5)
    sizes = {}
    for n in (500, 5_000):
        for twice in (True, False):
            elements = stream(n, rng, twice=twice)
            last, judged, _, book = run_book(elements)
            want = reference(elements)
            assert last == want
            assert len(want) > n * HOURS_PER_FILE // 24 - 3  # every window was judged
            assert all(len(totals) == 1 for totals in judged.values())
        sizes[n] = len(pickle.dumps(book))
        assert book.dead_total == len(range(7, n, 9))
        assert len(book.dead_files) == min(DEAD_FILES_KEPT, book.dead_total)
        assert book.accounting["too_late.rated_rows"] > 0  # the too-late files were too late
        assert len(book.files) < 40 and not book.marks
    assert sizes[5_000] <= 1.1 * sizes[500], sizes


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False), st.data())
def test_restores_and_replays_change_no_window(rng, data):
    """Restored from its pickle at random points and the elements after it replayed (what a
    restore from a checkpoint does): every window's last pane is the naive computation's, and
    a pane judged again after a restore has the same sums (its verdict is recorded once)."""
    elements = stream(data.draw(st.integers(40, 300)), rng)
    n = len(elements)
    points = sorted(data.draw(st.lists(st.integers(0, n - 2), min_size=1, max_size=4,
                                       unique=True)))
    restarts = [(c, min(n, c + 1 + data.draw(st.integers(0, 40)))) for c in points]
    restarts = [(c, x) for k, (c, x) in enumerate(restarts)
                if all(x2 != x for c2, x2 in restarts[:k])]
    last, judged, _, _ = run_book(elements, restarts)
    assert last == reference(elements)
    assert all(len(totals) == 1 for totals in judged.values())


def test_a_file_too_late_on_arrival_still_releases_its_mark():
    """A file whose rows are all in retired windows is forgotten at once, but the mark that
    lists it (arriving after it) does not wait for it."""
    adding, book = Adding(), WindowBook(SIZE, PERIOD, 0)
    book.add_mark(10 * DAY_US, ())
    book.advance()
    book.expire()
    book.add_file(FilePartials("old", grids=[(0, "g", (None, None, 4))]), adding, adding)
    book.expire()
    assert book.accounting["too_late.rated_rows"] == 4
    book.add_mark(11 * DAY_US, ("old",))
    book.advance()
    assert book.watermark_us == 11 * DAY_US and not book.marks
    book.expire()
    assert book.files == {} and book.unlisted == set()


def test_too_late_rows_are_counted_once_with_the_all_groups_partial():
    adding, book = Adding(), WindowBook(SIZE, PERIOD, 0)
    book.add_mark(10 * DAY_US, ())
    book.advance()
    book.expire()
    grids = [(0, "a", (None, None, 3)), (0, "b", (None, None, 4)),
             (0, "__all__", (None, None, 7))]
    book.add_file(FilePartials("old", grids=grids), adding, adding)
    assert book.accounting["too_late.rated_rows"] == 7
