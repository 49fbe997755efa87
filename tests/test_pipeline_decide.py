"""The decide pipeline against direct numpy / costlib computations on the same rows.

Every pipeline runs on Beam's FnApiRunner in process (``beam_args=[]``), on small data.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline_data import coverage_fields

from costlib.decoding import optimal_topk
from costlib.sample import generate_score_stream, write_score_stream
from costlib_pipelines.commands import cli
from costlib_pipelines.commands.cli import main
from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.pipeline import run_decide
from costlib_pipelines.decide.records import DECISION_SCHEMA, read_decisions
from costlib_pipelines.decide.sets import set_buckets
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.published_points import GroupThresholds, select_operating_points
from costlib_pipelines.io.records import records_to_table
from costlib_pipelines.io.runs import load_operating_points
from costlib_pipelines.recalibrate.pipeline import run_recalibrate

CLASSIFIERS = ("text_model", "image_model")
INF = float("inf")

#: Operating points (method graph) used by most tests; "g_missing" has no record.
THRESHOLDS = {
    "g0": ("ok", [0.6, 0.7], None),
    "g1": ("ok", [0.3, INF], None),
    "g_thin": ("insufficient_data", None, None),
    "g_fb": ("fallback", [0.45, 0.75], "__all__"),  # stored thresholds win over __all__
    "__all__": ("ok", [0.55, 0.65], None),
}
GROUPS = ("g0", "g1", "g_thin", "g_fb", "g_missing")


def make_config(*, rule="any", topk=False, loss="f1", params=None, buckets=4, method="graph",
                window="latest_complete", null_group=None):
    columns = {"probability": "probability", "set_id": "set_id"} if topk else {}
    return RunConfig.from_dict({
        "columns": columns,
        "classifiers": list(CLASSIFIERS),
        "rule": rule,
        "grid": {},
        "target": {"marginal_precision": 0.3},
        "min_rated": {},
        "bootstrap": {},
        "methods": ["graph", "hull"],
        "decision_method": method,
        "decoding": {"loss": loss, "params": params or {}, "buckets": buckets},
        "decide": {"window": window,
                   **({} if null_group is None else {"null_group": null_group})},
        # a fixed salt: the floor audit of groups without a point (g_thin, audit disabled)
        # must not depend on the run id when runs are compared
        "audit": {"salt": "decide-tests"},
    })


def op_record(group, status, thresholds, fallback_group=None, *, method="graph", rule="any",
              classifiers=CLASSIFIERS, window=None, pane=0, run_id="op-run"):
    start, end = window if window else (None, None)
    return {
        "group": group, "window_start": start, "window_end": end, "rule": rule,
        "method": method, "classifiers": list(classifiers), "thresholds": thresholds,
        "target_marginal_precision": 0.3, "tp": None, "fp": None, "precision": None,
        "marginal_precision_left": None, "marginal_precision_right": None,
        "rated_positives": 50.0, "rated_negatives": 50.0, "threshold_ci_low": None,
        "threshold_ci_high": None, "tp_ci_low": None, "tp_ci_high": None, "fp_ci_low": None,
        "fp_ci_high": None, "precision_ci_low": None, "precision_ci_high": None,
        "status": status, "fallback_group": fallback_group, "pane_index": pane,
        "run_id": run_id, "config_digest": "x", **coverage_fields(),
    }


def write_operating_points(path: Path, thresholds=THRESHOLDS, rule="any") -> str:
    records = [op_record(g, s, t, f, rule=rule) for g, (s, t, f) in thresholds.items()]
    # A second method with other thresholds: decide must use the config's decision_method.
    records += [op_record(g, "ok", [0.0, 0.0], method="hull", rule=rule) for g in thresholds]
    pq.write_table(records_to_table(records, "operating_point.json"), path)
    return str(path)


def make_stream(n=3000, seed=0) -> pd.DataFrame:
    """Rows of 5 groups, nullable scores, probabilities and set ids; sets spread over the rows."""
    rng = np.random.default_rng(seed)
    scores = rng.random((n, 2))
    scores[rng.random((n, 2)) < 0.15] = np.nan  # did not score
    probability = rng.random(n) ** 3
    probability[rng.random(n) < 0.05] = np.nan
    probability[:40] = 0.2  # ties in probability inside sets
    set_number = rng.integers(0, n // 12, size=n)  # ~12 items per set, sizes vary
    set_id = np.array([f"s{s:04d}" for s in set_number], dtype=object)
    set_id[rng.random(n) < 0.05] = None
    group = np.asarray(GROUPS, dtype=object)[rng.integers(0, len(GROUPS), size=n)]
    # scores exactly at g0's thresholds (0.6, 0.7): they fire (score >= threshold)
    group[50:70] = "g0"
    scores[50:60] = [0.6, np.nan]
    scores[60:70] = [0.6, 0.7]
    return pd.DataFrame({
        "group": group,
        "item_id": rng.permutation(n).astype(np.int64) * 7 + 3,
        "text_model": scores[:, 0],
        "image_model": scores[:, 1],
        "probability": probability,
        "set_id": set_id,
        "weight": np.ones(n),
    })


def write_files(frame: pd.DataFrame, directory: Path, n_files: int, row_group_size: int) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    bounds = np.linspace(0, len(frame), n_files + 1).astype(int)
    for i in range(n_files):
        pq.write_table(table.slice(bounds[i], bounds[i + 1] - bounds[i]),
                       directory / f"part-{i}.parquet", row_group_size=row_group_size)
    return str(directory / "*.parquet")


def decide(tmp_path: Path, frame, config, *, ops=None, n_files=2, row_group_size=97, name="run"):
    inputs = write_files(frame, tmp_path / f"in-{name}", n_files, row_group_size)
    ops = ops or write_operating_points(tmp_path / "ops.parquet")
    manifest = run_decide(config, inputs, ops, str(tmp_path / f"out-{name}"), beam_args=[])
    decisions = read_decisions(str(tmp_path / f"out-{name}")).to_pandas()
    return manifest, decisions.set_index("item_id").sort_index()


def expected_threshold_decisions(frame: pd.DataFrame, rule: str, thresholds=THRESHOLDS):
    """Direct numpy: per row, its group's thresholds (or __all__'s), compare, combine."""
    scores = np.nan_to_num(frame[list(CLASSIFIERS)].to_numpy(), nan=-np.inf)
    usable_all = thresholds["__all__"][1] is not None
    out, groups = [], []
    for g, row in zip(frame["group"], scores, strict=True):
        status, t, _ = thresholds.get(g, ("ok", thresholds["__all__"][1], None))
        if t is None or (g not in thresholds and not usable_all):
            out.append(None)
            groups.append(None)
            continue
        fired = row >= np.asarray(t)
        out.append(bool(fired.any() if rule == "any" else fired.all()))
        groups.append(g if g in thresholds and status == "ok" else "__all__")
    index = frame["item_id"].astype(str)
    return pd.Series(out, index=index, dtype=object), pd.Series(groups, index=index, dtype=object)


# ---------------------------------------------------------------------------- threshold path
@pytest.mark.parametrize("rule", ["any", "all"])
def test_threshold_decisions_equal_direct_numpy(tmp_path, rule):
    frame = make_stream()
    ops = write_operating_points(tmp_path / "ops.parquet", rule=rule)
    manifest, got = decide(tmp_path, frame, make_config(rule=rule), ops=ops)
    want, want_groups = expected_threshold_decisions(frame, rule)
    want, want_groups = want.sort_index(), want_groups.sort_index()
    assert list(got.index) == list(want.index)
    assert got["threshold_decision"].astype(object).where(got["threshold_decision"].notna(),
                                                          None).tolist() == want.tolist()
    assert got["operating_point_group"].tolist() == want_groups.tolist()
    # the scenario covers every case: flagged, not flagged, null, fallback, missing group
    assert {True, False, None} <= set(want.tolist())
    at_threshold = frame.item_id.iloc[60:70].astype(str) if rule == "all" else \
        frame.item_id.iloc[50:70].astype(str)
    assert got.loc[at_threshold, "threshold_decision"].all()
    assert set(got.loc[frame.loc[frame.group == "g_missing", "item_id"].astype(str),
                       "operating_point_group"]) == {"__all__"}
    assert got.loc[frame.loc[frame.group == "g_thin", "item_id"].astype(str),
                   "threshold_decision"].isna().all()
    assert set(got["operating_point_method"].dropna()) == {"graph"}
    assert got["topk_decision"].isna().all() and got["k"].isna().all()
    assert (got["loss"] == "f1").all() and got["set_id"].isna().all()
    # fast path: one decision file per input row group, named by source and row group
    files = [o for o in manifest["outputs"] if o.startswith("decisions/")]
    assert len(files) == 2 * -(-(len(frame) // 2) // 97)
    assert all("-rg" in f for f in files)
    assert manifest["decision_counts"]["threshold_null"] == int(want.isna().sum())
    assert manifest["decision_counts"]["threshold_flagged"] == int((want == True).sum())  # noqa: E712


def test_missing_group_is_null_when_all_groups_point_is_unusable(tmp_path):
    thresholds = {**THRESHOLDS, "__all__": ("insufficient_data", None, None)}
    thresholds.pop("g_fb")
    ops = write_operating_points(tmp_path / "ops.parquet", thresholds=thresholds)
    frame = make_stream(800, seed=3)
    _, got = decide(tmp_path, frame, make_config(), ops=ops)
    missing = frame.loc[frame.group.isin(["g_missing", "g_fb"]), "item_id"].astype(str)
    assert got.loc[missing, "threshold_decision"].isna().all()
    assert got.loc[missing, "operating_point_group"].isna().all()
    g0 = frame.loc[frame.group == "g0", "item_id"].astype(str)
    assert got.loc[g0, "threshold_decision"].notna().all()


def test_output_schema_is_the_decision_contract(tmp_path):
    manifest, _ = decide(tmp_path, make_stream(300), make_config(topk=True))
    run_dir = tmp_path / "out-run" / "runs" / manifest["run_id"]
    files = sorted((run_dir / "decisions").glob("*.parquet"))
    assert files
    for f in files:
        assert pq.read_schema(f).remove_metadata() == DECISION_SCHEMA
    assert (tmp_path / "out-run" / "LATEST").read_text().strip() == manifest["run_id"]
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "complete"


# ---------------------------------------------------------------------------- top-k path
@pytest.mark.parametrize(("loss", "params"), [("f1", {}), ("fbeta", {"beta": 2.0})])
def test_topk_equals_optimal_topk_per_set(tmp_path, loss, params):
    frame = make_stream(2500, seed=1)
    config = make_config(topk=True, loss=loss, params=params)
    manifest, got = decide(tmp_path, frame, config, n_files=2, row_group_size=61)
    # independent path: per set, items ordered by item id (as a string),
    # costlib.decoding.optimal_topk
    in_set = frame[frame.set_id.notna() & frame.probability.notna()].copy()
    in_set["item"] = in_set.item_id.astype(str)
    rows = {}
    n_sets = 0
    for _, members in in_set.sort_values(["set_id", "item"]).groupby("set_id", sort=True):
        result = optimal_topk(members.probability.to_numpy(), loss, **params)
        n_sets += 1
        for item, chosen in zip(members.item, result.selected, strict=True):
            rows[item] = (bool(chosen), result.k, result.expected_loss)
    want = pd.DataFrame.from_dict(rows, orient="index",
                                  columns=["topk", "k", "expected_loss"]).sort_index()
    decided = got.loc[want.index]
    assert decided.topk_decision.tolist() == want.topk.tolist()
    assert decided.k.tolist() == want.k.tolist()
    np.testing.assert_allclose(decided.expected_loss.to_numpy(dtype=float),
                               want.expected_loss.to_numpy(), rtol=1e-12, atol=1e-15)
    assert want.topk.any() and (want.k > 1).any()
    # sets really were split: items of one set in both files and several row groups
    half = len(frame) // 2
    first, second = frame.iloc[:half], frame.iloc[half:]
    assert len(set(first.set_id.dropna()) & set(second.set_id.dropna())) > 50
    # rows without a set or without a probability: null top-k fields, still decided
    others = got.drop(index=want.index)
    assert len(others) == len(frame) - len(want) > 0
    assert others[["topk_decision", "k", "expected_loss"]].isna().all().all()
    assert others.threshold_decision.notna().any()
    assert got.loc[frame.item_id.astype(str), "set_id"].fillna("<null>").tolist() == \
        frame.set_id.fillna("<null>").tolist()
    assert manifest["decision_counts"]["topk_sets"] == n_sets
    assert manifest["decision_counts"]["topk_rows"] == len(want)
    assert (got.loss == loss).all()


def test_results_do_not_depend_on_file_order_or_row_groups(tmp_path):
    frame = make_stream(2000, seed=2)
    config = make_config(topk=True, buckets=3)
    first_manifest, first = decide(tmp_path, frame, config, n_files=2, row_group_size=50,
                                   name="a")
    shuffled = frame.sample(frac=1.0, random_state=5).reset_index(drop=True)
    second_manifest, second = decide(tmp_path, shuffled, config, n_files=4,
                                     row_group_size=250, name="b")
    pd.testing.assert_frame_equal(first, second)
    # the per-bucket files are identical, byte for byte
    buckets = {}
    for name, manifest in (("a", first_manifest), ("b", second_manifest)):
        run_dir = tmp_path / f"out-{name}" / "runs" / manifest["run_id"] / "decisions"
        buckets[name] = {p.name: p.read_bytes() for p in run_dir.glob("part-bucket-*.parquet")}
    assert buckets["a"] == buckets["b"] and len(buckets["a"]) == 3


def test_set_buckets_are_stable_and_type_independent():
    ids = pa.array(["s1", "s2", "s1", "abc", "s2"])
    buckets = set_buckets(ids, 16)
    assert buckets[0] == buckets[2] and buckets[1] == buckets[4]
    assert np.array_equal(buckets, set_buckets(pa.array(["s1", "s2", "s1", "abc", "s2"],
                                                        pa.large_string()), 16))
    # ints hash as their decimal string, so int and string set ids agree
    assert np.array_equal(set_buckets(pa.array([12, 7]), 16), set_buckets(pa.array(["12", "7"]),
                                                                           16))
    # fixed values, the same in every process and on every machine (Python's str hash changes
    # per process): a change here moves sets between bucket files of re-runs
    assert set_buckets(pa.array(["s1", "s2", "abc"]), 1024).tolist() == [497, 554, 24]
    assert set_buckets(pa.array(["abc", "s2", "s1"]), 1024).tolist() == [24, 554, 497]
    assert (set_buckets(pa.array([f"x{i}" for i in range(1000)]), 8) < 8).all()
    assert len(set(set_buckets(pa.array([f"x{i}" for i in range(1000)]), 8).tolist())) == 8


def test_batch_where_a_classifier_scored_every_row(tmp_path):
    # regression: validate_batch once wrote into a read-only view of a null-free score column
    frame = make_stream(200, seed=8)
    frame["text_model"] = frame["text_model"].fillna(0.5)  # every row scored by text_model
    _, got = decide(tmp_path, frame, make_config(), n_files=1, row_group_size=100)
    want, _ = expected_threshold_decisions(frame, "any")
    decision = got["threshold_decision"]
    assert decision.astype(object).where(decision.notna(), None).tolist() == \
        want.sort_index().tolist()


# ---------------------------------------------------------------------------- accounting
def test_row_accounting_and_dead_letters(tmp_path):
    frame = make_stream(600, seed=4)
    frame["group"] = frame["group"].astype(object)
    frame.loc[3, "text_model"] = np.nan  # null score: fine (did not score)
    frame.loc[5, "text_model"] = np.inf
    frame.loc[6, "image_model"] = -np.inf
    frame.loc[10, "probability"] = 1.5
    frame.loc[11, "probability"] = -0.1
    frame.loc[[20, 21, 22], "group"] = None
    frame.loc[30, "weight"] = -4.0  # weight is not validated in decide
    table = pa.Table.from_pandas(frame, preserve_index=False)
    # a genuine NaN score (pandas NaN becomes null in Parquet: set it through Arrow)
    text = table.column("text_model").to_numpy(zero_copy_only=False).copy()
    text[7] = np.nan
    nan_mask = np.isnan(text)
    nan_mask[7] = False
    table = table.set_column(table.schema.get_field_index("text_model"), "text_model",
                             pa.array(text, mask=nan_mask))
    directory = tmp_path / "in"
    directory.mkdir()
    pq.write_table(table.slice(0, 300), directory / "a.parquet", row_group_size=40)
    pq.write_table(table.slice(300), directory / "b.parquet", row_group_size=40)
    ops = write_operating_points(tmp_path / "ops.parquet")
    out = tmp_path / "out"
    manifest = run_decide(make_config(topk=True, null_group="dead_letter"),
                          str(directory / "*.parquet"), ops, str(out), beam_args=[])
    accounting = manifest["row_accounting"]
    assert accounting["read"] == 600
    assert accounting["dead_letter_reasons"] == {
        "invalid_score": 3, "invalid_probability": 2, "missing_group": 3,
    }
    assert accounting["decided"] == 600 - 8 and accounting["dead_lettered"] == 8
    decisions = read_decisions(str(out)).to_pandas()
    assert len(decisions) == 592
    bad_ids = frame.loc[[5, 6, 7, 10, 11, 20, 21, 22], "item_id"].astype(str)
    assert not set(bad_ids) & set(decisions.item_id)
    assert frame.loc[30, "item_id"].astype(str) in set(decisions.item_id)
    dead_dir = out / "runs" / manifest["run_id"] / "dead_letter"
    dead = pd.concat([pd.read_parquet(p) for p in sorted(dead_dir.glob("*.parquet"))])
    reasons = dict(zip(dead.item_id.astype(str), dead.dead_letter_reason, strict=True))
    assert reasons == dict(zip(bad_ids, ["invalid_score"] * 3 + ["invalid_probability"] * 2
                               + ["missing_group"] * 3, strict=True))
    assert set(dead.source_file.map(lambda p: Path(p).name)) == {"a.parquet"}
    first = dead.set_index(dead.item_id.astype(str)).loc[bad_ids.iloc[0]]
    assert (first.row_group, first.row_in_row_group) == (0, 5)


def test_many_groups_read_from_dictionary_pages_and_exact_dead_letters(tmp_path):
    """The group column is read from the files' dictionary pages: with more groups than a
    dictionary page holds (the writer falls back to plain pages) the decisions still equal
    direct numpy, and the dead letters are the input rows exactly, group column typed as
    the file stores it."""
    frame = make_stream(4000, seed=8)
    rng = np.random.default_rng(8)
    many = np.array([f"market-{i:05d}" for i in range(3000)], dtype=object)
    frame["group"] = many[rng.integers(0, many.size, len(frame))]
    frame.loc[::7, "group"] = "g0"  # groups with a record among them
    frame.loc[1::11, "group"] = "g_thin"
    frame.loc[[5, 9], "group"] = None
    frame.loc[13, "group"] = "__all__"
    table = pa.Table.from_pandas(frame, preserve_index=False)
    directory = tmp_path / "in"
    directory.mkdir()
    pq.write_table(table, directory / "a.parquet", row_group_size=1500,
                   dictionary_pagesize_limit=2048)
    assert "PLAIN" in pq.ParquetFile(directory / "a.parquet").metadata.row_group(0) \
        .column(0).encodings
    out = tmp_path / "out"
    manifest = run_decide(make_config(null_group="dead_letter"), str(directory / "*.parquet"),
                          write_operating_points(tmp_path / "ops.parquet"), str(out),
                          beam_args=[])
    assert manifest["row_accounting"]["dead_letter_reasons"] == {"missing_group": 2,
                                                                 "reserved_group": 1}
    got = read_decisions(str(out)).to_pandas().set_index("item_id").sort_index()
    valid = frame.drop(index=[5, 9, 13])
    want, want_groups = expected_threshold_decisions(valid, "any")
    want, want_groups = want.sort_index(), want_groups.sort_index()
    assert list(got.index) == list(want.index)
    assert got["threshold_decision"].astype(object).where(got["threshold_decision"].notna(),
                                                          None).tolist() == want.tolist()
    assert got["operating_point_group"].tolist() == want_groups.tolist()
    assert got["group"].tolist() == valid.set_index(valid.item_id.astype(str)) \
        .sort_index()["group"].tolist()
    dead_dir = out / "runs" / manifest["run_id"] / "dead_letter"
    dead = pa.concat_tables([pq.read_table(p) for p in sorted(dead_dir.glob("*.parquet"))])
    assert dead.schema.field("group").type == pa.string()
    rows = dead.sort_by("row_in_row_group")
    read = ["group", "item_id", *CLASSIFIERS]  # the columns decide reads, as read
    assert rows.column_names[:4] == read
    assert rows.select(read).equals(table.select(read).take([5, 9, 13]))
    assert rows.column("dead_letter_reason").to_pylist() == ["missing_group"] * 2 + [
        "reserved_group"]


# ---------------------------------------------------------------------------- operating points
def test_with_recalibrate_output_directory(tmp_path):
    stream = generate_score_stream(20_000, seed=3)
    inputs = write_score_stream(stream, str(tmp_path / "in"), n_files=2, row_group_size=4000)
    config = make_config(topk=True)
    run_recalibrate(config, str(tmp_path / "in" / "*.parquet"), str(tmp_path / "ops"),
                    beam_args=[])
    manifest = run_decide(config, inputs, str(tmp_path / "ops"), str(tmp_path / "dec"),
                          beam_args=[])
    records = [r for r in load_operating_points(str(tmp_path / "ops"))[0] if r["method"] == "graph"]
    assert manifest["operating_points"]["run_ids"] == [records[0]["run_id"]]
    assert manifest["operating_points"]["source"].endswith(records[0]["run_id"])
    got = read_decisions(str(tmp_path / "dec")).to_pandas().set_index("item_id")
    by_group = {r["group"]: r for r in records}
    scores = np.nan_to_num(stream[list(CLASSIFIERS)].to_numpy(), nan=-np.inf)
    for group, rows in stream.groupby("group"):
        t = np.asarray(by_group[group]["thresholds"])
        want = (scores[rows.index] >= t).any(axis=1)
        assert got.loc[rows.item_id.astype(str), "threshold_decision"].tolist() == want.tolist()
    assert got.threshold_decision.sum() > 0 and got.topk_decision.sum() > 0
    assert manifest["row_accounting"]["decided"] == len(stream)


def _window(day):
    start = dt.datetime(2026, 11, day, tzinfo=dt.UTC)
    return start, start + dt.timedelta(days=7)


def test_windowed_records_use_latest_window_and_newest_pane():
    config = make_config(window="latest")  # complete windows: tests/test_windowed_decide.py
    records = [
        op_record("g0", "ok", [0.1, 0.1], window=_window(1)),
        op_record("g0", "ok", [0.2, 0.2], window=_window(2), pane=0),
        op_record("g0", "ok", [0.3, 0.3], window=_window(2), pane=1),
        op_record("g1", "ok", [0.4, 0.4], window=_window(1)),
        op_record("__all__", "insufficient_data", None, window=_window(2)),
    ]
    chosen = select_operating_points(records, config)
    assert chosen.get("g0").thresholds == (0.3, 0.3)
    assert chosen.get("g1").thresholds == (0.4, 0.4)
    assert chosen.get("other").thresholds is None
    assert chosen.details["windowed"]
    # batch records, when present, win over windowed ones
    batch = select_operating_points([*records, op_record("g0", "ok", [0.9, 0.9])], config)
    assert batch.get("g0").thresholds == (0.9, 0.9)
    assert batch.get("g1").thresholds is None  # no batch record: __all__ has none either


def test_windowed_run_directory_is_read_window_by_window(tmp_path):
    run = tmp_path / "recal" / "runs" / "w1"
    for day, thresholds in ((1, [0.1, 0.1]), (2, [0.2, 0.3])):
        start, end = _window(day)
        directory = run / "windows" / f"{start:%Y%m%dT%H%M%S}_{end:%Y%m%dT%H%M%S}"
        directory.mkdir(parents=True)
        records = [op_record(g, "ok", thresholds, window=(start, end), run_id="w1")
                   for g in ("g0", "__all__")]
        pq.write_table(records_to_table(records, "operating_point.json"),
                       directory / "operating_points.parquet")
    # the run read events from the first window's start to the second window's end
    read = {"min_utc": "2026-11-01T00:00:00+00:00", "max_utc": "2026-11-08T23:59:59+00:00"}
    (run / "manifest.json").write_text(json.dumps({"event_time_range": read}))
    (tmp_path / "recal" / "LATEST").write_text("w1\n")
    records, source = load_operating_points(str(tmp_path / "recal"))
    assert source == str(run) and len(records) == 4
    chosen = select_operating_points(records, make_config(), source=source,
                                     event_time_range=read)
    assert chosen.get("g0").thresholds == (0.2, 0.3)
    assert chosen.get("g9") == GroupThresholds((0.2, 0.3), "__all__", "graph", _window(2)[1])


def test_thresholds_follow_the_config_classifier_order():
    record = op_record("g0", "ok", [0.9, 0.1], classifiers=("image_model", "text_model"))
    assert select_operating_points([record], make_config()).get("g0").thresholds == (0.1, 0.9)
    record["proposed_thresholds"] = [INF, 0.05]
    chosen = select_operating_points([record], make_config()).get("g0")
    assert chosen.proposed == (0.05, INF)


@pytest.mark.parametrize(("record", "message"), [
    (op_record("g0", "ok", [0.5, 0.5], rule="all"), "optimised for rule 'all'"),
    (op_record("g0", "ok", [0.5, 0.5], classifiers=("a", "b")), "is for classifiers"),
    (op_record("g0", "ok", [0.5, -INF]), "must be a finite number or \\+inf"),
    (op_record("g0", "ok", [0.5, 0.5], method="hull"), "no operating point for method 'graph'"),
    ({**op_record("g0", "ok", [0.5, 0.5]), "proposed_thresholds": [0.4, float("nan")]},
     "proposed_thresholds .* must be a finite number or \\+inf"),
    ({**op_record("g0", "ok", [0.5, 0.5]), "proposed_thresholds": [0.4]},
     "1 proposed_thresholds for 2 classifiers"),
])
def test_operating_points_that_do_not_fit_the_config(record, message):
    with pytest.raises(InputError, match=message):
        select_operating_points([record], make_config())


def test_duplicate_records_for_a_group_are_refused():
    records = [op_record("g0", "ok", [0.5, 0.5], run_id=r) for r in ("r1", "r2")]
    with pytest.raises(InputError, match=r"two operating points .* 'g0'"):
        select_operating_points(records, make_config())


def test_missing_or_incomplete_operating_points_give_clear_errors(tmp_path):
    inputs = write_files(make_stream(100), tmp_path / "in", 1, 50)
    config = make_config()
    with pytest.raises(InputError, match="nowhere: operating points not found"):
        run_decide(config, inputs, str(tmp_path / "nowhere"), str(tmp_path / "o"), beam_args=[])
    with pytest.raises(InputError, match=r"ops\.parquet: operating points file not found"):
        run_decide(config, inputs, str(tmp_path / "ops.parquet"), str(tmp_path / "o"),
                   beam_args=[])
    incomplete = tmp_path / "rec" / "runs" / "r1"
    incomplete.mkdir(parents=True)
    write_operating_points(incomplete / "operating_points.parquet")
    with pytest.raises(InputError, match=r"r1: no manifest\.json: the run is incomplete"):
        run_decide(config, inputs, str(incomplete), str(tmp_path / "o"), beam_args=[])
    (tmp_path / "rec" / "LATEST").write_text("r2\n")
    with pytest.raises(InputError, match=r"LATEST names run directory .*r2, which does not exist"):
        run_decide(config, inputs, str(tmp_path / "rec"), str(tmp_path / "o"), beam_args=[])
    assert not (tmp_path / "o").exists()  # nothing written before the inputs were checked


# ---------------------------------------------------------------------------- CLI
def test_cli_decide_passes_beam_flags(tmp_path, capsys):
    inputs = write_files(make_stream(400, seed=6), tmp_path / "in", 2, 100)
    ops = write_operating_points(tmp_path / "ops.parquet")
    config_path = tmp_path / "config.yaml"
    config_path.write_text(json.dumps(make_config(topk=True).raw))  # JSON is YAML
    code = main(["decide", "--config", str(config_path), "--input", inputs,
                 "--operating-points", ops, "--output", str(tmp_path / "out"),
                 "--run-id", "fixed", "--direct_running_mode=in_memory"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "read 400 rows, decided 400" in printed and "top-k (f1)" in printed
    manifest = json.loads((tmp_path / "out" / "runs" / "fixed" / "manifest.json").read_text())
    assert manifest["runner"] == "FnApiRunner"
    code = main(["decide", "--config", str(config_path), "--input", inputs,
                 "--operating-points", str(tmp_path / "none"), "--output", str(tmp_path / "o")])
    assert code == 2 and "operating points not found" in capsys.readouterr().err


def test_cli_refuses_unknown_arguments_for_commands_without_beam_flags(monkeypatch):
    module = types.ModuleType("plain_command")
    module.add_arguments = lambda parser: parser.add_argument("--n", type=int, default=1)
    module.run = lambda args: args.n
    monkeypatch.setitem(sys.modules, "plain_command", module)
    monkeypatch.setitem(cli.SUBCOMMANDS, "plain", ("plain_command", "a command"))
    assert main(["plain", "--n", "3"]) == 3
    assert main(["plain", "--runner=FlinkRunner"]) == 2  # exit 2: no Beam flags here


# ---------------------------------------------------------------------------- null groups
def _null_group_stream():
    frame = make_stream(800, seed=11)
    frame.loc[[3, 40, 41, 500], "group"] = None
    frame.loc[7, "group"] = "__all__"  # a row that names the reserved group: still refused
    return frame


def test_null_group_rows_are_decided_with_the_all_groups_points_by_default(tmp_path):
    """Default decide.null_group all_groups: a row without a group gets __all__'s thresholds
    (as a group without a record does), its group is written as __all__, and the rows are
    counted; a row that names __all__ itself is still dead-lettered (reserved_group)."""
    frame = _null_group_stream()
    manifest, got = decide(tmp_path, frame, make_config())
    assert manifest["row_accounting"]["dead_letter_reasons"] == {"reserved_group": 1}
    assert manifest["row_accounting"]["decided"] == 799
    assert manifest["decision_counts"]["null_group_decided_with_all_groups"] == 4
    null_ids = frame.loc[[3, 40, 41, 500], "item_id"].astype(str)
    rows = got.loc[null_ids]
    assert (rows["group"] == "__all__").all()
    assert (rows["operating_point_group"] == "__all__").all()
    # the decision by hand, with __all__'s thresholds (0.55, 0.65) and rule any
    scores = np.nan_to_num(frame.loc[[3, 40, 41, 500], list(CLASSIFIERS)].to_numpy(),
                           nan=-np.inf)
    want = (scores >= np.array(THRESHOLDS["__all__"][1])).any(axis=1)
    assert rows["threshold_decision"].astype(bool).tolist() == want.tolist()
    # every other row is decided exactly as before
    others = frame.drop(index=[3, 40, 41, 500, 7])
    others = others.set_index(others.item_id.astype(str)).sort_index()
    expected, _ = expected_threshold_decisions(others.reset_index(drop=True), "any")
    mine = got.drop(index=null_ids).sort_index()
    assert mine["threshold_decision"].astype(object).where(
        mine["threshold_decision"].notna(), None).tolist() == list(expected)


def test_null_group_dead_letter_keeps_them_out(tmp_path):
    frame = _null_group_stream()
    manifest, got = decide(tmp_path, frame, make_config(null_group="dead_letter"))
    assert manifest["row_accounting"]["dead_letter_reasons"] == {"missing_group": 4,
                                                                 "reserved_group": 1}
    assert "null_group_decided_with_all_groups" not in manifest["decision_counts"]
    assert len(got) == 795 and "__all__" not in set(got["group"])


def test_the_summary_counts_rows_decided_without_a_group(tmp_path, capsys):
    frame = _null_group_stream()
    inputs = write_files(frame, tmp_path / "in", 1, 400)
    ops = write_operating_points(tmp_path / "ops.parquet")
    config = tmp_path / "c.json"
    config.write_text(json.dumps(make_config().raw))
    assert main(["decide", "--config", str(config), "--input", inputs, "--operating-points",
                 ops, "--output", str(tmp_path / "out")]) == 0
    assert ("warning: 4 rows without a group were decided with the all-groups points"
            in capsys.readouterr().out)
