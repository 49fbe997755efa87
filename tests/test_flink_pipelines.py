"""Every pipeline on a real Flink cluster equals the FnApiRunner on the same input.

The cluster (``tools/flink_cluster.py``, started by the session fixture) runs Flink 1.19.3 as a
JobManager and two TaskManager JVMs with one slot each, Beam's Flink job server and a Python
worker pool; the pipelines run with parallelism 2 (a subtask of every vertex on each
TaskManager, so shuffled rows cross between them over Flink's network stack, which the first
test checks on the job's own record counts) and the EXTERNAL SDK environment, so the DoFns
execute in worker processes apart from the submitting ``costlib`` process, as on a cluster.
Each command runs as a user runs it (a fresh ``costlib`` process) once on the FnApiRunner (no
runner flag) and once on Flink; the truth is the FnApiRunner's output:

* ``recalibrate``: operating point records and PN curves equal field for field (the FnApiRunner
  guarantees bit-identical points across runners), on a first run and on a second run whose
  default edges (``grid.edges: auto``) are carried from the first's published sketch, with the
  shared capacity allocated; row accounting and dead letters (rows without a group, a reserved
  group) equal;
* ``decide``: decisions equal row for row, thresholds with the audit sample and top-k sets both
  shuffled and contiguous;
* windowed ``recalibrate`` over files: every window's points and verdicts equal;
* a file with a string score column: exit 2 with the same one-line message on both runners;
* Beam's ``FlinkRunner`` (its own job server from the cluster's launcher jar): same points.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from flink_support import (
    decisions,
    engine_config,
    jobs,
    latest,
    records,
    records_across_taskmanagers,
    run_cli,
    run_dirs,
)
from pipeline_data import sample_frame, write_files

pytestmark = pytest.mark.flink

START = pd.Timestamp("2026-11-01", tz="UTC")


@pytest.fixture
def cluster(flink_cluster):
    return flink_cluster


write_config = engine_config


def both(cluster, command: str, *args: str, out: Path, flink_args=None):
    """Run ``costlib COMMAND ARGS`` on the FnApiRunner into ``out/fnapi`` and on Flink into
    ``out/flink``; both must exit 0. Returns the two newest run directories."""
    runs = {}
    for name, extra in (("fnapi", []), ("flink", flink_args or cluster.beam_flags())):
        done = run_cli(command, *args, "--output", str(out / name), *extra)
        assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
        runs[name] = run_dirs(out / name)[-1]
    return runs["fnapi"], runs["flink"]


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def dead_letters(run_dir: Path) -> list[dict]:
    """The rows of a run's dead-letter files (file by file: the names are deterministic)."""
    rows = []
    for path in sorted((run_dir / "dead_letter").glob("*.parquet")):
        rows += [{"file": path.name, **r} for r in pq.read_table(path).to_pylist()]
    return rows


def pn_curves(run_dir: Path) -> pd.DataFrame:
    frame = pq.read_table(run_dir / "pn_curves.parquet").to_pandas()
    frame = frame.drop(columns=[c for c in ("run_id",) if c in frame.columns])
    return frame.sort_values(list(frame.columns[:3])).reset_index(drop=True)


@pytest.fixture(scope="module")
def days(tmp_path_factory):
    """Two days of scores, three files each; day 1 carries rows no group can take."""
    root = tmp_path_factory.mktemp("days")
    frame = sample_frame(40_000, seed=5)
    frame["event_time"] = START + pd.to_timedelta(frame.index % 2, unit="D") \
        + pd.to_timedelta(frame.index % 86_000, unit="s")
    day1 = frame.iloc[::2].reset_index(drop=True).copy()
    day2 = frame.iloc[1::2].reset_index(drop=True)
    day1.loc[[3, 500], "group"] = None
    day1.loc[9_000, "group"] = "__all__"
    return (write_files(day1, root / "day1", n_files=3, row_group_size=3_000),
            write_files(day2, root / "day2", n_files=3, row_group_size=3_000), day2)


def test_recalibrate_with_carried_edges_and_capacity_equals_the_fnapi_runner(
        cluster, days, tmp_path):
    day1, day2, _ = days
    config = write_config(tmp_path / "c.yaml")
    known = {j["jid"] for j in jobs(cluster)}
    first = both(cluster, "recalibrate", "--config", config, "--input", day1,
                 "--run-id", "day1", out=tmp_path)
    fn, fl = first
    (jid,) = {j["jid"] for j in jobs(cluster)} - known
    crossed = records_across_taskmanagers(cluster, jid)
    print("\n".join(crossed))
    assert crossed, "no exchange moved records between the two TaskManagers"
    assert manifest(fl)["runner"] == "PortableRunner" and manifest(fn)["runner"] == "FnApiRunner"
    assert records(fl) == records(fn)
    assert len(records(fn)) >= 6 and {r["status"] for r in records(fn)} >= {"ok"}
    pd.testing.assert_frame_equal(pn_curves(fl), pn_curves(fn))
    assert manifest(fl)["row_accounting"] == manifest(fn)["row_accounting"]
    assert manifest(fn)["row_accounting"]["dead_letter_reasons"] == {"missing_group": 2,
                                                                     "reserved_group": 1}
    assert manifest(fl)["grid_edges"] == manifest(fn)["grid_edges"]
    assert dead_letters(fl) == dead_letters(fn) and len(dead_letters(fn)) == 3
    for out in ("fnapi", "flink"):
        assert latest(tmp_path / out) == run_dirs(tmp_path / out)[-1].name

    # The second run places its edges from the first's published sketch, and allocates one
    # review capacity over the groups.
    capacity_config = write_config(tmp_path / "capacity.yaml", decision_method="capacity")
    fn2, fl2 = both(cluster, "recalibrate", "--config", capacity_config, "--input", day2,
                    "--run-id", "day2", "--capacity", "400", out=tmp_path)
    assert manifest(fn2)["grid_edges"]["source"] == {"from": "previous_run", "run_id": "day1"}
    assert manifest(fl2)["grid_edges"] == manifest(fn2)["grid_edges"]
    assert records(fl2) == records(fn2)
    capacity = [r for r in records(fn2) if r["method"] == "capacity"]
    assert capacity and sum(r["allocated_volume"] or 0 for r in capacity) <= 400
    assert manifest(fl2)["capacity"] == manifest(fn2)["capacity"]
    assert manifest(fl2)["row_accounting"] == manifest(fn2)["row_accounting"]


def write_set_by_set(frame: pd.DataFrame, path: Path, rows_per_group: int = 3_000) -> str:
    """The rows sorted by set, in row groups of about ``rows_per_group`` rows that end where a
    set ends (every set's rows consecutive in one row group)."""
    ordered = frame.sort_values(["set_id", "item_id"]).reset_index(drop=True)
    ends = np.flatnonzero(ordered["set_id"].to_numpy()[1:] != ordered["set_id"].to_numpy()[:-1])
    path.parent.mkdir(parents=True)
    table = pa.Table.from_pandas(ordered, preserve_index=False)
    with pq.ParquetWriter(path, table.schema) as writer:
        start = 0
        for end in [*ends + 1, len(ordered)]:
            if end - start >= rows_per_group or end == len(ordered):
                writer.write_table(table.slice(start, end - start), row_group_size=end - start)
                start = end
    return str(path)


@pytest.mark.parametrize("contiguous", [False, True], ids=["shuffled_sets", "contiguous_sets"])
def test_decide_equals_the_fnapi_runner_row_for_row(cluster, days, tmp_path, contiguous):
    day1, day2, frame = days
    config = write_config(tmp_path / "c.yaml", audit={"enabled": True, "salt": "flink"},
                          decoding={"loss": "f1", "sets_contiguous": contiguous})
    points = tmp_path / "points"
    done = run_cli("recalibrate", "--config", config, "--input", day1, "--output", str(points))
    assert done.returncode == 0, done.stderr[-2000:]
    input_glob = day2
    if contiguous:  # contiguous sets: each set's rows next to each other in the files
        input_glob = write_set_by_set(frame, tmp_path / "ordered" / "sets.parquet")
    fn, fl = both(cluster, "decide", "--config", config, "--input", input_glob,
                  "--operating-points", str(points), out=tmp_path)
    got, want = decisions(fl), decisions(fn)
    assert len(want) == len(frame)
    pd.testing.assert_frame_equal(got, want)
    assert want["audit"].sum() > 0 and want["threshold_decision"].sum() > 0
    assert want["topk_decision"].sum() > 0
    for name in ("accounting.json", "decision_counts.json"):
        assert json.loads((fl / name).read_text()) == json.loads((fn / name).read_text())


def test_windowed_recalibrate_over_files_equals_the_fnapi_runner(cluster, tmp_path):
    frame = sample_frame(36_000, seed=8)
    frame["event_time"] = START + pd.to_timedelta(frame.index % 4, unit="D") \
        + pd.to_timedelta((frame.index * 7) % 86_000, unit="s")
    pattern = write_files(frame, tmp_path / "in", n_files=4, row_group_size=3_000)
    config = write_config(
        tmp_path / "w.yaml", methods=["graph"],
        grid={"edges": "uniform", "bins": 16, "range": [0.0, 1.0]},
        windowing={"size_days": 2, "period_days": 1, "allowed_lateness_days": 1},
        publish={"max_threshold_change": 0.2, "min_rated": 0},
        in_force={"add_to_edges": False, "keep_when_insufficient": False})
    runs = {}
    for name, extra in (("fnapi", []), ("flink", cluster.beam_flags())):
        done = run_cli("recalibrate", "--config", config, "--input", pattern,
                       "--output", str(tmp_path / name), *extra)
        assert done.returncode in (0, 3), f"{name}: {done.stderr[-3000:]}"
        runs[name] = (done.returncode, run_dirs(tmp_path / name)[-1])
    (code_fn, fn), (code_fl, fl) = runs["fnapi"], runs["flink"]
    assert code_fl == code_fn
    windows = sorted(p.name for p in (fn / "windows").iterdir())
    assert len(windows) >= 4, windows
    assert sorted(p.name for p in (fl / "windows").iterdir()) == windows
    for window in windows:
        assert records(fl / "windows" / window) == records(fn / "windows" / window), window
    want, got = manifest(fn), manifest(fl)
    assert got["row_accounting"] == want["row_accounting"]
    assert got["windows"] == want["windows"]
    # the guard's verdict on every window (applied, held, not eligible) and its reasons
    assert got["guard"] == want["guard"]
    assert want["guard"]["window_states"]["applied"] >= 1
    assert got["status"] == want["status"]


def test_a_bad_file_is_refused_with_the_same_message_on_both_runners(cluster, days, tmp_path):
    day1, _, _ = days
    table = pq.read_table(sorted(Path(day1).parent.glob("*.parquet"))[0])
    bad = table.set_column(table.schema.get_field_index("image_model"), "image_model",
                           pa.array(np.where(np.arange(len(table)) % 2, "0.5", "x")))
    (tmp_path / "in").mkdir()
    pq.write_table(bad, tmp_path / "in" / "bad.parquet")
    config = write_config(tmp_path / "c.yaml")
    messages = {}
    for name, extra in (("fnapi", []), ("flink", cluster.beam_flags())):
        done = run_cli("recalibrate", "--config", config, "--input",
                       str(tmp_path / "in" / "*.parquet"), "--output", str(tmp_path / name), *extra)
        assert done.returncode == 2, done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        messages[name] = [line for line in done.stderr.splitlines() if "error" in line.lower()]
        assert latest(tmp_path / name) is None
    assert messages["flink"] == messages["fnapi"] and messages["fnapi"]
    assert "image_model" in messages["fnapi"][0] and "bad.parquet" in messages["fnapi"][0]


def test_beams_flink_runner_with_the_launcher_jar_gives_the_same_points(cluster, days, tmp_path):
    """``--runner=FlinkRunner --flink_job_server_jar``: Beam starts the job server itself."""
    day1, _, _ = days
    config = write_config(tmp_path / "c.yaml")
    before = job_server_processes(cluster)
    fn, fl = both(cluster, "recalibrate", "--config", config, "--input", day1, out=tmp_path,
                  flink_args=cluster.beam_flags("flink"))
    assert manifest(fl)["runner"] == "FlinkRunner"
    assert records(fl) == records(fn)
    # the job server Beam started for the run is stopped when costlib exits
    assert job_server_processes(cluster) == before


def job_server_processes(cluster) -> set[int]:
    """Pids of job servers started from the cluster's launcher jar (the cluster's own, and
    any that Beam's FlinkRunner started)."""
    pids = set()
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if str(cluster.job_server_jar) in cmdline:
            pids.add(int(proc.name))
    return pids
