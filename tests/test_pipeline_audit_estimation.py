"""Audit samples in ``costlib recalibrate`` (issue 11, estimation): ``columns.audit_probability``.

Truth: direct costlib calls on the same rows (``ThresholdGrid.from_scores(...,
audit_probabilities=...)`` via ``pipeline_data.direct_records``) and counts on the input frame.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline_data import base_config, comparable, direct_records, sample_frame, write_files

from costlib_pipelines.commands.cli import main
from costlib_pipelines.report.page import write_report

AUDIT = {"weight": "weight", "audit_probability": "audit_p"}
LOW_TARGET = {"marginal_precision": 0.05}


def audited_frame(n: int = 30_000, seed: int = 1):
    """A score stream with an audit: flagged rows p = 1 (2% of market_c pending), unflagged rows of
    market_a/market_b audited with p = 0.25 (max score >= 0.3) or 0.05, market_c not audited
    (p null: unrated gaps). Audited rows get a label drawn from the model's probability."""
    frame = sample_frame(n, seed=seed)
    rng = np.random.default_rng(seed + 100)
    flagged = frame["label"].notna().to_numpy()
    top = np.nan_to_num(frame[["text_model", "image_model"]].to_numpy(), nan=0.0).max(axis=1)
    p = np.where(flagged, 1.0, np.where(top >= 0.3, 0.25, 0.05))
    p[(frame["group"] == "market_c").to_numpy() & ~flagged] = np.nan
    scored = frame[["text_model", "image_model"]].notna().any(axis=1).to_numpy()
    audited = ~flagged & scored & (rng.random(n) < np.nan_to_num(p))
    labels = frame["label"].astype(object).to_numpy()
    labels[audited] = rng.random(audited.sum()) < frame["probability"].to_numpy()[audited]
    market_c = (frame["group"] == "market_c").to_numpy()
    labels[market_c & flagged & (rng.random(n) < 0.02)] = None  # ratings still pending
    frame["label"] = labels
    frame["label"] = frame["label"].astype("boolean")
    frame["audit_p"] = p
    return frame


@pytest.fixture(scope="module")
def frame():
    return audited_frame()


@pytest.fixture(scope="module")
def pattern(frame, tmp_path_factory):
    return write_files(frame, tmp_path_factory.mktemp("audit_in"), n_files=3,
                       row_group_size=4000)


def _recalibrate(config, pattern, out, tmp_path, *extra):
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config.raw))  # JSON is YAML
    code = main(["recalibrate", "--config", str(path), "--input", pattern, "--output", str(out),
                 "--run-id", "r1", *extra])
    run_dir = out / "runs" / "r1"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return code, manifest, pq.read_table(run_dir / "operating_points.parquet").to_pylist()


def test_audit_column_points_equal_costlib_directly(frame, pattern, tmp_path):
    config = base_config(columns=AUDIT, target=LOW_TARGET, coverage={"max_unrated_share": 0.0})
    code, manifest, got = _recalibrate(config, pattern, tmp_path / "out", tmp_path)
    assert code in (0, 3)
    want = comparable(direct_records(frame, config))
    for a, b in zip(comparable(got), want, strict=True):
        assert a == b, {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    acc = manifest["row_accounting"]
    p = frame["audit_p"].to_numpy()
    rated = frame["label"].notna().to_numpy()
    assert acc["read"] == len(frame) == acc["used"] + acc["unrated"] + acc["dead_lettered"]
    assert acc["dead_lettered"] == 0
    assert acc["audit.audited"] == int((rated & (p < 1)).sum()) > 0
    assert acc["audit.represented"] == int((~rated & (p > 0) & (p < 1)).sum()) > 0
    by_group = {(r["group"], r["method"]): r for r in got}
    for group in ("market_a", "market_b"):  # audited: P-hat and recall are reported
        record = by_group[(group, "hull")]
        assert record["estimated_total_positives"] > record["tp"] > 0
        assert record["estimated_recall"] == record["tp"] / record["estimated_total_positives"]
        assert record["point_status"] == "ok"
    # market_c has no audit rows (p null off the flagged region): nothing is estimated
    assert by_group[("market_c", "hull")]["estimated_recall"] is None


def test_without_the_audit_column_records_are_as_before(frame, pattern, tmp_path):
    """The same rows without the column: unflagged rows are unrated gaps, nothing estimated."""
    config = base_config(target=LOW_TARGET, coverage={"max_unrated_share": 0.0})
    _, _, got = _recalibrate(config, pattern, tmp_path / "out", tmp_path)
    assert comparable(got) == comparable(direct_records(frame, config))
    assert all(r["estimated_recall"] is None and r["estimated_total_positives"] is None
               and r["estimated_recall_ci_low"] is None for r in got)
    assert {r["point_status"] for r in got if r["group"] == "market_c"} == {"coverage_limited"}


def test_bootstrap_gives_estimated_recall_intervals(frame, pattern, tmp_path):
    config = base_config(columns=AUDIT, target=LOW_TARGET, methods=["graph"],
                         bootstrap={"replicates": 20, "seed": 3})
    _, _, got = _recalibrate(config, pattern, tmp_path / "out", tmp_path)
    for record in got:
        if record["group"] in ("market_a", "market_b"):
            assert (record["estimated_recall_ci_low"] <= record["estimated_recall_ci_high"])
            assert (record["estimated_total_positives_ci_low"]
                    < record["estimated_total_positives_ci_high"])
    # The report shows the estimated recall with its interval next to the points.
    text = Path(write_report(str(tmp_path / "out" / "runs" / "r1"))).read_text()
    assert "est. recall (audit)" in text and "of P̂" in text


def test_audited_rows_no_classifier_scored_count_in_p_hat(frame, tmp_path):
    """decide audits rows that no classifier scored (the farthest stratum); their labels are
    positives or negatives no threshold can flag, so recalibrate uses them (P-hat, recall)
    exactly as costlib does on the rows, instead of dead-lettering them; an unscored rated row
    that is not an audit-sample row (p = 1) is still a label_without_score dead letter."""
    config = base_config(columns=AUDIT, target=LOW_TARGET, methods=["hull"],
                         decision_method="hull")
    extra = frame.copy()
    unscored = (extra[["text_model", "image_model"]].isna().all(axis=1)
                & extra["group"].isin(["market_a", "market_b"])).to_numpy()
    rows = np.flatnonzero(unscored & extra["label"].isna().to_numpy())[:40]
    assert rows.size == 40
    labels = extra["label"].astype(object).to_numpy()
    labels[rows] = np.arange(40) % 4 == 0  # 10 positives among them
    extra["label"] = pd.array(labels, dtype="boolean")
    p = extra["audit_p"].to_numpy().copy()
    p[rows[:-1]] = 0.05
    p[rows[-1]] = 1.0  # rated with certainty yet unscored: not an audit row
    extra["audit_p"] = p
    pattern = write_files(extra, tmp_path / "in", n_files=2, row_group_size=5000)
    _, manifest, got = _recalibrate(config, pattern, tmp_path / "out", tmp_path)
    accounting = manifest["row_accounting"]
    assert accounting["dead_letter_reasons"] == {"label_without_score": 1}
    kept = extra.drop(index=extra.index[rows[-1]])
    assert comparable(got) == comparable(direct_records(kept, config))
    before = {r["group"]: r for r in direct_records(frame, config) if r["method"] == "hull"}
    for r in got:
        if r["group"] in ("market_a", "market_b") and r["method"] == "hull":
            assert r["estimated_total_positives"] > before[r["group"]][
                "estimated_total_positives"]  # the unscored positives, weighted 1 / 0.05


def _bad_rows(frame):
    """Rows with bad audit probabilities, by the reason they must be dead-lettered with."""
    bad = frame.copy()
    rated = np.flatnonzero(bad["label"].notna().to_numpy())
    unrated = np.flatnonzero(bad["label"].isna().to_numpy())
    cases = {
        "missing_audit_probability": [(rated[0], None), (rated[1], None)],
        "invalid_audit_probability": [(rated[2], 0.0), (rated[3], 1.5), (rated[4], np.nan),
                                      (rated[5], -0.2), (unrated[0], -0.1),
                                      (unrated[1], 1.01), (unrated[2], np.nan)],
    }
    values = bad["audit_p"].to_numpy().copy()
    null = np.isnan(values)
    for rows in cases.values():
        for row, value in rows:
            values[row] = np.nan if value is None else value
            null[row] = value is None
    table = pa.Table.from_pandas(bad.drop(columns="audit_p"), preserve_index=False)
    table = table.append_column("audit_p", pa.array(values, mask=null))  # real NaN values
    expected = {reason: {int(bad["item_id"].iloc[row]) for row, _ in rows}
                for reason, rows in cases.items()}
    return table, expected


def test_bad_audit_probabilities_are_dead_lettered_with_reasons(frame, tmp_path):
    small = frame.iloc[:6000].reset_index(drop=True)
    table, expected = _bad_rows(small)
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "part-0.parquet", row_group_size=2000)
    config = base_config(columns=AUDIT)
    _, manifest, _ = _recalibrate(config, str(tmp_path / "in" / "*.parquet"),
                                  tmp_path / "out", tmp_path)
    acc = manifest["row_accounting"]
    assert acc["dead_letter_reasons"] == {k: len(v) for k, v in expected.items()}
    assert acc["read"] == 6000 == acc["used"] + acc["unrated"] + acc["dead_lettered"]
    run_dir = tmp_path / "out" / "runs" / "r1"
    dead = pa.concat_tables(
        [pq.read_table(p) for p in sorted((run_dir / "dead_letter").glob("*.parquet"))])
    got: dict[str, set[int]] = {}
    for item, reason in zip(dead.column("item_id").to_pylist(),
                            dead.column("dead_letter_reason").to_pylist(), strict=True):
        got.setdefault(reason, set()).add(item)
    assert got == expected
    # Unrated rows with p null are fine (gaps), so nothing else was dead-lettered.
    assert small["audit_p"].isna().sum() > 0


def test_probabilities_on_rated_rows_only_are_warned_about(frame, tmp_path, capsys):
    """The rater-facing contract read literally (p returned with each rating, none on unrated
    rows): no unrated row is represented by the audit sample, every one is a coverage gap. The
    run is published (exit 0) but says why in a warning line and in the manifest's notes."""
    literal = frame.copy()
    literal.loc[literal["label"].isna(), "audit_p"] = np.nan
    pattern = write_files(literal, tmp_path / "in", n_files=2, row_group_size=4000)
    config = base_config(columns=AUDIT, target=LOW_TARGET, methods=["graph"])
    code, manifest, _ = _recalibrate(config, pattern, tmp_path / "out", tmp_path)
    printed = capsys.readouterr().out
    assert code == 0
    acc = manifest["row_accounting"]
    assert acc["audit.audited"] > 0 and acc["audit.represented"] == 0
    warning = ("audit_probability is set on rated rows only: unrated rows need it too "
               "(docs/audit.md, 'The rater-facing contract')")
    assert f"warning: {warning}" in printed
    assert printed.count(warning) == 1  # not again among the notes
    assert any(n.startswith(warning) for n in manifest["guard"]["notes"])

    # p on every row (as the contract says now): represented rows, no warning.
    code, manifest, _ = _recalibrate(config, write_files(frame, tmp_path / "all"),
                                     tmp_path / "all_out", tmp_path)
    assert code == 0 and "audit_probability is set" not in capsys.readouterr().out
    assert manifest["row_accounting"]["audit.represented"] > 0
    assert not any("audit_probability" in n for n in manifest["guard"]["notes"])


def test_audit_warning_needs_audited_rows_and_unrated_rows_without_p():
    from costlib_pipelines.io.accounting import audit_warning

    assert audit_warning({"audit.audited": 5, "audit.represented": 0, "unrated": 10})
    assert audit_warning({"audit.audited": 5, "audit.represented": 3, "unrated": 10}) is None
    assert audit_warning({"audit.audited": 0, "audit.represented": 0, "unrated": 10}) is None
    # Only rated rows in the stream: nothing left unrepresented (their weights are unbiased).
    assert audit_warning({"audit.audited": 5, "audit.represented": 0, "unrated": 0}) is None
    assert audit_warning({"used": 5, "unrated": 10}) is None  # no audit column
