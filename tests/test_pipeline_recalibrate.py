import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from pipeline_data import (
    base_config,
    comparable,
    direct_records,
    sample_frame,
    write_files,
)

from costlib.thresholds.binning._edges import fine_histogram, quantile_edges_from_histogram
from costlib_pipelines.io.runs import MARKER, load_operating_points
from costlib_pipelines.recalibrate.pipeline import run_recalibrate


@pytest.fixture(scope="module")
def frame():
    return sample_frame(30_000, seed=1)


def _run(config, pattern, out, beam_args=(), **kw):
    manifest = run_recalibrate(config, pattern, str(out), list(beam_args), **kw)
    run_dir = out / "runs" / manifest["run_id"]
    table = pq.read_table(run_dir / "operating_points.parquet")
    return manifest, run_dir, table.to_pylist()


def test_pipeline_equals_costlib_directly_whatever_file_order_and_row_groups(frame, tmp_path):
    config = base_config()
    expected = comparable(direct_records(frame, config))
    a = write_files(frame, tmp_path / "a", n_files=3, row_group_size=4000)
    b = write_files(frame.sample(frac=1.0, random_state=3), tmp_path / "b", n_files=5,
                    row_group_size=1500, reverse=True)
    _, _, got_a = _run(config, a, tmp_path / "out_a")
    _, _, got_b = _run(config, b, tmp_path / "out_b")
    assert comparable(got_a) == expected
    assert comparable(got_b) == expected
    statuses = {r["group"]: r["status"] for r in got_a}
    assert set(statuses) == {"__all__", "market_a", "market_b", "market_c"}


def test_manifest_accounts_for_every_row_and_is_written_last(frame, tmp_path):
    config = base_config()
    pattern = write_files(frame, tmp_path / "in")
    manifest, run_dir, _ = _run(config, pattern, tmp_path / "out")
    acc = manifest["row_accounting"]
    assert acc["read"] == len(frame)
    assert acc["used"] == int(frame["label"].notna().sum())
    assert acc["unrated"] == int(frame["label"].isna().sum())
    assert acc["dead_lettered"] == 0
    on_disk = json.loads((run_dir / "manifest.json").read_text())
    assert on_disk["status"] == "complete" and on_disk["config_digest"] == config.digest
    assert (tmp_path / "out" / "LATEST").read_text().strip() == manifest["run_id"]
    jsonl = [json.loads(line) for line in (run_dir / "operating_points.jsonl").open()]
    assert len(jsonl) == 16 and all("inf" in r["thresholds"] or r["thresholds"] for r in jsonl)
    curves = pq.read_table(run_dir / "pn_curves.parquet").to_pylist()
    assert {(c["group"], c["method"]) for c in curves} == {
        (r["group"], r["method"]) for r in jsonl if r["status"] == "ok"
    }


def test_quantile_edges_are_deterministic_and_match_costlib(frame, tmp_path):
    config = base_config(grid={"edges": "quantile", "bins": 16, "range": [0.0, 1.0],
                               "quantile_resolution": 1024})
    rated = frame[frame["label"].notna()]
    edges = []
    for name in config.classifiers:
        values = rated[name].to_numpy(dtype=float, na_value=np.nan)
        counts = fine_histogram(np.where(np.isnan(values), -np.inf, values), 0.0, 1.0, 1024)
        edges.append(quantile_edges_from_histogram(counts, 0.0, 1.0, 16))
    expected = comparable(direct_records(frame, config, edges=edges))
    pattern = write_files(frame, tmp_path / "in", n_files=2, row_group_size=3000)
    _, _, got = _run(config, pattern, tmp_path / "out")
    assert comparable(got) == expected


def test_thin_groups_fall_back_to_all_groups_and_say_so(frame, tmp_path):
    config = base_config(min_rated={"positives": 90, "negatives": 5})
    pattern = write_files(frame, tmp_path / "in")
    _, _, got = _run(config, pattern, tmp_path / "out")
    by_group = {}
    for r in got:
        by_group.setdefault(r["group"], []).append(r)
    rated_pos = {g: rs[0]["rated_positives"] for g, rs in by_group.items()}
    assert any(v < 90 for g, v in rated_pos.items() if g != "__all__")
    for group, rows in by_group.items():
        for r in rows:
            if group != "__all__" and r["rated_positives"] < 90:
                assert r["status"] == "fallback" and r["fallback_group"] == "__all__"
                parent = next(p for p in by_group["__all__"] if p["method"] == r["method"])
                assert r["thresholds"] == parent["thresholds"]
            else:
                assert r["status"] == "ok" and r["fallback_group"] is None
    assert comparable(got) == comparable(direct_records(frame, config))


def test_insufficient_everywhere_gives_no_thresholds(frame, tmp_path):
    config = base_config(min_rated={"positives": 10**9, "negatives": 0})
    pattern = write_files(frame.head(5000), tmp_path / "in")
    _, _, got = _run(config, pattern, tmp_path / "out")
    assert {r["status"] for r in got} == {"insufficient_data"}
    assert all(r["thresholds"] is None for r in got)


def test_bootstrap_intervals_match_costlib(frame, tmp_path):
    from costlib.thresholds.loop._bootstrap import BootstrapGrids, confidence_intervals

    config = base_config(methods=["graph"], bootstrap={"replicates": 8, "seed": 3, "level": 0.8})
    small = frame.head(12_000)
    pattern = write_files(small, tmp_path / "in", n_files=2, row_group_size=2500)
    _, _, got = _run(config, pattern, tmp_path / "out")
    # every valid row: unrated ones (label null) go to the replicates' unrated channel
    scores = small[list(config.classifiers)].to_numpy(dtype=float, na_value=np.nan)
    scores = np.where(np.isnan(scores), -np.inf, scores)
    boot = BootstrapGrids.from_scores(
        scores, small["label"], config.fixed_edges(),
        small["item_id"].to_numpy(), small["weight"].to_numpy(), n_replicates=8, seed=3,
    )
    assert boot.replicate(0).total_unrated > 0
    ci = confidence_intervals(boot, level=0.8, spec=config.decision, method="graph")
    row = next(r for r in got if r["group"] == "__all__")
    assert row["threshold_ci_low"] == list(ci.thresholds[0])
    assert row["threshold_ci_high"] == list(ci.thresholds[1])
    assert (row["tp_ci_low"], row["tp_ci_high"]) == ci.tp
    assert row["tp_ci_low"] <= row["tp"] <= row["tp_ci_high"]


def test_rerun_into_same_output_is_safe(frame, tmp_path):
    config = base_config()
    pattern = write_files(frame.head(6000), tmp_path / "in")
    out = tmp_path / "out"
    first, _, _ = _run(config, pattern, out, run_id="first")
    assert first["run_id"] == "first"
    # An interrupted attempt left a run directory (with costlib's marker: costlib made it)
    # without a manifest and with a stale shard.
    stale = out / "runs" / "retry" / "dead_letter" / "part-stale.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"left over from an interrupted run")
    (out / "runs" / "retry" / MARKER).write_text("{}")
    with pytest.raises(ValueError, match="incomplete"):
        load_operating_points(str(out / "runs" / "retry"))
    second, run_dir, _ = _run(config, pattern, out, run_id="retry")
    assert run_dir == out / "runs" / "retry" and not stale.exists()
    assert second["row_accounting"] == first["row_accounting"]
    assert (out / "LATEST").read_text().strip() == "retry"
    third = run_recalibrate(config, pattern, str(out))
    assert third["run_id"] not in ("first", "retry")
    assert (out / "LATEST").read_text().strip() == third["run_id"]
    assert len(load_operating_points(str(out))[0]) == 16
    assert (out / "runs" / "first" / "manifest.json").exists()  # earlier runs are kept


def test_multi_processing_runner_gives_identical_records(frame, tmp_path):
    config = base_config(methods=["graph", "hull"])
    small = frame.head(10_000)
    pattern = write_files(small, tmp_path / "in", n_files=4, row_group_size=1000)
    _, _, got = _run(config, pattern, tmp_path / "out",
                     ["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    assert comparable(got) == comparable(direct_records(small, config))


def test_portable_job_api_loopback_gives_identical_records(frame, tmp_path, job_service):
    """The path Flink and Dataflow use: the Job API with a LOOPBACK SDK environment."""
    config = base_config(methods=["graph", "hull"])
    small = frame.head(10_000)
    pattern = write_files(small, tmp_path / "in", n_files=2, row_group_size=2000)
    manifest, _, got = _run(config, pattern, tmp_path / "out",
                            ["--runner=PortableRunner", f"--job_endpoint=localhost:{job_service}",
                             "--environment_type=LOOPBACK"])
    assert manifest["runner"] == "PortableRunner"
    assert comparable(got) == comparable(direct_records(small, config))


@pytest.mark.parametrize("arrow_dictionary", [False, True])
def test_group_column_from_dictionary_pages_equals_costlib_and_dead_letters_are_exact(
        frame, tmp_path, arrow_dictionary):
    """Recalibrate reads the group column from the files' dictionary pages. A file with more
    groups than a dictionary page holds (the writer falls back to plain pages), its group
    column strings or an Arrow dictionary (values in another order than they appear, one
    unused): the operating points equal costlib called directly on the valid rows, and the
    dead letters (missing group, reserved group) are the input rows exactly, group column as
    the file stores it."""
    import pandas as pd
    import pyarrow as pa

    data = frame.iloc[:12_000].reset_index(drop=True).copy()
    rare = [f"rare_{i:02d}" for i in range(30)]
    data.loc[5:5 + 3 * len(rare) - 1, "group"] = np.repeat(rare, 3)
    bad_rows = [1, 700, 9_000]
    data.loc[[1, 700], "group"] = None
    data.loc[9_000, "group"] = "__all__"
    names = [*sorted({g for g in data["group"] if g is not None}, reverse=True), "unused"]
    codes = pd.Series(data["group"]).map({g: i for i, g in enumerate(names)})
    table = pa.Table.from_pandas(data, preserve_index=False)
    group = pa.DictionaryArray.from_arrays(
        pa.array(codes.to_numpy(dtype=float), mask=codes.isna().to_numpy()).cast(pa.int32()),
        pa.array(names))
    if arrow_dictionary:
        table = table.set_column(table.schema.get_field_index("group"), "group", group)
    path = tmp_path / "in" / "a.parquet"
    path.parent.mkdir()
    pq.write_table(table, path, row_group_size=5_000, dictionary_pagesize_limit=128)
    assert "PLAIN" in pq.ParquetFile(path).metadata.row_group(0).column(
        table.schema.get_field_index("group")).encodings
    config = base_config()
    manifest, run_dir, got = _run(config, str(path), tmp_path / "out")
    valid = data.drop(index=bad_rows)
    assert comparable(got) == comparable(direct_records(valid, config))
    assert manifest["row_accounting"]["dead_letter_reasons"] == {"missing_group": 2,
                                                                 "reserved_group": 1}
    stored = pq.read_table(path)
    dead = pa.concat_tables([pq.read_table(p) for p in sorted(
        (run_dir / "dead_letter").glob("*.parquet"))])
    assert dead.schema.field("group").type == stored.schema.field("group").type == (
        group.type if arrow_dictionary else pa.string())
    dead = dead.sort_by([("row_group", "ascending"), ("row_in_row_group", "ascending")])
    read = [name for name in stored.column_names if name in dead.column_names]
    assert dead.select(read).equals(stored.select(read).take(bad_rows))
