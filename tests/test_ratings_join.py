"""costlib_pipelines.io.ratings.attach_decisions: the join of decide's records onto the score
stream that the rater-facing contract asks for, checked against a dictionary lookup."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from costlib_pipelines.io.ratings import TO_RATE, attach_decisions


def _tables(n=500, seed=0):
    rng = np.random.default_rng(seed)
    groups = rng.choice(["a", "b", "c"], n)
    ids = rng.permutation(n * 3)[:n]  # ints in the stream; the same id may sit in two groups
    ids[: n // 10] = ids[n // 10: 2 * (n // 10)]
    groups[: n // 10] = np.where(groups[n // 10: 2 * (n // 10)] == "a", "b", "a")
    stream = pa.table({"group": groups, "item_id": ids, "s": rng.random(n)})
    flagged = pa.array(rng.random(n) < 0.1, mask=rng.random(n) < 0.05)  # null: no point
    audit = rng.random(n) < 0.05
    p = np.where(flagged.fill_null(False).to_numpy(zero_copy_only=False), 1.0,
                 rng.choice([0.01, 0.2], n))
    decisions = pa.table({"group": groups, "item_id": [str(i) for i in ids],
                          "threshold_decision": flagged, "audit": audit,
                          "audit_probability": p})
    order = rng.permutation(n)  # decide writes its records in any order
    return stream, decisions.take(order)


def test_each_row_gets_its_own_record():
    stream, decisions = _tables()
    got = attach_decisions(stream, decisions)
    assert got.column_names == ["group", "item_id", "s", TO_RATE, "audit_probability"]
    by_key = {(r["group"], r["item_id"]): r for r in decisions.to_pylist()}
    for row in got.to_pylist():
        record = by_key[(row["group"], str(row["item_id"]))]
        assert row[TO_RATE] == bool(record["threshold_decision"] or record["audit"])
        assert row["audit_probability"] == record["audit_probability"]
    assert got.slice(0, 3).column("s").equals(stream.slice(0, 3).column("s"))  # row order kept


def test_rows_without_exactly_one_record_are_errors():
    stream, decisions = _tables()
    with pytest.raises(ValueError, match=r"stream: 1 of 500 rows have no decision record"):
        attach_decisions(stream, decisions.slice(1))
    # rows decide dead-lettered (as many as its accounting says) are kept, not to rate
    partial = attach_decisions(stream, decisions.slice(2), undecided=2)
    gone = {(r["group"], r["item_id"]) for r in decisions.slice(0, 2).to_pylist()}
    rows = partial.to_pylist()
    marked = [r for r in rows if (r["group"], str(r["item_id"])) in gone]
    assert len(rows) == 500 and len(marked) == 2
    assert all(r[TO_RATE] is False and r["audit_probability"] is None for r in marked)
    with pytest.raises(ValueError, match="more than the 1 the decide run dead-lettered"):
        attach_decisions(stream, decisions.slice(2), undecided=1)
    twice = pa.concat_tables([decisions, decisions.slice(0, 2)])
    with pytest.raises(ValueError, match=r"decisions: 2 \(group, item_id\) pairs have more"):
        attach_decisions(stream, twice)
    with pytest.raises(ValueError, match="decisions: no column 'audit'"):
        attach_decisions(stream, decisions.drop_columns(["audit"]))
    with pytest.raises(ValueError, match="stream: no column 'group'"):
        attach_decisions(stream.rename_columns(["g", "item_id", "s"]), decisions)
    with pytest.raises(ValueError, match="already has a column 'audit_probability'"):
        attach_decisions(stream.append_column("audit_probability", stream.column("s")),
                         decisions)


def test_the_docs_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """docs/audit.md's pandas example, verbatim, on a real decide run: ``decisions_frame``'s
    DataFrame goes straight into ``attach_decisions``; the rows to rate are those a dictionary
    lookup of the records says are flagged or audited."""
    import re
    from pathlib import Path

    import pandas as pd
    import pyarrow.parquet as pq
    import yaml
    from pipeline_data import SMALL_CONFIG, sample_frame

    from costlib_pipelines.commands.cli import main
    from costlib_pipelines.io.frames import decisions_frame

    doc = (Path(__file__).resolve().parent.parent / "docs" / "audit.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S)
                 if "attach_decisions" in b)
    monkeypatch.chdir(tmp_path)
    frame = sample_frame(3_000, seed=5)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), "day.parquet")
    Path("recal.yaml").write_text(yaml.safe_dump(SMALL_CONFIG))
    Path("run.yaml").write_text(yaml.safe_dump({**SMALL_CONFIG, "audit": {"enabled": True}}))
    assert main(["recalibrate", "--config", "recal.yaml", "--input", "day.parquet", "--output",
                 "recal/"]) == 0
    assert main(["decide", "--config", "run.yaml", "--input", "day.parquet",
                 "--operating-points", "recal/", "--output", "decide/"]) == 0
    capsys.readouterr()
    namespace: dict = {}
    exec(compile(block, "docs/audit.md", "exec"), namespace)
    rows, to_rate = namespace["rows"], namespace["to_rate"]
    records = decisions_frame("decide/")
    want = {(g, i) for g, i, t, a in zip(records["group"], records["item_id"],
                                        records["threshold_decision"], records["audit"],
                                        strict=True)
            if (t is not pd.NA and bool(t)) or (a is not pd.NA and bool(a))}
    assert 0 < len(to_rate) < len(rows) == len(frame)
    assert set(zip(to_rate["group"], to_rate["item_id"], strict=True)) == want
    assert rows["audit_probability"].notna().all()  # the audit was on: every row has π
    assert list(rows.columns[:len(frame.columns)]) == list(frame.columns)
    assert f"{len(to_rate):,} of {len(rows):,} rows to rate" in capsys.readouterr().out


def test_pandas_and_arrow_give_the_same_join():
    stream, decisions = _tables(seed=3)
    arrow = attach_decisions(stream, decisions)
    frame = attach_decisions(stream.to_pandas(), decisions.to_pandas())
    assert frame[TO_RATE].tolist() == arrow.column(TO_RATE).to_pylist()
    assert frame["audit_probability"].tolist() == arrow.column("audit_probability").to_pylist()
    mixed = attach_decisions(stream, decisions.to_pandas())
    assert mixed.equals(arrow)


def test_a_stream_without_the_default_columns_names_the_argument():
    stream, decisions = _tables()
    renamed = stream.to_pandas().rename(columns={"group": "language", "item_id": "post_id"})
    with pytest.raises(ValueError, match=r"stream: no column 'group' \(pass group= with the "
                                         r"name of the stream's group column"):
        attach_decisions(renamed, decisions)
    got = attach_decisions(renamed, decisions, group="language", item_id="post_id")
    assert got[TO_RATE].sum() == attach_decisions(stream, decisions).column(TO_RATE).to_numpy(
        ).sum()
    with pytest.raises(ValueError, match="a pyarrow Table or a pandas DataFrame is expected, "
                                         "not list"):
        attach_decisions(stream, decisions.to_pylist())
