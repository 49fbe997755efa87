"""A group column of integers (market ids, merchant ids): read as the integers' decimal strings.

Independent truth: the same stream with the group column written as those strings; recalibrate
and decide must give the same operating points and decisions. A null integer group is
dead-lettered (``missing_group``) with the column kept as the file stores it, and a float group
column is refused naming the column.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline_data import SMALL_CONFIG, comparable, sample_frame, write_files

from costlib_pipelines.commands.cli import main
from costlib_pipelines.decide.records import read_decisions
from costlib_pipelines.io.runs import load_operating_points

MARKETS = {"market_a": 7, "market_b": 42, "market_c": 1001}


def _config(tmp_path: Path, **extra) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**SMALL_CONFIG, "methods": ["graph", "hull"], **extra}))
    return str(path)


def _runs(tmp_path: Path, frame, name: str, **extra) -> tuple[list[dict], dict]:
    inputs = write_files(frame, tmp_path / f"in-{name}", n_files=2, row_group_size=3000)
    config = _config(tmp_path, **extra)
    rec = tmp_path / f"rec-{name}"
    assert main(["recalibrate", "--config", config, "--input", inputs, "--output", str(rec),
                 "--run-id", "r1"]) == 0
    points, _ = load_operating_points(str(rec / "runs" / "r1"))
    dec = tmp_path / f"dec-{name}"
    assert main(["decide", "--config", config, "--input", inputs, "--operating-points",
                 str(rec), "--output", str(dec), "--run-id", "d1"]) == 0
    decided = read_decisions(str(dec)).to_pandas().set_index("item_id").sort_index()
    return points, {"decided": decided,
                    "accounting": json.loads((dec / "runs" / "d1" / "accounting.json")
                                             .read_text())}


WINDOWED = {"windowing": {"size_days": 2, "period_days": 1, "allowed_lateness_days": 0},
            "plausibility": {"event_time_min": "2000-01-01T00:00:00Z",
                             "event_time_max": "2100-01-01T00:00:00Z"}}


@pytest.mark.parametrize(("dtype", "extra"), [("int64", {}), ("int32", {}), ("uint16", {}),
                                              ("int64", WINDOWED)])
def test_integer_groups_give_what_their_decimal_strings_give(tmp_path, dtype, extra):
    frame = sample_frame(12_000, seed=3)
    as_text = frame.assign(group=frame["group"].map(lambda g: str(MARKETS[g])))
    as_int = frame.assign(group=frame["group"].map(MARKETS).astype(dtype))
    text_points, text_run = _runs(tmp_path, as_text, "text", **extra)
    int_points, int_run = _runs(tmp_path, as_int, "int", **extra)
    assert {r["group"] for r in int_points} == {"7", "42", "1001", "__all__"}

    def strip(records):  # every field but the run id (the same config: the same digest)
        return sorted(comparable(records),
                      key=lambda r: (str(r["window_start"]), r["group"], r["method"]))
    assert strip(int_points) == strip(text_points)
    a, b = int_run["decided"], text_run["decided"]
    assert a["group"].astype(str).tolist() == b["group"].astype(str).tolist()
    assert a["threshold_decision"].tolist() == b["threshold_decision"].tolist()
    assert int_run["accounting"] == text_run["accounting"]
    assert a["threshold_decision"].sum() > 30  # the case is not trivial


def test_a_null_integer_group_is_dead_lettered_as_stored(tmp_path):
    frame = sample_frame(6000, seed=4)
    table = pa.Table.from_pandas(frame.assign(group=frame["group"].map(MARKETS)),
                                 preserve_index=False)
    groups = table.column("group").to_pylist()
    for i in (5, 17):
        groups[i] = None
    table = table.set_column(table.schema.get_field_index("group"), "group",
                             pa.array(groups, pa.int32()))
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "part.parquet")
    out = tmp_path / "rec"
    assert main(["recalibrate", "--config", _config(tmp_path), "--input",
                 str(tmp_path / "in" / "*.parquet"), "--output", str(out), "--run-id", "r1"]) == 0
    accounting = json.loads((out / "runs" / "r1" / "accounting.json").read_text())
    assert accounting["dead_letter.missing_group"] == 2
    dead = pq.read_table(next((out / "runs" / "r1" / "dead_letter").glob("*.parquet")))
    assert dead.schema.field("group").type == pa.int32()
    assert sorted(dead.column("item_id").to_pylist()) == sorted(
        np.asarray(table.column("item_id"))[[5, 17]].tolist())


def test_a_float_group_column_is_refused_naming_it(tmp_path, capsys):
    frame = sample_frame(2000, seed=5)
    inputs = write_files(frame.assign(group=frame["group"].map(MARKETS).astype(float)),
                         tmp_path / "in", n_files=1)
    code = main(["recalibrate", "--config", _config(tmp_path), "--input", inputs, "--output",
                 str(tmp_path / "rec")])
    assert code == 2
    err = capsys.readouterr().err
    assert "column 'group'" in err and "expected string or integer" in err
