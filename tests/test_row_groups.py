"""Reading units are row-group ranges: one big file is spread over bundles and workers."""

import json
import uuid

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib_pipelines.io.files import RowGroupRange, read_row_groups, row_group_ranges
from costlib_pipelines.recalibrate.reading import ReadingUnits, iter_batches


def _write(path, sizes):
    """A Parquet file with one row group per entry of ``sizes`` (rows 0..n-1 in order)."""
    schema = pa.schema([("x", pa.int64())])
    with pq.ParquetWriter(path, schema) as writer:
        start = 0
        for size in sizes:
            writer.write_table(pa.table({"x": pa.array(np.arange(start, start + size))},
                                        schema=schema))
            start += size
    return str(path)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 50), max_size=12), target=st.integers(1, 200))
def test_ranges_partition_the_row_groups_and_rows_exactly(tmp_path_factory, sizes, target):
    path = _write(tmp_path_factory.mktemp("rg") / "f.parquet", sizes)
    ranges = list(row_group_ranges(path, target))
    covered = [i for r in ranges for i in range(r.start, r.stop)]
    assert covered == list(range(len(sizes)))  # each row group once, in order
    for r in ranges:  # about target rows: only the last range may hold fewer
        rows = sum(sizes[r.start:r.stop])
        assert rows >= target or r is ranges[-1]
        assert rows - sizes[r.stop - 1] < target  # closed as soon as it reached the target
    rows = [t.column("x").to_pylist() for r in ranges
            for _, _, t in iter_batches(r, ["x"])]
    assert [x for batch in rows for x in batch] == list(range(sum(sizes)))
    assert [i for r in ranges for i, _ in read_row_groups(path, start=r.start, stop=r.stop)] \
        == list(range(len(sizes)))


class RecordBundleFn(beam.DoFn):
    """Writes the row groups each bundle saw to a file per bundle (works in any process)."""

    def __init__(self, directory):
        self.directory = directory

    def start_bundle(self):
        self.seen = []

    def process(self, unit: RowGroupRange):
        self.seen += [(unit.path, i) for i in range(unit.start, unit.stop)]
        yield unit

    def finish_bundle(self):
        if self.seen:
            with open(f"{self.directory}/{uuid.uuid4().hex}.json", "w") as fh:
                json.dump(self.seen, fh)


def test_one_files_row_groups_reach_different_bundles_on_two_workers(tmp_path):
    path = _write(tmp_path / "big.parquet", [10] * 8)
    seen_dir = tmp_path / "seen"
    seen_dir.mkdir()
    options = PipelineOptions(["--direct_num_workers=2", "--direct_running_mode=multi_threading"])
    with beam.Pipeline(runner=FnApiRunner(), options=options) as pipeline:
        _ = (pipeline | beam.Create([path]) | ReadingUnits(target_rows=10)
             | beam.ParDo(RecordBundleFn(str(seen_dir))))
    bundles = [json.loads(p.read_text()) for p in seen_dir.glob("*.json")]
    row_groups = sorted(i for bundle in bundles for _, i in bundle)
    assert row_groups == list(range(8))  # every row group read once
    assert len([b for b in bundles if b]) >= 2  # the one file's row groups were spread


def test_string_columns_read_as_dictionaries_hold_the_same_values(tmp_path):
    """``dictionary=``: a string column comes as a dictionary array with the values of a plain
    read, also where the writer's dictionary overflowed (plain pages after the dictionary
    ones) and with nulls; other columns named there are read as usual."""
    rng = np.random.default_rng(5)
    n = 30_000
    names = np.array([f"group-{i:06d}" for i in range(20_000)], dtype=object)
    group = pa.array(names[rng.integers(0, names.size, n)].tolist(), mask=rng.random(n) < 0.02)
    table = pa.table({"group": group, "x": pa.array(np.arange(n))})
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, row_group_size=12_000, dictionary_pagesize_limit=4_096)
    encodings = pq.ParquetFile(path).metadata.row_group(0).column(0).encodings
    assert "PLAIN" in encodings and "RLE_DICTIONARY" in encodings  # dictionary overflowed
    plain = list(read_row_groups(str(path)))
    coded = list(read_row_groups(str(path), dictionary=["group", "x"]))
    assert [i for i, _ in coded] == [i for i, _ in plain] == [0, 1, 2]
    for (_, want), (_, got) in zip(plain, coded, strict=True):
        assert pa.types.is_dictionary(got.schema.field("group").type)
        assert got.column("group").cast(pa.string()).equals(want.column("group"))
        assert got.column("x").equals(want.column("x"))


def test_a_remote_file_is_opened_once_and_its_row_groups_read_in_turn(tmp_path, monkeypatch):
    """On a remote filesystem an open is a request: the reads of one file share one handle
    (each read takes it in turn), and give the row groups a local file's reads give."""
    from concurrent.futures import ThreadPoolExecutor

    from costlib_pipelines.io import files

    path = str(tmp_path / "f.parquet")
    _write(path, [7, 1, 12, 5, 9])
    local = [(r.index, r.table()) for r in files.row_group_reads(path, ["x"])]
    opened = []
    real_open = files.FileSystems.open

    def counting_open(name, *args, **kwargs):
        opened.append(name)
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(files, "is_local", lambda _path: False)
    monkeypatch.setattr(files.FileSystems, "open", staticmethod(counting_open))
    reads = files.row_group_reads(path, ["x"])
    with ThreadPoolExecutor(3) as pool:
        remote = list(pool.map(lambda r: (r.index, r.table()), reads))
    assert opened == [path]
    assert [i for i, _ in remote] == [i for i, _ in local] == [0, 1, 2, 3, 4]
    assert all(a.equals(b) for (_, a), (_, b) in zip(remote, local, strict=True))
