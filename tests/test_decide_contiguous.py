"""Top-k decisions without a shuffle (``decoding.sets_contiguous: true``).

Independent truths: the shuffle path on the same files (every column of every record equal,
expected losses bit for bit), :func:`costlib.decoding.optimal_topk` set by set with items in
item-id order (decisions and ``k`` exactly, losses to 1e-12), and the shuffle path's own
decoding (:func:`decode_sets`) of the same rows for the in-place decoder. Violations of the
declared layout (a set in two runs of a row group, a set in two row groups of one file or of
two files) must stop the run with exit 2 and no manifest.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decide_topk import decided_rows, decision_rows

from costlib.decoding import optimal_topk
from costlib_pipelines.commands.cli import main
from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.decide.contiguous import (
    ContiguousBatch,
    _order_in_runs,
    decode_contiguous_batches,
    decode_contiguous_sets,
)
from costlib_pipelines.decide.pipeline import run_decide
from costlib_pipelines.decide.records import (
    COMPACT_SCHEMA,
    as_contract,
    read_decisions,
    set_id_dictionary,
)
from costlib_pipelines.decide.sets import PROBABILITY, TOPK_FIELDS, decode_sets, set_id_hashes
from costlib_pipelines.decide.transforms import CheckSetsFn
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.records import records_to_table

CLASSIFIERS = ("text_model", "image_model")


def make_config(*, contiguous: bool, buckets: int = 3, audit: bool = False,
                null_group: str = "all_groups") -> RunConfig:
    return RunConfig.from_dict({
        "decide": {"null_group": null_group},
        "columns": {"probability": "probability", "set_id": "set_id"},
        "classifiers": list(CLASSIFIERS), "rule": "any", "grid": {},
        "target": {"marginal_precision": 0.3}, "min_rated": {}, "bootstrap": {},
        "decoding": {"loss": "f1", "params": {}, "buckets": buckets,
                     "sets_contiguous": contiguous},
        "audit": {"salt": "contiguous-tests", "enabled": audit, "budget_share": 0.3},
    })


def write_operating_points(path: Path) -> str:
    from pipeline_data import coverage_fields
    records = []
    for group, thresholds in (("g0", [0.6, 0.7]), ("g1", [0.3, float("inf")]),
                              ("__all__", [0.55, 0.65])):
        records.append({
            "group": group, "window_start": None, "window_end": None, "rule": "any",
            "method": "graph", "classifiers": list(CLASSIFIERS), "thresholds": thresholds,
            "target_marginal_precision": 0.3, "tp": None, "fp": None, "precision": None,
            "marginal_precision_left": None, "marginal_precision_right": None,
            "rated_positives": 50.0, "rated_negatives": 50.0, "threshold_ci_low": None,
            "threshold_ci_high": None, "tp_ci_low": None, "tp_ci_high": None,
            "fp_ci_low": None, "fp_ci_high": None, "precision_ci_low": None,
            "precision_ci_high": None, "status": "ok", "fallback_group": None,
            "pane_index": 0, "run_id": "op-run", "config_digest": "x", **coverage_fields()})
    pq.write_table(records_to_table(records, "operating_point.json"), path)
    return str(path)


def set_stream(n_sets: int, seed: int) -> list[pd.DataFrame]:
    """One frame per set (sizes 1-30), rows of a set together; ties in probability, null
    probabilities inside sets, and rows without a set between sets."""
    rng = np.random.default_rng(seed)
    frames, item = [], 0
    for s in rng.permutation(n_sets):
        size = int(rng.integers(1, 31))
        probability = np.round(rng.random(size) ** 2, 1)  # many ties
        probability[rng.random(size) < 0.05] = np.nan  # in the set's run, not in the set
        scores = rng.random((size, 2))
        scores[rng.random((size, 2)) < 0.15] = np.nan
        set_id = np.full(size, f"set-{s:04d}", dtype=object)
        if rng.random() < 0.2:  # a row without a set after this one
            set_id = np.append(set_id, None)
            probability = np.append(probability, rng.random())
            scores = np.vstack([scores, rng.random((1, 2))])
            size += 1
        frames.append(pd.DataFrame({
            "group": np.array(["g0", "g1", "g2"], dtype=object)[rng.integers(0, 3, size)],
            "item_id": [f"item-{i:06d}" for i in rng.permutation(np.arange(item, item + size))],
            "text_model": scores[:, 0], "image_model": scores[:, 1],
            "probability": probability, "set_id": set_id}))
        item += size
    return frames


def write_row_groups(path: Path, row_groups: list[pd.DataFrame]) -> None:
    """One Parquet row group per frame."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tables = [pa.Table.from_pandas(f, preserve_index=False) for f in row_groups]
    with pq.ParquetWriter(path, tables[0].schema) as writer:
        for table in tables:
            writer.write_table(table, row_group_size=table.num_rows)


def write_contiguous(directory: Path, sets: list[pd.DataFrame], n_files: int,
                     sets_per_group: int) -> str:
    """Files of row groups of ``sets_per_group`` whole sets each."""
    per_file = np.array_split(np.arange(len(sets)), n_files)
    for i, chosen in enumerate(per_file):
        groups = [pd.concat([sets[j] for j in chosen[start:start + sets_per_group]])
                  for start in range(0, chosen.size, sets_per_group)]
        write_row_groups(directory / f"part-{i}.parquet", groups)
    return str(directory / "*.parquet")


def decide(tmp_path: Path, inputs: str, config: RunConfig, name: str):
    ops = write_operating_points(tmp_path / "ops.parquet")
    manifest = run_decide(config, inputs, ops, str(tmp_path / name), beam_args=[])
    decided = read_decisions(str(tmp_path / name)).to_pandas()
    return manifest, decided.set_index("item_id").sort_index()


def decision_files(tmp_path: Path, name: str, manifest: dict) -> list[str]:
    return sorted(p.name for p in
                  (tmp_path / name / "runs" / manifest["run_id"] / "decisions").iterdir())


# ---------------------------------------------------------------------------- end to end
@pytest.mark.parametrize("audit", [False, True])
def test_in_place_decoding_equals_the_shuffle_path_record_for_record(tmp_path, audit):
    sets = set_stream(300, seed=1)
    inputs = write_contiguous(tmp_path / "in", sets, n_files=3, sets_per_group=17)
    manifest, got = decide(tmp_path, inputs, make_config(contiguous=True, audit=audit), "c")
    shuffle_manifest, want = decide(tmp_path, inputs, make_config(contiguous=False,
                                                                  audit=audit), "s")
    # every column of every record, expected losses bit for bit
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    counts, shuffle_counts = manifest["decision_counts"], shuffle_manifest["decision_counts"]
    assert counts.pop("topk_sets_checked") == counts["topk_sets"] == 300
    assert counts == shuffle_counts
    assert manifest["decoding"]["sets_contiguous"] is True
    # no shuffle: one file per input row group, no bucket files
    files = decision_files(tmp_path, "c", manifest)
    assert not [f for f in files if "bucket" in f]
    assert len(files) == sum(pq.ParquetFile(p).num_row_groups
                             for p in sorted((tmp_path / "in").glob("*.parquet")))
    assert len([f for f in decision_files(tmp_path, "s", shuffle_manifest)
                if "bucket" in f]) == 3
    if audit:
        assert got.audit.any() and not got.audit.all()


def test_in_place_decoding_equals_optimal_topk_set_by_set(tmp_path):
    sets = set_stream(120, seed=2)
    inputs = write_contiguous(tmp_path / "in", sets, n_files=2, sets_per_group=9)
    _, got = decide(tmp_path, inputs, make_config(contiguous=True), "c")
    frame = pd.concat(sets)
    members = frame[frame.set_id.notna() & frame.probability.notna()]
    n_checked = 0
    for _, rows in members.sort_values(["set_id", "item_id"]).groupby("set_id"):
        result = optimal_topk(rows.probability.to_numpy(), "f1")
        decided = got.loc[rows.item_id]
        assert decided.topk_decision.tolist() == result.selected.tolist()
        assert (decided.k == result.k).all()
        np.testing.assert_allclose(decided.expected_loss.to_numpy(float), result.expected_loss,
                                   rtol=1e-12, atol=1e-15)
        n_checked += 1
    assert n_checked == 120
    others = got.drop(index=members.item_id)
    assert len(others) > 0 and others[list(TOPK_FIELDS)].isna().all().all()
    # input order within each row-group file: set rows keep their place
    assert got.topk_decision.any() and (got.k > 1).any()


# ---------------------------------------------------------------------------- violations
def assert_not_published(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    assert not (out / "LATEST").exists()
    assert not list(out.glob("runs/*/manifest.json"))


def test_a_set_in_two_runs_of_a_row_group_stops_the_run(tmp_path):
    sets = set_stream(20, seed=3)
    broken = pd.concat([sets[0], sets[1]]).reset_index(drop=True)
    broken.loc[0, "set_id"] = sets[1].set_id.iloc[0]  # set 1's id also on row 0
    broken.loc[0, "probability"] = 0.5
    path = tmp_path / "in" / "part-0.parquet"
    write_row_groups(path, [pd.concat(sets[2:5]), broken])
    set_id = sets[1].set_id.iloc[0]
    with pytest.raises(InputError, match=(
            rf"part-0.parquet: row group 1: column set_id: set '{set_id}' is not contiguous: "
            rf"its rows form 2 separate runs \(starting at rows 0, {len(sets[0])}\)")):
        decide(tmp_path, str(path), make_config(contiguous=True), "c")
    assert_not_published(tmp_path, "c")
    # the shuffle path decodes the same file
    decide(tmp_path, str(path), make_config(contiguous=False), "s")


@pytest.mark.parametrize("across_files", [False, True])
def test_a_set_in_two_row_groups_stops_the_run_before_its_manifest(tmp_path, across_files):
    sets = set_stream(30, seed=4)
    split = sets[7]
    head, tail = split.iloc[:3], split.iloc[3:]
    assert len(tail) and tail.set_id.notna().any()
    first = [pd.concat(sets[:5]), pd.concat([*sets[5:7], head])]
    second = [pd.concat([tail, *sets[8:12]]), pd.concat(sets[12:])]
    if across_files:
        write_row_groups(tmp_path / "in" / "part-0.parquet", first)
        write_row_groups(tmp_path / "in" / "part-1.parquet", second)
        where = (r"part-0.parquet row group 1 and .*part-1.parquet row group 0")
    else:
        write_row_groups(tmp_path / "in" / "part-0.parquet", first + second)
        where = r"part-0.parquet row group 1 and .*part-0.parquet row group 2"
    inputs = str(tmp_path / "in" / "*.parquet")
    with pytest.raises(InputError, match=(
            rf"set '{split.set_id.iloc[0]}' \(column set_id\) is in two row groups: .*{where}")):
        decide(tmp_path, inputs, make_config(contiguous=True), "c")
    assert_not_published(tmp_path, "c")


def test_cli_exits_2_for_a_split_set_and_for_a_bad_key(tmp_path, capsys):
    sets = set_stream(10, seed=5)
    split = sets[3]
    write_row_groups(tmp_path / "in" / "part-0.parquet",
                     [pd.concat([*sets[:3], split.iloc[:1]]),
                      pd.concat([split.iloc[1:], *sets[4:]])])
    ops = write_operating_points(tmp_path / "ops.parquet")

    def run(config: dict) -> int:
        path = tmp_path / "config.yaml"
        path.write_text(json.dumps(config))  # JSON is YAML
        return main(["decide", "--config", str(path), "--input",
                     str(tmp_path / "in" / "*.parquet"), "--operating-points", ops,
                     "--output", str(tmp_path / "out")])

    config = make_config(contiguous=True).raw
    assert run(config) == 2
    err = capsys.readouterr().err
    assert "is in two row groups" in err and "Traceback" not in err
    config["decoding"]["sets_contiguous"] = "yes"
    assert run(config) == 2
    assert "decoding.sets_contiguous" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_the_key_must_be_a_boolean(value):
    raw = make_config(contiguous=False).raw
    raw["decoding"]["sets_contiguous"] = value
    with pytest.raises(ConfigError, match=r"decoding\.sets_contiguous"):
        RunConfig.from_dict(raw)


def test_the_key_defaults_to_the_shuffle():
    raw = make_config(contiguous=False).raw
    del raw["decoding"]["sets_contiguous"]
    assert RunConfig.from_dict(raw).decoding["sets_contiguous"] is False


def test_a_hash_collision_of_two_ids_is_no_split(tmp_path):
    """:class:`CheckSetsFn` confirms a repeated hash on the set ids themselves."""
    for name, ids in (("a", ["x", "x", "y"]), ("b", ["z", "w"])):
        pq.write_table(pa.table({"set_id": ids}), tmp_path / f"{name}.parquet")
    fn = CheckSetsFn(make_config(contiguous=True))
    fake = np.array([12345], dtype=np.uint64).tobytes()  # "the same hash" for x and z
    parts = [(str(tmp_path / "a.parquet"), 0, fake), (str(tmp_path / "b.parquet"), 0, fake)]
    assert list(fn.process((0, parts))) == [{"topk_sets_checked": 2}]
    real = set_id_hashes(pa.array(["y"])).tobytes()
    parts = [(str(tmp_path / "a.parquet"), 0, real), (str(tmp_path / "a.parquet"), 0, real)]
    assert list(fn.process((0, parts))) == [{"topk_sets_checked": 2}]  # one row group
    pq.write_table(pa.table({"set_id": ["y"]}), tmp_path / "c.parquet")
    parts.append((str(tmp_path / "c.parquet"), 0, real))
    with pytest.raises(InputError, match=r"set 'y' .*/a.parquet row group 0 and .*/c.parquet"):
        list(fn.process((0, parts[1:])))


# ---------------------------------------------------------------------------- the decoder
def batch_table(rows: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """Set rows of :func:`decision_rows` as the decide stage's batch: decision columns in
    :data:`COMPACT_SCHEMA` (top-k fields null), and the probabilities."""
    n = rows.num_rows
    columns = {name: rows.column(name) for name in rows.column_names if name != PROBABILITY}
    columns.update({"topk_decision": pa.nulls(n, pa.bool_()), "k": pa.nulls(n, pa.int64()),
                    "expected_loss": pa.nulls(n, pa.float64())})
    table = pa.table({f.name: columns[f.name] for f in COMPACT_SCHEMA}).cast(COMPACT_SCHEMA)
    return table, rows.column(PROBABILITY).to_numpy()


def record_counts(table: pa.Table) -> Counter:
    """The records of ``table`` as a multiset (every column, in the contract's types)."""
    return Counter(tuple(sorted(row.items())) for row in as_contract(table).to_pylist())


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), max_size=st.integers(1, 40),
       out_share=st.sampled_from([0.0, 0.1, 0.5]))
def test_in_place_decoder_equals_the_shuffle_decoder_bit_for_bit(seed, max_size, out_share):
    rows = decision_rows(60, seed=seed, max_size=max_size, tricky=seed % 2 == 0)
    table, probabilities = batch_table(rows)
    in_set = np.random.default_rng(seed).random(rows.num_rows) >= out_share
    if not in_set.any():
        in_set[0] = True
    decoded = decode_contiguous_sets(table, probabilities, in_set, "f1", {}, source="f",
                                     row_group=0)
    assert decoded.table.schema == COMPACT_SCHEMA
    # rows stay in place; rows outside the sets keep null top-k fields
    assert decoded.table.column("item_id").equals(table.column("item_id"))
    for name in TOPK_FIELDS:
        assert decoded.table.column(name).is_null().to_numpy(
            zero_copy_only=False).tolist() == (~in_set).tolist()
    want = decode_sets(rows.filter(pa.array(in_set)), "f1", {})
    # exact: decisions, k and expected-loss bits, each on the row they belong to (repeated
    # items of a set told apart by their other columns)
    assert record_counts(decoded.table.filter(pa.array(in_set))) == record_counts(want)
    assert decided_rows([want]).keys() == {  # and the rows are all there
        (s, i, n) for s, i, n in decided_rows([decoded.table.filter(pa.array(in_set))])}
    n_sets = len(set(rows.filter(pa.array(in_set)).column("set_id").to_pylist()))
    assert decoded.counts["topk_sets"] == n_sets == decoded.hashes.size
    assert decoded.counts["topk_rows"] == int(in_set.sum())
    assert decoded.counts["rows_written"] == rows.num_rows


def test_a_failed_write_behind_fails_the_bundle(tmp_path):
    """Row-group files are written on a writer thread in this mode; a write that fails there
    is raised by the bundle (here: the output "directory" is a file), not lost."""
    from costlib_pipelines.decide.transforms import DecideFileFn
    from costlib_pipelines.io.published_points import select_operating_points
    from costlib_pipelines.io.runs import load_operating_points

    sets = set_stream(10, seed=6)
    path = tmp_path / "in" / "part-0.parquet"
    write_row_groups(path, [pd.concat(sets[:5]), pd.concat(sets[5:])])
    config = make_config(contiguous=True)
    records, source = load_operating_points(write_operating_points(tmp_path / "ops.parquet"))
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    fn = DecideFileFn(select_operating_points(records, config, source=source), config,
                      str(not_a_directory))
    fn.setup()
    fn.start_bundle()
    with pytest.raises(OSError):
        list(fn.process(str(path)))
        fn.finish_bundle()
    fn.teardown()


# ------------------------------------------------------------------ runs already in item order
def brute_force_f1(p: np.ndarray) -> tuple[float, set[frozenset[int]]]:
    """Least expected F1 loss over all 2^n predictions of a small set, by enumerating every
    prediction and every labelling (loss 0 for the empty prediction on a set without
    positives), and the predictions that reach it (to 1e-12)."""
    n = p.size
    labels = (np.arange(2 ** n)[:, None] >> np.arange(n)) & 1  # every labelling
    weight = np.prod(np.where(labels == 1, p, 1 - p), axis=1)
    losses = {}
    for mask in range(2 ** n):
        chosen = ((mask >> np.arange(n)) & 1).astype(bool)
        tp = labels[:, chosen].sum(axis=1)
        fp = chosen.sum() - tp
        fn = labels[:, ~chosen].sum(axis=1)
        denominator = 2 * tp + fp + fn
        f1 = np.where(denominator == 0, 1.0, 2 * tp / np.maximum(denominator, 1))
        losses[frozenset(np.flatnonzero(chosen).tolist())] = float(weight @ (1 - f1))
    best = min(losses.values())
    return best, {s for s, v in losses.items() if v <= best + 1e-12}


def partly_ordered_rows(seed: int, share: float = 0.6) -> pa.Table:
    """:func:`decision_rows` (sets contiguous) with about ``share`` of the sets' rows listed in
    item order (UTF-8 byte order of the ids), the others as they came (items shuffled, and
    repeated items when ``seed % 3 == 0``)."""
    rng = np.random.default_rng(seed)
    rows = decision_rows(40, seed=seed, max_size=8, tricky=seed % 3 == 0)
    sets = np.array(rows.column("set_id").to_pylist(), dtype=object)
    items = np.array([s.encode() for s in rows.column("item_id").to_pylist()], dtype=object)
    bounds = [0, *(np.flatnonzero(sets[1:] != sets[:-1]) + 1).tolist(), sets.size]
    order = []
    for start, stop in pairwise(bounds):
        run = np.arange(start, stop)
        if rng.random() < share:
            run = run[np.argsort(items[run], kind="stable")]
        order.append(run)
    return rows.take(pa.array(np.concatenate(order)))


@pytest.mark.parametrize("seed", range(6))
def test_the_order_inside_runs_is_arrows_sort(seed):
    """The order the in-place decoder gives the rows of each run (runs in item order left as
    they are, the others sorted) is Arrow's stable multi-key sort by run, item id, probability,
    group, threshold decision, audit and audit probability (nulls last)."""
    rows = partly_ordered_rows(seed, share=0.5)
    table, probabilities = batch_table(rows)
    sets = np.array(rows.column("set_id").to_pylist(), dtype=object)
    starts = np.flatnonzero(np.concatenate([[True], sets[1:] != sets[:-1]]))
    run = np.repeat(np.arange(starts.size), np.diff(np.append(starts, sets.size)))
    rows_all = np.arange(rows.num_rows)
    got = _order_in_runs(table, rows_all, starts, run, probabilities)
    got = rows_all if got is None else got
    keys = pa.table({
        "run": run, "item": rows.column("item_id"), "p": probabilities,
        "group": rows.column("group").cast(pa.string()),
        "decision": rows.column("threshold_decision"), "audit": rows.column("audit"),
        "audit_probability": rows.column("audit_probability")})
    want = pc.sort_indices(keys, sort_keys=[(name, "ascending") for name in keys.column_names]
                           ).to_numpy()  # nulls at the end: Arrow's default
    assert got.tolist() == want.tolist()
    assert not np.array_equal(want, rows_all)  # some runs were out of order


@pytest.mark.parametrize("seed", range(6))
def test_runs_in_item_order_skip_the_sort_and_decide_as_brute_force(seed):
    """Sets whose rows already list their items in order (what a stream written set by set
    usually holds) are decoded without a sort, the others (items out of order, or an item
    repeated) are sorted: mixed in one batch, every record equals the shuffle decoder's, and
    every set's decision is a least-expected-loss prediction over all 2^n, brute force."""
    rows = partly_ordered_rows(seed)
    table, probabilities = batch_table(rows)
    in_set = np.ones(rows.num_rows, dtype=bool)
    decoded = decode_contiguous_sets(table, probabilities, in_set, "f1", {}, source="f",
                                     row_group=0)
    want = decode_sets(rows, "f1", {})
    assert record_counts(decoded.table) == record_counts(want)
    got = decoded.table.to_pandas()
    got["p"] = probabilities
    for _, members in got.groupby("set_id", observed=True):
        best, argmins = brute_force_f1(members.p.to_numpy())
        assert members.expected_loss.iloc[0] == pytest.approx(best, abs=1e-12)
        picked = frozenset(np.flatnonzero(members.topk_decision.to_numpy(bool)).tolist())
        assert picked in argmins
        assert (members.k == len(picked)).all()


def test_a_batch_in_item_order_is_decoded_without_any_sort(monkeypatch):
    """Every set in item order: no multi-key sort at all, and the same records."""
    import costlib_pipelines.decide.contiguous as contiguous_module  # _order_in_runs looks it up

    rows = decision_rows(50, seed=11, max_size=12)
    rows = rows.take(pa.array(np.lexsort([
        np.array([s.encode() for s in rows.column("item_id").to_pylist()], dtype=object),
        np.array(rows.column("set_id").to_pylist(), dtype=object)])))  # set by set
    table, probabilities = batch_table(rows)
    want = decode_sets(rows, "f1", {})

    def no_sort(keys):
        raise AssertionError("sorted a batch whose runs are in order")

    monkeypatch.setattr(contiguous_module, "set_order", no_sort)
    decoded = decode_contiguous_sets(table, probabilities, np.ones(rows.num_rows, bool), "f1",
                                     {}, source="f", row_group=0)
    assert record_counts(decoded.table) == record_counts(want)


# ------------------------------------------------------------- set ids from dictionary pages
def test_set_ids_from_dictionary_pages_with_plain_fallback_and_exact_dead_letters(tmp_path):
    """Set ids are read from the files' dictionary pages: with more ids than a dictionary page
    holds (the writer falls back to plain pages mid row group) both paths still decide every
    set as optimal_topk does set by set, and the dead letters carry the set-id column exactly
    as the file stores it (a string column)."""
    sets = set_stream(200, seed=9)
    frame = pd.concat(sets).reset_index(drop=True)
    frame.loc[[3, 40], "group"] = None  # dead letters inside sets (decide.null_group below)
    frame.loc[77, "probability"] = 1.5
    table = pa.Table.from_pandas(frame, preserve_index=False)
    path = tmp_path / "in" / "part-0.parquet"
    path.parent.mkdir()
    bounds = [0, 1200, len(frame)]  # two row groups, cut at a set boundary
    bounds[1] = int(np.flatnonzero(frame.set_id.ne(frame.set_id.shift()).to_numpy()
                                   & (np.arange(len(frame)) >= 1200))[0])
    with pq.ParquetWriter(path, table.schema, dictionary_pagesize_limit=512) as writer:
        for start, stop in pairwise(bounds):
            writer.write_table(table.slice(start, stop - start), row_group_size=stop - start)
    assert "PLAIN" in pq.ParquetFile(path).metadata.row_group(0).column(
        table.schema.get_field_index("set_id")).encodings
    manifest, got = decide(tmp_path, str(path),
                           make_config(contiguous=True, null_group="dead_letter"), "c")
    shuffle_manifest, want = decide(
        tmp_path, str(path), make_config(contiguous=False, null_group="dead_letter"), "s")
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    counts = manifest["decision_counts"]
    assert counts.pop("topk_sets_checked") == counts["topk_sets"]
    assert counts == shuffle_manifest["decision_counts"]
    dead_rows = {3, 40, 77}
    members = frame.drop(index=list(dead_rows))
    members = members[members.set_id.notna() & members.probability.notna()]
    for _, rows in members.sort_values(["set_id", "item_id"]).groupby("set_id"):
        result = optimal_topk(rows.probability.to_numpy(), "f1")
        decided = got.loc[rows.item_id]
        assert decided.topk_decision.tolist() == result.selected.tolist()
        assert (decided.k == result.k).all()
    assert counts["topk_sets"] == members.set_id.nunique()
    assert counts["topk_rows"] == len(members)
    dead_dir = tmp_path / "c" / "runs" / manifest["run_id"] / "dead_letter"
    dead = pa.concat_tables([pq.read_table(p) for p in sorted(dead_dir.glob("*.parquet"))])
    assert dead.schema.field("set_id").type == pa.string()
    rows = dead.sort_by([("row_group", "ascending"), ("row_in_row_group", "ascending")])
    read = ["group", "item_id", *CLASSIFIERS, "probability", "set_id"]
    assert rows.select(read).equals(table.select(read).take(sorted(dead_rows)))


def test_a_set_id_dictionary_that_repeats_a_value_is_encoded_again():
    """A dictionary naming one id under two codes (another writer's dictionary page) is
    re-encoded from its strings, so a set written in two runs under two codes is still
    refused; a dictionary of distinct ids is taken without a copy."""
    ids = pa.DictionaryArray.from_arrays(pa.array([0, 0, 1, 1, 2, 2, None], pa.int32()),
                                         pa.array(["a", "b", "a"]))
    encoded = set_id_dictionary(ids)
    assert encoded.to_pylist() == ids.to_pylist()
    assert sorted(encoded.dictionary.to_pylist()) == ["a", "b"]
    distinct = pa.DictionaryArray.from_arrays(pa.array([1, 1, 0, None], pa.int32()),
                                              pa.array(["a", "b"]))
    assert set_id_dictionary(distinct) is distinct
    assert set_id_dictionary(pa.array([3, 3, None])).to_pylist() == ["3", "3", None]
    # the decoder on the re-encoded ids: set "a" forms two runs
    rows = decision_rows(3, seed=1, max_size=2)
    table, _ = batch_table(rows.slice(0, 1))
    n = 6
    table = pa.concat_tables([table] * n).combine_chunks()
    table = table.set_column(table.schema.get_field_index("set_id"), "set_id",
                             set_id_dictionary(ids.slice(0, n)))
    with pytest.raises(InputError, match="set 'a' is not contiguous: its rows form 2 separate"):
        decode_contiguous_sets(table, np.full(n, 0.5), np.ones(n, bool), "f1", {},
                               source="f", row_group=0)


def test_batches_decoded_together_equal_each_batch_alone():
    """The sets of several batches in one decoder call (what the decide stage does with a few
    row groups of a file) give every batch the same table, bit for bit, counts and set hashes
    as decoding it alone; rows outside the sets keep null top-k fields."""
    parts = []
    for seed in range(4):
        rows = partly_ordered_rows(seed)
        table, probabilities = batch_table(rows)
        in_set = np.random.default_rng(seed).random(rows.num_rows) >= 0.2 * (seed % 2)
        parts.append(ContiguousBatch(table, probabilities, in_set, f"f{seed}", seed))
    together = decode_contiguous_batches(parts, "f1", {})
    for part, got in zip(parts, together, strict=True):
        alone = decode_contiguous_sets(part.table, part.probabilities, part.in_set, "f1", {},
                                       source=part.source, row_group=part.row_group)
        assert got.table.equals(alone.table)
        assert got.counts == alone.counts
        assert got.hashes.tobytes() == alone.hashes.tobytes()
        assert got.table.column("k").is_null().to_numpy(
            zero_copy_only=False).tolist() == (~part.in_set).tolist()


@pytest.mark.parametrize("decode_rows", [1, 60])
def test_row_groups_decoded_in_groups_equal_the_shuffle_path(tmp_path, monkeypatch,
                                                             decode_rows):
    """Row groups gathered for decoding (``DECODE_ROWS`` set rows: every row group alone, or
    a few together, a group closed mid-file) give the shuffle path's records exactly."""
    import costlib_pipelines.decide.transforms as transforms_module  # DecideFileFn reads it

    monkeypatch.setattr(transforms_module, "DECODE_ROWS", decode_rows)
    sets = set_stream(120, seed=12)
    inputs = write_contiguous(tmp_path / "in", sets, n_files=2, sets_per_group=5)
    manifest, got = decide(tmp_path, inputs, make_config(contiguous=True), "c")
    shuffle_manifest, want = decide(tmp_path, inputs, make_config(contiguous=False), "s")
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    counts = manifest["decision_counts"]
    assert counts.pop("topk_sets_checked") == counts["topk_sets"] > 100
    assert counts == shuffle_manifest["decision_counts"]
