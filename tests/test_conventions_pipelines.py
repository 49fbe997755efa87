"""Conventions in the pipelines: equal data in any convention gives the same run, or a refusal
with the fix, never a different number.

Each property writes one small stream (drawn by hypothesis) in several conventions and runs
``recalibrate`` (and ``decide``) on each with the in-process runner. The operating points must be
identical field for field, apart from the run id and the config digest (a config that names
``columns.label_positive`` or a weight column differs by that key). Conventions covered:

- labels as bool with nulls, ``int8`` with nulls, ``int64`` 0/1 with nulls, ``float64`` 0/1 with
  NaN *values* and with nulls, ``float32``, strings with ``columns.label_positive`` (plain and
  dictionary-encoded); refused: strings without ``label_positive``, fractional floats,
  ``label_positive`` on a bool column;
- no weight column vs a weight column of ones (the unit then says ``weighted rows``);
- columns in another order;
- group keys as strings, dictionary-encoded strings and large strings; a null group key is
  dead-lettered (``missing_group``) and the other rows give the points of the stream without it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.pipeline import run_decide
from costlib_pipelines.decide.records import read_decisions
from costlib_pipelines.io.runs import read_records
from costlib_pipelines.io.schema import SchemaError
from costlib_pipelines.recalibrate.pipeline import run_recalibrate
from costlib_pipelines.recalibrate.publish import PublishRefused

CLASSIFIERS = ("text_model", "image_model")
FEW = settings(max_examples=2, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture,
                                      HealthCheck.too_slow])
#: Fields that name the run or its config, not the data.
RUN_FIELDS = ("run_id", "config_digest")


def _config(**columns) -> RunConfig:
    return RunConfig.from_dict({
        "columns": {"weight": None, **columns},
        "classifiers": list(CLASSIFIERS),
        "grid": {"edges": "uniform", "bins": 12, "range": [0.0, 1.0]},
        "target": {"marginal_precision": 0.3},
        "methods": ["graph", "hull"],
        "min_rated": {"positives": 3, "negatives": 3},
        "audit": {"salt": "conventions"},
    })


def _stream(n: int, seed: int) -> dict[str, np.ndarray]:
    """Rows of three groups: two scores, a label (None = not rated) correlated with them."""
    rng = np.random.default_rng(seed)
    scores = rng.random((n, 2))
    scores[rng.random(n) < 0.1, 1] = np.nan  # the image model did not score some rows
    positive = rng.random(n) < 0.15 + 0.6 * np.nanmax(scores, axis=1) ** 2
    rated = rng.random(n) < 0.7
    return {"group": rng.choice(["de", "en", "pt-BR"], size=n), "item_id": np.arange(n),
            "text_model": scores[:, 0], "image_model": scores[:, 1],
            "label": np.where(rated, positive, None)}


def _table(rows: dict[str, np.ndarray], *, label: pa.Array | None = None,
           group: pa.Array | None = None, extra: dict[str, pa.Array] | None = None) -> pa.Table:
    labels = rows["label"]
    columns = {
        "group": group if group is not None else pa.array(rows["group"], pa.string()),
        "item_id": pa.array(rows["item_id"], pa.int64()),
        "text_model": pa.array(rows["text_model"], pa.float64(), from_pandas=True),
        "image_model": pa.array(rows["image_model"], pa.float64(), from_pandas=True),
        "label": label if label is not None else pa.array(list(labels), pa.bool_()),
        **(extra or {}),
    }
    return pa.table(columns)


def _label_conventions(labels: np.ndarray) -> dict[str, tuple[pa.Array, dict]]:
    """The same ratings in every label convention: (array, extra columns settings)."""
    rated = np.array([v is not None for v in labels])
    ones = np.array([bool(v) if v is not None else False for v in labels])
    floats = np.where(rated, ones.astype(float), np.nan)
    words = [("fraud" if v else "ok") if v is not None else None for v in labels]
    return {
        "bool": (pa.array(list(labels), pa.bool_()), {}),
        "int8": (pa.array(ones.astype(np.int8), pa.int8(), mask=~rated), {}),
        "int64": (pa.array(ones.astype(np.int64), pa.int64(), mask=~rated), {}),
        "float64 NaN": (pa.array(floats, pa.float64(), from_pandas=False), {}),
        "float64 null": (pa.array(floats, pa.float64(), from_pandas=True), {}),
        "float32 NaN": (pa.array(floats.astype(np.float32), pa.float32()), {}),
        "string": (pa.array(words, pa.string()), {"label_positive": "fraud"}),
        "dictionary": (pa.array(words, pa.string()).dictionary_encode(),
                       {"label_positive": "fraud"}),
    }


def _recalibrate(tmp_path, name: str, table: pa.Table, config: RunConfig) -> list[dict]:
    directory = tmp_path / name
    directory.mkdir()
    pq.write_table(table, directory / "part.parquet", row_group_size=max(table.num_rows // 3, 1))
    out = tmp_path / f"out-{name}"
    manifest = run_recalibrate(config, str(directory / "*.parquet"), str(out), [])
    records = read_records(str(out / "runs" / manifest["run_id"] / "operating_points.parquet"))
    return sorted(({k: v for k, v in r.items() if k not in RUN_FIELDS} for r in records),
                  key=lambda r: (r["group"], r["method"]))


def _assert_points(records: list[dict]) -> None:
    """The stream is not degenerate: some group has thresholds of its own."""
    assert any(r["status"] == "ok" and r["thresholds"] is not None and r["group"] != "__all__"
               for r in records)


@pytest.mark.usefixtures("single_blas_thread")
@FEW
@given(n=st.integers(300, 600), seed=st.integers(0, 2**16))
def test_every_label_convention_gives_the_same_points(tmp_path_factory, n, seed):
    tmp_path = tmp_path_factory.mktemp("labels")
    rows = _stream(n, seed)
    runs = {}
    for name, (labels, columns) in _label_conventions(rows["label"]).items():
        runs[name] = _recalibrate(tmp_path, name.replace(" ", "-"),
                                  _table(rows, label=labels), _config(**columns))
    _assert_points(runs["bool"])
    for name, records in runs.items():
        assert records == runs["bool"], name


@pytest.mark.usefixtures("single_blas_thread")
@FEW
@given(n=st.integers(300, 600), seed=st.integers(0, 2**16))
def test_weights_of_one_column_order_and_group_types_change_nothing(tmp_path_factory, n, seed):
    tmp_path = tmp_path_factory.mktemp("forms")
    rows = _stream(n, seed)
    plain = _recalibrate(tmp_path, "plain", _table(rows), _config())
    _assert_points(plain)
    assert {r["weight_unit"] for r in plain} == {"rows"}
    ones = _recalibrate(tmp_path, "ones", _table(rows, extra={"w": pa.array(np.ones(n))}),
                        _config(weight="w"))
    assert {r["weight_unit"] for r in ones} == {"weighted rows"}  # the label, not a number
    assert [{**r, "weight_unit": "rows"} for r in ones] == plain
    table = _table(rows)
    shuffled = table.select(list(reversed(table.column_names)))
    assert _recalibrate(tmp_path, "shuffled", shuffled, _config()) == plain
    keys = pa.array(rows["group"], pa.string())
    for name, group in (("dictionary", keys.dictionary_encode()),
                        ("large", keys.cast(pa.large_string()))):
        assert _recalibrate(tmp_path, name, _table(rows, group=group), _config()) == plain, name


@pytest.mark.usefixtures("single_blas_thread")
@FEW
@given(n=st.integers(300, 600), seed=st.integers(0, 2**16))
def test_null_group_keys_are_dead_lettered_not_grouped(tmp_path_factory, n, seed):
    """A null key is no group: its rows are dead letters (missing_group), counted, and the
    other rows give exactly the points of the stream without them."""
    tmp_path = tmp_path_factory.mktemp("keys")
    rows = _stream(n, seed)
    missing = np.random.default_rng(seed).random(n) < 0.05
    missing[0] = True
    keys = pa.array(rows["group"], pa.string(), mask=missing)
    directory = tmp_path / "nulls"
    directory.mkdir()
    pq.write_table(_table(rows, group=keys), directory / "part.parquet")
    out = tmp_path / "out-nulls"
    manifest = run_recalibrate(_config(), str(directory / "*.parquet"), str(out), [])
    assert manifest["row_accounting"]["dead_letter_reasons"] == {
        "missing_group": int(missing.sum())}
    got = read_records(str(out / "runs" / manifest["run_id"] / "operating_points.parquet"))
    kept = {k: v[~missing] for k, v in rows.items()}
    want = _recalibrate(tmp_path, "without", _table(kept), _config())
    assert sorted(({k: v for k, v in r.items() if k not in RUN_FIELDS} for r in got),
                  key=lambda r: (r["group"], r["method"])) == want


@pytest.mark.usefixtures("single_blas_thread")
@settings(max_examples=1, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16))
def test_decide_gives_the_same_decisions_for_every_group_key_type(tmp_path_factory, seed):
    tmp_path = tmp_path_factory.mktemp("decide")
    rows = _stream(400, seed)
    directory = tmp_path / "in"
    directory.mkdir()
    pq.write_table(_table(rows), directory / "part.parquet")
    out = tmp_path / "points"
    config = _config()
    manifest = run_recalibrate(config, str(directory / "*.parquet"), str(out), [])
    points = str(out / "runs" / manifest["run_id"] / "operating_points.parquet")
    keys = pa.array(rows["group"], pa.string())
    decided = {}
    for name, group in (("string", keys), ("dictionary", keys.dictionary_encode()),
                        ("large", keys.cast(pa.large_string()))):
        table = _table(rows, group=group)
        if name == "large":  # and another column order
            table = table.select(list(reversed(table.column_names)))
        source = tmp_path / f"in-{name}"
        source.mkdir()
        pq.write_table(table, source / "part.parquet")
        run_decide(config, str(source / "*.parquet"), points, str(tmp_path / f"d-{name}"),
                   beam_args=[])
        frame = read_decisions(str(tmp_path / f"d-{name}")).to_pandas()
        frame["group"] = frame["group"].astype(str)
        decided[name] = frame.sort_values("item_id").reset_index(drop=True)
    assert decided["string"]["threshold_decision"].notna().any()
    for name, frame in decided.items():
        assert frame.equals(decided["string"]), name


@pytest.mark.parametrize(("labels", "columns", "message"), [
    (pa.array(["fraud", "ok", None] * 20), {},
     r"column 'label' \(label\) holds strings \(string\); set columns.label_positive"),
    (pa.array(["fraud", "ok", None] * 20).dictionary_encode(), {},
     r"holds strings \(dictionary<values=string.*set columns.label_positive"),
    (pa.array([0.0, 1.0, 0.5] * 20), {},
     r"column 'label' \(label\) holds 20 fractional value\(s\), first 0.5 at row 2; labels "
     r"are ratings"),
    (pa.array([True, False, None] * 20), {"label_positive": "fraud"},
     r"has type bool, but columns.label_positive \('fraud'\) applies to string labels only; "
     r"remove it"),
])
def test_labels_that_need_a_guess_are_refused_with_the_fix(tmp_path, labels, columns, message):
    rows = _stream(60, 1)
    directory = tmp_path / "in"
    directory.mkdir()
    pq.write_table(_table(rows, label=labels), directory / "part.parquet")
    with pytest.raises(SchemaError, match=message) as refused:
        run_recalibrate(_config(**columns), str(directory / "*.parquet"), str(tmp_path / "o"),
                        [])
    assert "part.parquet" in str(refused.value)


def test_whole_numbers_other_than_0_and_1_are_dead_letters_in_every_type(tmp_path):
    """2 and 2.0 are one value: both are dead-lettered as invalid_label, counted alike."""
    rows = _stream(300, 2)
    bad = np.zeros(300, dtype=bool)
    bad[::50] = True
    rated = np.array([v is not None for v in rows["label"]]) | bad
    ones = np.where(bad, 2, np.array([bool(v) for v in rows["label"]], dtype=np.int64))
    runs = {}
    for name, labels in (("int", pa.array(ones, pa.int64(), mask=~rated)),
                         ("float", pa.array(np.where(rated, ones.astype(float), np.nan)))):
        directory = tmp_path / name
        directory.mkdir()
        pq.write_table(_table(rows, label=labels), directory / "part.parquet")
        manifest = run_recalibrate(_config(), str(directory / "*.parquet"),
                                   str(tmp_path / f"o-{name}"), [])
        runs[name] = manifest["row_accounting"]
    assert runs["int"]["dead_letter_reasons"] == {"invalid_label": int(bad.sum())}
    assert runs["float"] == runs["int"]


def test_a_file_without_any_label_is_read_with_label_positive_too():
    """A file of unrated rows (pandas writes an all-None column as type null) has nothing to
    convert: it is read as unrated whatever label_positive says."""
    from costlib_pipelines.io.labels import read_labels

    rated, labels, invalid = read_labels(pa.nulls(4), column="label", where="f: row group 0",
                                         positive="fraud")
    assert not rated.any() and not labels.any() and invalid is None


@pytest.mark.usefixtures("single_blas_thread")
def test_a_positive_label_no_rating_carries_holds_the_run(tmp_path):
    """``label_positive: fraud`` on a stream that writes ``Fraud``: every rating would be read
    as a negative (a different number, silently); the run is held with the fix instead."""
    rows = _stream(400, 3)
    words = [("Fraud" if v else "ok") if v is not None else None for v in rows["label"]]
    rated = sum(w is not None for w in words)
    directory = tmp_path / "typo"
    directory.mkdir()
    pq.write_table(_table(rows, label=pa.array(words, pa.string())), directory / "p.parquet")
    with pytest.raises(PublishRefused) as held:
        run_recalibrate(_config(label_positive="fraud"), str(directory / "*.parquet"),
                        str(tmp_path / "out"), [])
    message = str(held.value)
    assert ("no rated row's label equals columns.label_positive 'fraud', so all "
            f"{rated:,} rated rows were read as negatives") in message
    assert "case and spaces included" in message
    # the same stream with the value it writes publishes
    manifest = run_recalibrate(_config(label_positive="Fraud"), str(directory / "*.parquet"),
                               str(tmp_path / "out2"), [])
    assert manifest["published"]
