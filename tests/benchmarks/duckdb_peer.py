"""The DuckDB peer of ``costlib recalibrate`` (issue 23): what a data engineer writes instead.

Runs in the benchmark environment only (``requirements/bench.txt``: duckdb, numpy, pyarrow; not
costlib's runtime pins), as a subprocess of ``bench_duckdb_peer.py``::

    /tmp/benchenv/bin/python tests/benchmarks/duckdb_peer.py SPEC_JSON

``SPEC_JSON`` holds ``files`` (Parquet paths), ``classifiers`` (k score columns), ``edges``
(k lists of candidate thresholds), ``slope`` (r of ``TP - r FP``) and column names. It prints
one JSON line: the hull operating point of every group and of ``__all__`` (thresholds, TP, FP)
and the process's CPU and wall time split into imports and the run.

The script: one DuckDB query histograms the stream per (group, cell, label) with the bin rule
``b(s) = #{edges <= s}`` (null = did not score: bin 0; null label = not rated: the unrated
channel); then numpy inclusive prefix sums give TP, FP and the unrated flagged weight U of every
threshold tuple under rule ``any``; the optimum is the argmax of ``TP - r FP`` over the covered
cells (``U == 0``, coverage on with an allowed unrated share of 0), ties to the fewest FP, then
the fewest TP, then the first cell in row-major order (costlib's documented tie rule).

The query's binning is exact for any edges: an estimate ``c = floor((s - e_0) (B - 1) /
(e_last - e_0)) + 1`` from the uniform spacing is used alone when it is provably exact for these
edges (checked on both sides of every edge, :func:`_estimate_is_exact`), and otherwise corrected
per row by comparing the score with the edges themselves (a list literal, about twice the
query's CPU), so floating rounding cannot move a row to a neighbouring bin. ``"binning":
"estimate"`` in the spec uses the estimate alone, unchecked (the plain script a data engineer
would write; exact on a given data set only if the operating points still agree).
Validation is the minimum the query needs (finite scores, a group, a usable weight);
costlib's side does the full validation, plausibility counts, dead letters and accounting.
"""

from __future__ import annotations

import json
import os
import sys
import time

T0_WALL = time.perf_counter()
T0_CPU = time.process_time()

import duckdb  # noqa: E402
import numpy as np  # noqa: E402


def _padded(edges: list[float]) -> str:
    """The edges as a DuckDB list literal between -inf and +inf (1-based: P[b + 1] = e[b - 1])."""
    inner = ", ".join(repr(float(v)) for v in edges)
    return f"['-inf'::DOUBLE, {inner}, 'inf'::DOUBLE]"


def _estimate_sql(column: str, edges: list[float]) -> str:
    """A bin estimate from the uniform spacing, clamped to 0..B (null for null)."""
    n, low, high = len(edges), float(edges[0]), float(edges[-1])
    scale = (n - 1) / (high - low) if n > 1 else 1.0
    # (DuckDB's least/greatest skip nulls: the null case is explicit)
    return (f"CASE WHEN {column} IS NOT NULL THEN greatest(0, least({n}, "
            f"CAST(floor(({column} - {low!r}) * {scale!r}) AS BIGINT) + 1)) END")


def _bin_sql(column: str, estimate: str, edges: list[float]) -> str:
    """``#{edges <= s}`` (0 for null): the estimate moved by one where the edges say so
    (bin b holds ``edges[b-1] <= s < edges[b]``)."""
    p = _padded(edges)
    return (f"coalesce({estimate} - CAST({column} < {p}[{estimate} + 1] AS BIGINT) "
            f"+ CAST({column} >= {p}[{estimate} + 2] AS BIGINT), 0)")


def _estimate_is_exact(con, column_estimate, edges: list[float]) -> bool:
    """Whether the estimate alone is ``#{edges <= s}`` for every double ``s``.

    Both are non-decreasing step functions of ``s`` (a product with a positive constant rounds
    monotonically, floor is monotone), so they agree everywhere iff they agree on both sides
    of every edge: at ``e_i`` (``i + 1``) and at the double just below it (``i``). DuckDB
    evaluates the estimate on those ``2 B`` values itself (its own arithmetic)."""
    probes = [(float(e), i + 1) for i, e in enumerate(edges)]
    probes += [(float(np.nextafter(e, -np.inf)), i) for i, e in enumerate(edges)]
    values = ", ".join(f"({v!r}::DOUBLE, {want})" for v, want in probes)
    bad = con.execute(f"SELECT count(*) FROM (VALUES {values}) t(s, want) "
                      f"WHERE {column_estimate('s')} <> want").fetchone()[0]
    return bad == 0


def main(spec_path: str) -> None:
    spec = json.loads(open(spec_path).read())
    files, classifiers, edges = spec["files"], spec["classifiers"], spec["edges"]
    group, label, weight = spec["group"], spec["label"], spec["weight"]
    slope = float(spec["slope"])
    shape = [len(e) + 1 for e in edges]
    size = int(np.prod(shape))
    t_import_wall = time.perf_counter() - T0_WALL
    t_import_cpu = time.process_time() - T0_CPU

    start_wall, start_cpu = time.perf_counter(), time.process_time()
    con = duckdb.connect()
    estimates = ", ".join(f"{_estimate_sql(name, e)} AS c{j}"
                          for j, (name, e) in enumerate(zip(classifiers, edges, strict=True)))
    # The estimate alone where it is provably exact for these edges; else corrected per row.
    exact = [_estimate_is_exact(con, lambda s, e=e: _estimate_sql(s, e), e) for e in edges]
    if spec.get("binning") == "estimate":  # the plain script: the estimate alone, unchecked
        exact = [True] * len(edges)
    cell = " + ".join(
        (f"coalesce(c{j}, 0)" if exact[j] else f"({_bin_sql(name, f'c{j}', e)})")
        + f" * {int(np.prod(shape[j + 1:]))}"
        for j, (name, e) in enumerate(zip(classifiers, edges, strict=True)))
    valid = " AND ".join(
        [f"{group} IS NOT NULL"]
        + [f"({c} IS NULL OR isfinite({c}))" for c in classifiers]
        + [f"({weight} IS NOT NULL AND isfinite({weight}) AND {weight} >= 0)"])
    scored = ", ".join(classifiers)
    query = (
        f"SELECT g, {cell} AS cell, ch, sum(w) AS w FROM ("
        f"SELECT {group} AS g, {scored}, {estimates}, "
        f"CASE WHEN {label} IS NULL THEN 2 WHEN {label} THEN 1 ELSE 0 END AS ch, {weight} AS w "
        f"FROM read_parquet({files!r}) WHERE {valid}) GROUP BY ALL"
    )
    hist = con.execute(query).fetchnumpy()
    names = sorted(set(hist["g"].tolist()))
    code = np.searchsorted(np.array(names, dtype=object), hist["g"])
    dense = np.zeros((len(names) + 1, 3, size))
    np.add.at(dense, (code, hist["ch"].astype(np.intp), hist["cell"].astype(np.intp)),
              hist["w"])
    dense[-1] = dense[:-1].sum(axis=0)
    points = {}
    for gi, name in enumerate([*names, "__all__"]):
        lattice = dense[gi].reshape(3, *shape)
        below = lattice
        for axis in range(1, len(shape) + 1):  # inclusive prefix sums: rows left unflagged
            below = np.cumsum(below, axis=axis)
        totals = lattice.reshape(3, -1).sum(axis=1)
        fp = (totals[0] - below[0]).ravel()
        tp = (totals[1] - below[1]).ravel()
        unrated = (totals[2] - below[2]).ravel()
        objective = tp - slope * fp
        objective[unrated > 0] = -np.inf  # not covered
        candidates = np.flatnonzero(objective == objective.max())
        best = int(candidates[np.lexsort((candidates, tp[candidates], fp[candidates]))[0]])
        index = np.unravel_index(best, shape)
        thresholds = [float(edges[j][i]) if i < len(edges[j]) else float("inf")
                      for j, i in enumerate(index)]
        points[name] = {"thresholds": thresholds, "tp": float(tp[best]), "fp": float(fp[best]),
                        "cell": [int(i) for i in index]}
    run_wall, run_cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    print(json.dumps({
        "points": points, "rows_histogrammed": float(dense[-1].sum()),
        "bins_by_estimate_alone": exact,
        "threads": int(con.execute("SELECT current_setting('threads')").fetchone()[0]),
        "duckdb": duckdb.__version__, "pid": os.getpid(),
        "import_wall": t_import_wall, "import_cpu": t_import_cpu,
        "run_wall": run_wall, "run_cpu": run_cpu,
    }))


if __name__ == "__main__":
    main(sys.argv[1])
