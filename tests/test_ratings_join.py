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
