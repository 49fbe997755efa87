"""The DuckDB peer of ``costlib decide`` (threshold decisions, issue 23): what a data engineer
writes instead.

Runs in the benchmark environment only (``requirements/bench.txt``), as a subprocess of
``bench_decide_peer.py``::

    /tmp/benchenv/bin/python tests/benchmarks/duckdb_decide_peer.py decide SPEC_JSON
    /tmp/benchenv/bin/python tests/benchmarks/duckdb_decide_peer.py compare OURS_DIR PEER_FILE

``decide``: ``SPEC_JSON`` holds ``files`` (Parquet score files), ``operating_points`` (the
``operating_points.parquet`` a recalibrate run wrote), ``method`` (the config's
``decision_method``), ``rule`` (``any`` / ``all``), ``classifiers`` (in the config's order),
``group`` / ``item_id`` (column names) and ``output`` (the Parquet file to write). One query
reads the operating points, resolves each group's thresholds as ``costlib decide`` does, joins
them to every score row by group, decides and writes ``group, item_id, threshold_decision,
operating_point_group, operating_point_method`` (zstd Parquet; ``"output_columns": "lean"``:
``item_id, threshold_decision`` only, the least a consumer joins back). It prints one JSON
line: rows written and the process's CPU and wall time split into imports and the run.

The rules (``pipelines/decide/pipeline.py``): records of ``method`` only; a record with status
``ok``, ``fallback`` or ``kept``, thresholds present and ``point_status`` not ``infeasible`` is
usable, its thresholds taken by classifier name (the record's order may differ from the config's);
``operating_point_group`` is the group, or for ``fallback`` the record's ``fallback_group``
(``__all__`` when null). A group with an unusable record gets a null decision; a group without
a record takes the ``__all__`` record's thresholds if usable (``operating_point_group``
``__all__``), else null. Classifier ``j`` fires iff ``score_j >= threshold_j`` (a null score
never fires), combined by ``rule``. Validation is the minimum the query needs (a group other
than ``__all__``, an item id, finite-or-null scores): rows failing it are left out, not
dead-lettered; costlib's side does the full validation, plausibility counts, dead letters and
row accounting.

``compare``: every decision of a costlib decide run directory (``OURS_DIR/decisions/*.parquet``)
against the peer's file, joined on ``item_id``; prints one JSON line with the rows of each, the
rows present on one side only and the rows whose ``threshold_decision`` or
``operating_point_group`` (not in a lean file) differ (``IS DISTINCT FROM``: null equals null
only).
"""

from __future__ import annotations

import json
import os
import sys
import time

T0_WALL = time.perf_counter()
T0_CPU = time.process_time()

import duckdb  # noqa: E402


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def decide_sql(spec: dict) -> str:
    """The query: operating points resolved per group, joined to the scores, decided."""
    classifiers = spec["classifiers"]
    group, item = _quoted(spec["group"]), _quoted(spec["item_id"])
    usable = ("status IN ('ok', 'fallback', 'kept') AND thresholds IS NOT NULL "
              "AND coalesce(point_status, 'ok') <> 'infeasible'")
    picks = ", ".join(
        f"CASE WHEN {usable} THEN thresholds[list_position(classifiers, {_literal(c)})] END "
        f"AS t{j}" for j, c in enumerate(classifiers))
    points = (
        f"SELECT \"group\" AS g, {picks}, ({usable}) AS usable, "
        f"CASE WHEN status = 'fallback' THEN coalesce(fallback_group, '__all__') "
        f"ELSE \"group\" END AS op_group, method "
        f"FROM read_parquet({_literal(spec['operating_points'])}) "
        f"WHERE method = {_literal(spec['method'])}")
    # p: the group's own record (if any); a: the __all__ record, for groups without one
    chosen = {name: f"CASE WHEN p.g IS NULL THEN a.{name} ELSE p.{name} END"
              for name in ("usable", "op_group", "method",
                           *(f"t{j}" for j in range(len(classifiers))))}
    combine = " OR " if spec["rule"] == "any" else " AND "
    fires = combine.join(f"coalesce(s.{_quoted(c)} >= {chosen[f't{j}']}, false)"
                         for j, c in enumerate(classifiers))
    valid = " AND ".join(
        [f"s.{group} IS NOT NULL", f"s.{group} <> '__all__'", f"s.{item} IS NOT NULL"]
        + [f"(s.{_quoted(c)} IS NULL OR isfinite(s.{_quoted(c)}))" for c in classifiers])
    usable_row = f"coalesce({chosen['usable']}, false)"
    files = ", ".join(_literal(f) for f in spec["files"])
    outputs = [f"s.{item} AS item_id",
               f"CASE WHEN {usable_row} THEN ({fires}) END AS threshold_decision"]
    if spec.get("output_columns", "decision") == "decision":
        outputs = [f"s.{group} AS \"group\"", *outputs,
                   f"CASE WHEN {usable_row} THEN {chosen['op_group']} END "
                   f"AS operating_point_group",
                   f"CASE WHEN {usable_row} THEN {chosen['method']} END "
                   f"AS operating_point_method"]
    return (
        f"WITH points AS ({points}), "
        f"fallback AS (SELECT * FROM points WHERE g = '__all__' AND usable) "
        f"SELECT {', '.join(outputs)} "
        f"FROM read_parquet([{files}]) s "
        f"LEFT JOIN points p ON s.{group} = p.g "
        f"LEFT JOIN fallback a ON true "
        f"WHERE {valid}"
    )


def decide(spec_path: str) -> None:
    spec = json.loads(open(spec_path).read())
    t_import_wall = time.perf_counter() - T0_WALL
    t_import_cpu = time.process_time() - T0_CPU
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    con = duckdb.connect()
    output = spec["output"]
    rows = con.execute(f"COPY ({decide_sql(spec)}) TO {_literal(output)} "
                       f"(FORMAT parquet, COMPRESSION zstd)").fetchone()[0]
    run_wall, run_cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    print(json.dumps({
        "rows": rows,
        "threads": int(con.execute("SELECT current_setting('threads')").fetchone()[0]),
        "duckdb": duckdb.__version__, "pid": os.getpid(),
        "import_wall": t_import_wall, "import_cpu": t_import_cpu,
        "run_wall": run_wall, "run_cpu": run_cpu,
    }))


def compare(ours_dir: str, peer_file: str) -> None:
    con = duckdb.connect()
    ours = _literal(os.path.join(ours_dir, "decisions", "*.parquet"))
    peer = _literal(peer_file)
    fields = [r[0] for r in
              con.execute(f"DESCRIBE SELECT * FROM read_parquet({peer})").fetchall()]
    lean = "operating_point_group" not in fields  # the lean peer: decisions only
    op = "NULL" if lean else "operating_point_group"
    # costlib's item ids are strings (schemas/decision.json); the peer keeps the input's type
    row = con.execute(
        f"WITH o AS (SELECT item_id, threshold_decision AS d, {op} AS op "
        f"FROM read_parquet({ours})), "
        f"p AS (SELECT CAST(item_id AS VARCHAR) AS item_id, threshold_decision AS d, {op} AS op "
        f"FROM read_parquet({peer})) "
        "SELECT (SELECT count(*) FROM o), (SELECT count(*) FROM p), "
        "(SELECT count(*) - count(DISTINCT item_id) FROM o), "
        "(SELECT count(*) - count(DISTINCT item_id) FROM p), "
        "count(*) FILTER (o.item_id IS NULL OR p.item_id IS NULL), "
        "count(*) FILTER (o.d IS DISTINCT FROM p.d OR o.op IS DISTINCT FROM p.op), "
        "count(*) FILTER (o.d AND p.d) "
        "FROM o FULL OUTER JOIN p ON o.item_id = p.item_id"
    ).fetchone()
    names = ("rows_ours", "rows_peer", "duplicate_ids_ours", "duplicate_ids_peer",
             "one_side_only", "different", "flagged_both")
    print(json.dumps({**dict(zip(names, row, strict=True)), "compared": (
        ["threshold_decision"] if lean else ["threshold_decision", "operating_point_group"])}))


if __name__ == "__main__":
    if sys.argv[1] == "decide":
        decide(sys.argv[2])
    else:
        compare(sys.argv[2], sys.argv[3])
