"""Input matching and input-file safety (issue 9): through the CLI where the user sees it.

Every glob must match, Spark-style directories are read (their marker files skipped), a file
matched twice is read once, the manifest lists each input with its footer row count, corrupt
pages with checksums stop the run, near-miss column names are named, and quantile edges
without rated rows are a one-line error.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from pipeline_data import SMALL_CONFIG as BASE
from pipeline_data import sample_frame, write_files

from costlib_pipelines.commands.cli import main
from costlib_pipelines.io.files import InputError, is_ignored, match_inputs


def _config(tmp_path, **overrides) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**BASE, **overrides}))
    return str(path)


def _recalibrate(tmp_path, inputs: str, *, config: str | None = None, out: str = "out"):
    return main(["recalibrate", "--config", config or _config(tmp_path), "--input", inputs,
                 "--output", str(tmp_path / out), "--run-id", "r1"])


def _manifest(tmp_path, out: str = "out", run_id: str = "r1") -> dict:
    return json.loads((tmp_path / out / "runs" / run_id / "manifest.json").read_text())


def _table(frame) -> pa.Table:
    return pa.Table.from_pandas(frame, preserve_index=False)


def test_a_glob_that_matches_nothing_stops_the_run_naming_it(tmp_path, capsys):
    frame = sample_frame(3000, seed=1)
    day1 = write_files(frame, tmp_path / "dt=2026-11-01", n_files=1)
    missing = str(tmp_path / "dt=2026-11-02" / "*.parquet")
    code = _recalibrate(tmp_path, f"{day1},{missing}")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == f"costlib recalibrate: error: no input file matches {missing}"
    assert not (tmp_path / "out" / "LATEST").exists()


def test_a_spark_directory_is_read_and_its_marker_files_skipped(tmp_path, capsys):
    frame = sample_frame(6000, seed=2)
    table = _table(frame)
    spark = tmp_path / "in" / "day.parquet"  # a directory, as Spark writes it
    (spark / "_temporary" / "0").mkdir(parents=True)
    pq.write_table(table.slice(0, 2500), spark / "part-00000-abc.snappy.parquet")
    pq.write_table(table.slice(2500, 2000), spark / "part-00001-abc.snappy.parquet")
    for junk in ("_SUCCESS", ".part-00000-abc.snappy.parquet.crc", "_temporary/0/part-9.parquet",
                 "part-00001-abc.snappy.parquet.crc"):
        (spark / junk).write_bytes(b"not parquet")
    pq.write_table(table.slice(4500, 1500), tmp_path / "in" / "plain.parquet")

    assert _recalibrate(tmp_path, str(tmp_path / "in" / "*.parquet")) == 0, \
        capsys.readouterr().err
    manifest = _manifest(tmp_path)
    assert manifest["row_accounting"]["read"] == len(frame)  # old code: 1500 (dir skipped)
    assert manifest["inputs"] == [
        {"path": str(tmp_path / "in" / "day.parquet" / "part-00000-abc.snappy.parquet"),
         "rows": 2500, "row_groups": 1},
        {"path": str(tmp_path / "in" / "day.parquet" / "part-00001-abc.snappy.parquet"),
         "rows": 2000, "row_groups": 1},
        {"path": str(tmp_path / "in" / "plain.parquet"), "rows": 1500, "row_groups": 1},
    ]
    # The directory named literally (with or without a trailing slash) reads the same files.
    for literal in (str(spark), str(spark) + "/"):
        assert match_inputs(literal) == [e["path"] for e in manifest["inputs"][:2]]


def test_a_directory_holding_only_marker_files_is_an_error(tmp_path):
    (tmp_path / "in" / "x.parquet").mkdir(parents=True)
    (tmp_path / "in" / "x.parquet" / "_SUCCESS").write_bytes(b"")
    with pytest.raises(InputError, match=r"no input file matches .*x\.parquet \(1 matched"):
        match_inputs(str(tmp_path / "in" / "x.parquet"))


def test_a_file_named_in_full_is_never_skipped():
    assert not is_ignored("/d/_odd.parquet", "/d/_odd.parquet")
    assert is_ignored("/d/x/_SUCCESS", "/d/") and is_ignored("/d/x/.a.crc", "/d/")
    assert is_ignored("/d/x/_temporary/0/p.parquet", "/d/")
    assert not is_ignored("/_d/x/p.parquet", "/_d/")  # only below the literal part


def test_a_file_matched_twice_is_read_once(tmp_path, monkeypatch, capsys):
    frame = sample_frame(4000, seed=3)
    write_files(frame, tmp_path / "in", n_files=2)
    monkeypatch.chdir(tmp_path)
    inputs = "in/*.parquet,./in/part-0.parquet,in/../in/part-1.parquet,in/part-*.parquet"
    assert _recalibrate(tmp_path, inputs) == 0, capsys.readouterr().err
    manifest = _manifest(tmp_path)
    assert manifest["row_accounting"]["read"] == len(frame)  # old code: 2x+ (counted twice)
    assert [e["path"] for e in manifest["inputs"]] == [
        str(tmp_path / "in" / "part-0.parquet"), str(tmp_path / "in" / "part-1.parquet")]


def test_a_symlink_to_a_matched_file_is_read_once(tmp_path):
    frame = sample_frame(1000, seed=3)
    pattern = write_files(frame, tmp_path / "in", n_files=1)
    (tmp_path / "link.parquet").symlink_to(tmp_path / "in" / "part-0.parquet")
    assert match_inputs(f"{pattern},{tmp_path / 'link.parquet'}") == [
        str(tmp_path / "in" / "part-0.parquet")]


def test_manifests_list_every_input_with_its_footer_rows(tmp_path, capsys):
    frame = sample_frame(9000, seed=4)
    pattern = write_files(frame, tmp_path / "in", n_files=3, row_group_size=1000)
    assert _recalibrate(tmp_path, pattern) == 0, capsys.readouterr().err
    expected = []
    for path in sorted((tmp_path / "in").glob("*.parquet")):
        meta = pq.ParquetFile(path).metadata
        expected.append({"path": str(path), "rows": meta.num_rows,
                         "row_groups": meta.num_row_groups})
    assert [e["rows"] for e in expected] == [3000, 3000, 3000]
    assert [e["row_groups"] for e in expected] == [3, 3, 3]
    manifest = _manifest(tmp_path)
    assert manifest["inputs"] == expected
    assert sum(e["rows"] for e in manifest["inputs"]) == manifest["row_accounting"]["read"]

    code = main(["decide", "--config", _config(tmp_path), "--input", pattern,
                 "--operating-points", str(tmp_path / "out"), "--output",
                 str(tmp_path / "dec"), "--run-id", "d1"])
    assert code == 0, capsys.readouterr().err
    assert _manifest(tmp_path, "dec", "d1")["inputs"] == [
        {**e, "item_id_type": "int64"} for e in expected]  # what readers restore

    assert main(["report", "--run", str(tmp_path / "out")]) == 0
    html = next((tmp_path / "out" / "runs" / "r1").glob("*.html")).read_text()
    assert "3 file(s) in" in html and "(9,000 rows)" in html


def _flip_bytes_in_a_data_page(path, column: str) -> None:
    """Invert 8 bytes in the middle of ``column``'s first data page (plain, uncompressed)."""
    meta = pq.ParquetFile(path).metadata
    index = meta.schema.to_arrow_schema().get_field_index(column)
    chunk = meta.row_group(0).column(index)
    data = bytearray(path.read_bytes())
    middle = chunk.data_page_offset + chunk.total_compressed_size // 2
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    path.write_bytes(bytes(data))


def test_a_corrupt_page_with_a_checksum_stops_the_run_naming_file_and_row_group(
        tmp_path, capsys):
    frame = sample_frame(2000, seed=5)
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "scores.parquet"
    table = _table(frame)
    pq.write_table(table, path, write_page_checksum=True, compression="none",
                   use_dictionary=False)
    _flip_bytes_in_a_data_page(path, "text_model")
    # Without verification the flip silently changes scores (what the old code read).
    silently = pq.read_table(path).column("text_model").to_numpy(zero_copy_only=False)
    original = table.column("text_model").to_numpy(zero_copy_only=False)
    assert not np.array_equal(silently, original, equal_nan=True)

    code = _recalibrate(tmp_path, str(path))
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2  # old code: 0, and operating points from the changed scores
    assert last.startswith(f"costlib recalibrate: error: {path}: row group 0: a page checksum "
                           "does not match: the file is corrupt")
    assert not (tmp_path / "out" / "LATEST").exists()


def test_files_without_checksums_are_read_as_before(tmp_path, capsys):
    frame = sample_frame(2000, seed=5)
    pattern = write_files(frame, tmp_path / "in", n_files=1)
    assert _recalibrate(tmp_path, pattern) == 0, capsys.readouterr().err
    assert _manifest(tmp_path)["row_accounting"]["read"] == len(frame)


@pytest.mark.parametrize(("written_as", "hint"), [
    ("Text_Model", "did you mean 'Text_Model'? (column names are case-sensitive)"),
    ("text_modle", "did you mean 'text_modle'? (the names differ)"),
])
def test_a_near_miss_score_column_is_named(tmp_path, capsys, written_as, hint):
    frame = sample_frame(1000, seed=6).rename(columns={"text_model": written_as})
    pattern = write_files(frame, tmp_path / "in", n_files=1)
    code = _recalibrate(tmp_path, pattern)
    err = capsys.readouterr().err
    assert code == 2
    assert "missing column 'text_model' (the classifier score column of the run config); " \
           + hint in err


def test_all_rows_unrated_with_quantile_edges_is_one_line_exit_2(tmp_path, capsys):
    frame = sample_frame(3000, seed=7)
    frame["label"] = None
    pattern = write_files(frame, tmp_path / "in", n_files=2)
    config = _config(tmp_path, grid={"edges": "quantile", "bins": 16, "range": [0.0, 1.0]})
    code = _recalibrate(tmp_path, pattern, config=config)  # old code: raised a ValueError
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert last.startswith("costlib recalibrate: error: grid.edges is 'quantile' but there are "
                           "no rated rows to place quantile edges on")
    assert not (tmp_path / "out" / "LATEST").exists()


def test_files_without_row_groups_and_quantile_edges_is_one_line_exit_2(tmp_path, capsys):
    frame = sample_frame(100, seed=7)
    (tmp_path / "in").mkdir()
    pq.ParquetWriter(tmp_path / "in" / "empty.parquet", _table(frame).schema).close()
    assert pq.ParquetFile(tmp_path / "in" / "empty.parquet").num_row_groups == 0
    config = _config(tmp_path, grid={"edges": "quantile", "bins": 16, "range": [0.0, 1.0]})
    code = _recalibrate(tmp_path, str(tmp_path / "in" / "empty.parquet"), config=config)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert "no rated rows to place quantile edges on" in last
