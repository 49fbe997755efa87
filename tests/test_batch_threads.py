"""Batches on several threads give what one thread gives: the helper's order, and whole runs.

Truth: a plain loop over the same items (for :func:`in_order`), and the same recalibration run
on one thread (operating points, accounting and dead letters compared in full).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import costlib_pipelines.recalibrate.aggregating as aggregating
from costlib_pipelines.io.batch_threads import in_order
from costlib_pipelines.recalibrate.pipeline import run_recalibrate
from tests.pipeline_data import base_config, comparable, sample_frame, write_files


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.integers(-50, 50), max_size=40), threads=st.integers(1, 5),
       fail_at=st.none() | st.integers(0, 39))
def test_results_come_in_item_order_and_errors_after_the_results_before_them(items, threads,
                                                                             fail_at):
    def work(i_value):
        i, value = i_value
        if i == fail_at:
            raise ValueError(f"item {i}")
        return value * value - i

    expected, error = [], None
    for i_value in enumerate(items):
        try:
            expected.append(work(i_value))
        except ValueError as exc:
            error = str(exc)
            break
    seen = []
    if error is None:
        seen = list(in_order(work, enumerate(items), threads))
    else:
        with pytest.raises(ValueError, match=error):
            for result in in_order(work, enumerate(items), threads):
                seen.append(result)
    assert seen == expected


def _run(tmp_path, threads, monkeypatch, name, pattern, config):
    monkeypatch.setattr(aggregating, "batch_threads", lambda: threads)
    out = tmp_path / name
    manifest = run_recalibrate(config, pattern, str(out))
    run_dir = out / "runs" / manifest["run_id"]
    records = pq.read_table(run_dir / "operating_points.parquet").to_pylist()
    accounting = json.loads((run_dir / "accounting.json").read_text())
    dead = {p.name: pq.read_table(p).to_pylist() for p in (run_dir / "dead_letter").iterdir()}
    curves = pq.read_table(run_dir / "pn_curves.parquet").to_pylist()
    return comparable(records), accounting, dead, manifest["row_accounting"], curves


def test_a_run_on_several_threads_equals_the_run_on_one(tmp_path, monkeypatch):
    frame = sample_frame(24_000, seed=5)
    frame.loc[frame.index[::997], "weight"] = -1.0  # dead letters in several batches
    frame.loc[frame.index[5::1009], "label"] = None  # unrated rows
    pattern = write_files(frame, tmp_path / "in", n_files=2, row_group_size=1500)
    config = base_config(coverage={"max_unrated_share": 0.2})
    one = _run(tmp_path, 1, monkeypatch, "one", pattern, config)
    three = _run(tmp_path, 3, monkeypatch, "three", pattern, config)
    assert one[3]["read"] == 24_000 and one[3]["dead_lettered"] > 0
    assert one == three


@pytest.mark.parametrize("topk", [False, True])
def test_decisions_on_several_threads_equal_the_decisions_on_one(tmp_path, monkeypatch, topk):
    from test_pipeline_decide import decide, make_config, make_stream

    import costlib_pipelines.decide.transforms as transforms

    frame = make_stream(4000, seed=3)
    frame.loc[frame.index[::331], "text_model"] = np.inf  # dead letters in several row groups
    config = make_config(topk=topk)
    runs = []
    for threads in (1, 3):
        monkeypatch.setattr(transforms, "batch_threads", lambda t=threads: t)
        manifest, decisions = decide(tmp_path, frame, config, name=f"t{threads}")
        runs.append((manifest["row_accounting"], decisions.drop(columns=["run_id"],
                                                                  errors="ignore")))
    assert runs[0][0] == runs[1][0] and runs[0][0]["dead_lettered"] > 0
    assert runs[0][1].equals(runs[1][1])


def test_a_forked_child_makes_its_own_pool():
    """The parent's pool threads do not exist in a forked child: work there must still run."""
    import multiprocessing

    assert list(in_order(abs, [-1, -2, -3], 2)) == [1, 2, 3]  # the parent's pool exists
    with multiprocessing.get_context("fork").Pool(1) as pool:
        result = pool.apply_async(_square_in_threads, ([1, 2, 3, 4],))
        assert result.get(timeout=30) == [1, 4, 9, 16]


def _square_in_threads(items):
    return list(in_order(lambda x: x * x, items, 2))
