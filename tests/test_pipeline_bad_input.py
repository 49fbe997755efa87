"""A corpus of bad inputs: every row accounted for, every file problem named."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline_data import base_config, sample_frame, write_files

from costlib_pipelines.commands.cli import main
from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.schema import SchemaError
from costlib_pipelines.recalibrate.pipeline import run_recalibrate


def _bad_rows_frame():
    frame = sample_frame(4000, seed=5)
    rated = frame.index[frame["label"].notna()]
    bad = {
        "invalid_score": [rated[0], rated[1]],
        "missing_group": [rated[2]],
        "label_without_score": [rated[3]],
        "invalid_weight": [rated[4], rated[5]],
        "missing_item_id": [rated[6]],
    }
    frame.loc[bad["invalid_score"][0], "text_model"] = np.nan
    frame.loc[bad["invalid_score"][1], "image_model"] = np.inf
    frame.loc[bad["missing_group"], "group"] = None
    frame.loc[bad["label_without_score"], ["text_model", "image_model"]] = np.nan
    frame.loc[bad["invalid_weight"][0], "weight"] = -1.0
    frame.loc[bad["invalid_weight"][1], "weight"] = np.nan
    frame["item_id"] = frame["item_id"].astype("Int64")
    frame.loc[bad["missing_item_id"], "item_id"] = pd.NA
    return frame, bad


def test_every_row_is_accounted_for_and_bad_rows_are_dead_lettered(tmp_path):
    frame, bad = _bad_rows_frame()
    (tmp_path / "in").mkdir()
    # pyarrow.Table.from_pandas turns float NaN into null ("not scored"); write the one
    # NaN score as a real NaN value so that it is invalid input.
    table = pa.Table.from_pandas(frame, preserve_index=False)
    scores = table.column("text_model").to_numpy(zero_copy_only=False).copy()
    null = table.column("text_model").is_null().to_numpy(zero_copy_only=False)
    nan_row = list(frame.index).index(bad["invalid_score"][0])
    mask = null.copy()
    mask[nan_row] = False
    scores[nan_row] = np.nan
    text = pa.array(scores, mask=mask)
    table = table.set_column(table.schema.get_field_index("text_model"), "text_model", text)
    pq.write_table(table, tmp_path / "in" / "bad.parquet", row_group_size=1000)

    config = base_config()
    manifest = run_recalibrate(config, str(tmp_path / "in" / "*.parquet"), str(tmp_path / "out"))
    acc = manifest["row_accounting"]
    assert acc["read"] == len(frame)
    assert acc["dead_letter_reasons"] == {reason: len(rows) for reason, rows in bad.items()}
    n_bad = sum(len(rows) for rows in bad.values())
    assert acc["used"] == int(frame["label"].notna().sum()) - n_bad
    assert acc["unrated"] == int(frame["label"].isna().sum())
    assert acc["read"] == acc["used"] + acc["unrated"] + acc["dead_lettered"]

    run_dir = tmp_path / "out" / "runs" / manifest["run_id"]
    dead = pa.concat_tables(
        [pq.read_table(p) for p in sorted((run_dir / "dead_letter").glob("*.parquet"))]
    )
    assert dead.num_rows == n_bad
    reasons = dict(zip(dead.column("item_id").to_pylist(),
                       dead.column("dead_letter_reason").to_pylist(), strict=True))
    for reason, rows in bad.items():
        for row in rows:
            item = frame.loc[row, "item_id"]
            if reason == "missing_item_id":
                assert None in reasons and reasons[None] == reason
            else:
                assert reasons[int(item)] == reason
    assert set(dead.column("source_file").to_pylist()) == {str(tmp_path / "in" / "bad.parquet")}
    # Row positions point back at the input.
    first = dead.slice(0, 1).to_pylist()[0]
    original = pq.ParquetFile(tmp_path / "in" / "bad.parquet").read_row_group(first["row_group"])
    assert original.slice(first["row_in_row_group"], 1).column("item_id")[0].as_py() == \
        first["item_id"]


def test_group_with_no_rated_positives_falls_back(tmp_path):
    frame = sample_frame(20_000, seed=2)
    frame.loc[(frame["group"] == "market_b") & frame["label"].notna(), "label"] = False
    pattern = write_files(frame, tmp_path / "in", n_files=2)
    manifest = run_recalibrate(base_config(), pattern, str(tmp_path / "out"))
    table = pq.read_table(tmp_path / "out" / "runs" / manifest["run_id"] /
                          "operating_points.parquet").to_pylist()
    b = [r for r in table if r["group"] == "market_b"]
    assert b and all(r["status"] == "fallback" and r["rated_positives"] == 0 for r in b)


def test_empty_file_with_valid_schema_counts_zero_rows(tmp_path):
    frame = sample_frame(3000, seed=3)
    pattern = write_files(frame, tmp_path / "in", n_files=1)
    empty = pa.Table.from_pandas(frame, preserve_index=False).slice(0, 0)  # same schema
    pq.write_table(empty, tmp_path / "in" / "empty.parquet")
    manifest = run_recalibrate(base_config(), pattern, str(tmp_path / "out"))
    assert manifest["row_accounting"]["read"] == 3000
    assert {"path": str(tmp_path / "in" / "empty.parquet"), "rows": 0,
            "row_groups": 1} in manifest["inputs"]  # pyarrow writes one empty row group


@pytest.mark.parametrize(
    ("damage", "error", "message"),
    [
        ("zero_bytes", InputError, "empty.parquet: not a readable Parquet file"),
        ("truncated", InputError, "truncated.parquet: not a readable Parquet file"),
        ("missing_column", SchemaError, "missing column 'image_model'"),
        ("wrong_type", SchemaError, "column 'text_model' .* has type string; expected float"),
        ("label_type", SchemaError,
         r"x.parquet: column 'label' \(label\) holds strings \(string\); set "
         r"columns.label_positive to the value that means positive"),
    ],
)
def test_unusable_files_stop_the_run_naming_file_and_column(tmp_path, damage, error, message):
    frame = sample_frame(2000, seed=4)
    directory = tmp_path / "in"
    write_files(frame, directory, n_files=1)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if damage == "zero_bytes":
        (directory / "empty.parquet").write_bytes(b"")
    elif damage == "truncated":
        good = (directory / "part-0.parquet").read_bytes()
        (directory / "truncated.parquet").write_bytes(good[: len(good) // 2])
    elif damage == "missing_column":
        pq.write_table(table.drop_columns(["image_model"]), directory / "x.parquet")
    elif damage == "wrong_type":
        col = table.column("text_model").cast(pa.string())
        pq.write_table(table.set_column(3, "text_model", col), directory / "x.parquet")
    elif damage == "label_type":
        # strings without columns.label_positive (float 0/1 and 0/1 integers are read)
        col = pa.array(frame["label"].map({True: "fraud", False: "ok"}))
        index = table.schema.get_field_index("label")
        pq.write_table(table.set_column(index, "label", col), directory / "x.parquet")
    with pytest.raises(error, match=message):
        run_recalibrate(base_config(), str(directory / "*.parquet"), str(tmp_path / "out"))
    # Nothing was published.
    assert not (tmp_path / "out" / "LATEST").exists()


def test_no_matching_input_is_an_error(tmp_path):
    with pytest.raises(InputError, match="no input file matches"):
        run_recalibrate(base_config(), str(tmp_path / "nothing*.parquet"), str(tmp_path / "o"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"grid": {"bins": 0}}, r"grid\.bins: 0 is less than the minimum of 1"),
        ({"rule": "xor"}, r"rule: 'xor' is not one of"),
        ({"surprise": 1}, r"Additional properties are not allowed \('surprise'"),
        ({"target": {"marginal_precision": 0.3, "slope": 1}},
         r"target: give exactly one of marginal_precision, slope, fp_per_tp, benefit_matrix"),
        ({"target": {"marginal_precision": 1.5}}, r"target\.marginal_precision: 1\.5"),
        ({"grid": {"edges": "explicit"}}, r"grid\.values: need one edge list per classifier"),
        ({"grid": {"edges": "explicit", "values": [[0.5, 0.1], [0.2]]}},
         r"grid\.values\[0\] must be strictly ascending"),
        ({"windowing": {"size_days": 7, "period_days": 2}}, "multiple of windowing.period_days"),
        ({"columns": {"label": "text_model"}}, "names used twice"),
        ({"grid": {"edges": "uniform", "range": [1.0, 1.0 + 2e-16], "bins": 64}},
         "strictly ascending"),
    ],
)
def test_config_errors_name_the_key(change, message):
    raw = {"classifiers": ["text_model", "image_model"], "target": {"marginal_precision": 0.3}}
    raw.update(change)
    with pytest.raises(ConfigError, match=message):
        RunConfig.from_dict(raw)


def test_cli_reports_bad_input_in_one_line(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("classifiers: [text_model, image_model]\ntarget: {marginal_precision: 0.3}\n")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.parquet").write_bytes(b"not parquet")
    code = main(["recalibrate", "--config", str(config), "--input",
                 str(tmp_path / "in" / "*.parquet"), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "a.parquet: not a readable Parquet file" in err and "Traceback" not in err
    bad_config = tmp_path / "bad.yaml"
    bad_config.write_text("classifiers: []\ntarget: {slope: 1}\n")
    code = main(["recalibrate", "--config", str(bad_config), "--input", "x", "--output", "y"])
    assert code == 2 and "classifiers: [] should be non-empty" in capsys.readouterr().err


def test_multi_line_config_errors_read_well_on_one_line(tmp_path, capsys):
    """Several schema errors and a YAML syntax error: one line naming the file and the reason,
    no ``:;`` and no fragments of PyYAML's source excerpt (``^`` under the column)."""
    several = tmp_path / "several.yaml"
    several.write_text("classifiers: [text_model]\ntarget: {nope: 1}\ngrid: {bins: -3}\n")
    syntax = tmp_path / "syntax.yaml"
    syntax.write_text("columns: [a\n")
    lines = []
    for config in (several, syntax):
        code = main(["recalibrate", "--config", str(config), "--input", "x", "--output", "y"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1
        lines.append(err.strip())
    assert lines[0] == (
        f"costlib recalibrate: error: {several}: invalid run config: grid.bins: -3 is less "
        "than the minimum of 1; target: Additional properties are not allowed ('nope' was "
        "unexpected)")
    assert lines[1] == (
        f"costlib recalibrate: error: {syntax}: not valid YAML: line 2, column 1: expected ',' "
        "or ']', but got '<stream end>' (while parsing a flow sequence that starts at line 1, "
        "column 10)")


def test_one_line_joins_an_introduced_list_with_a_space_and_drops_pointer_lines():
    from costlib_pipelines.commands.exit_codes import one_line

    assert one_line("c.yaml: invalid run config:\n  a: bad\n  b: worse") == (
        "c.yaml: invalid run config: a: bad; b: worse")
    assert one_line("f: cannot parse\n  x = [1\n      ^\nexpected ']'") == (
        "f: cannot parse; x = [1; expected ']'")


#: Config texts after the two required keys, and what the one-line error must say. Each was
#: accepted before, or failed with a traceback (exit 1) inside the pipeline.
HOSTILE_CONFIGS = [
    ("coverage: {max_unrated_share: .nan}", "coverage.max_unrated_share: nan is not a finite"),
    ("capacity: {total: .inf}", "capacity.total: inf is not a finite number"),
    ("min_rated: {positives: .nan}", "min_rated.positives: nan is not a finite number"),
    ("publish: {max_threshold_change: .nan}", "publish.max_threshold_change: nan is not a"),
    ("in_force: {evidence_z: .inf}", "in_force.evidence_z: inf is not a finite number"),
    ("in_force: {census_review: 'yes'}", "in_force.census_review: 'yes' is not of type"),
    ("in_force: {one_row_margin: 1}", "in_force.one_row_margin: 1 is not of type 'boolean'"),
    ("in_force: {switch_on_evidence: 'no'}",
     "in_force.switch_on_evidence: 'no' is not of type 'boolean'"),
    ("grid: {edges: explicit, values: [[0.1, .nan], [0.2]]}", "grid.values.0.1: nan is not"),
    ("bootstrap: {seed: 18446744073709551616}", "bootstrap.seed: 18446744073709551616 is "
                                                "greater than the maximum"),
    ("audit: {enabled: true, strata: {relative_to: point, weights: [0, 0, 0, 0, 0]}}",
     "audit.strata.weights: every weight is 0"),
    ("audit:", "audit: None is not of type 'object'"),
    ("audit: {enabled: true, strata: }", "audit.strata: None is not of type 'object'"),
    ("audit: {groups_without_point: off}", "quote the value, e.g. 'off'"),
    ("windowing: {size_days: 7, period_days: 1.0e-6}", "windowing.period_days: 1e-06 is below"),
    ("windowing: {size_days: 2000, period_days: 1}", "2000 periods per window, more than 1000"),
    ("windowing: {size_days: 7, period_days: 1}\nplausibility: {count_duplicate_item_ids: true}",
     "count_duplicate_item_ids is not supported with windowing"),
    ("plausibility: {score_range: [1, 0]}", "plausibility.score_range: need low < high"),
    ("target: {marginal_precision: 0.4}", "key 'target' is written twice (first on line 2)"),
    ("audit: {enabled: true, budget_shares: 0.01}", "did you mean 'budget_shares' -> "
                                                    "'budget_share'?"),
    ("audit: {enabled: true, strata: {weights: [1, 2, 3]}}",
     "audit.strata.weights: 3 weights but no audit.strata.edges"),
    ("decoding: {loss: nope}", "decoding.loss / decoding.params: loss 'nope' is unknown"),
    ("capacity: {total: 100, expected_rows: {1e5: 1000}}",
     "capacity.expected_rows: key 100000.0 is not a string (YAML read an unquoted float)"),
    ("decoding: {loss: f1, params: {foo: 1}}", "unexpected keyword argument 'foo'"),
]


@pytest.mark.parametrize(("text", "message"), HOSTILE_CONFIGS)
def test_hostile_config_values_exit_2_naming_the_key_before_anything_is_written(
        tmp_path, capsys, text, message):
    config = tmp_path / "c.yaml"
    config.write_text(f"classifiers: [text_model, image_model]\ntarget: {{marginal_precision: "
                      f"0.3}}\n{text}\n")
    out = tmp_path / "out"
    code = main(["recalibrate", "--config", str(config), "--input", "x", "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and str(config) in err, err
    assert message in err, err
    assert not out.exists()


def test_config_files_read_scientific_numbers_and_refuse_bytes_that_are_not_utf8(tmp_path,
                                                                                 capsys):
    from costlib_pipelines.config import load_config

    config = tmp_path / "c.yaml"
    config.write_text("classifiers: [a]\ntarget: {marginal_precision: 3e-1}\n"
                      "audit: {enabled: true, floor: 1e-4, budget_share: 2E-2}\n"
                      "bootstrap: &b {replicates: 4}\nin_force: {<<: *b}\n")
    with pytest.raises(ConfigError, match="in_force: Additional properties are not allowed "
                                          r"\('replicates' was unexpected\)"):
        load_config(config)  # YAML merge keys are merged (and then checked like any key)
    config.write_text("classifiers: [a]\ntarget: {marginal_precision: 3e-1}\n"
                      "audit: {enabled: true, floor: 1e-4, budget_share: 2E-2}\n")
    loaded = load_config(config)
    assert loaded.audit.floor == 1e-4 and loaded.audit.budget_share == 0.02
    assert loaded.target.slope == pytest.approx(0.3 / 0.7)
    config.write_bytes(b"classifiers: [a]\n\xff\xfe\n")
    assert main(["recalibrate", "--config", str(config), "--input", "x", "--output",
                 str(tmp_path / "o")]) == 2
    assert "not UTF-8 text" in capsys.readouterr().err
