"""The report says what its numbers count: rated rows as integers, estimates marked and named,
money named; every term it uses is explained on the page; figures at 100 dpi whose legends fit.
"""

from __future__ import annotations

import base64
import html
import io
import re

import numpy as np
import pytest
from pipeline_data import base_config, sample_frame, write_files
from test_pipeline_audit_estimation import AUDIT, audited_frame

from costlib_pipelines.io.runs import read_records
from costlib_pipelines.recalibrate.pipeline import run_recalibrate
from costlib_pipelines.report.figures import DPI, PATH_SIZE, PN_SIZE, GroupFigures
from costlib_pipelines.report.page import build_report
from costlib_pipelines.report.runs_data import load_run


def _run(tmp_path, frame, config):
    pattern = write_files(frame, tmp_path / "in", n_files=2, row_group_size=2000)
    manifest = run_recalibrate(config, pattern, str(tmp_path / "out"), [])
    run_dir = tmp_path / "out" / "runs" / manifest["run_id"]
    records = read_records(str(run_dir / "operating_points.parquet"))
    return build_report(load_run(str(run_dir)), None), records


def _text(page: str) -> str:
    page = re.sub(r'src="data:image/png;base64,[^"]*"', "", page)
    page = re.sub(r"<(style|script)>.*?</\1>", "", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def _overview_rows(page: str) -> dict[str, list[str]]:
    """The overview's cells per group (the rows of table.overview)."""
    table = page[page.index('class="overview"'):]
    table = table[:table.index("</table>")]
    rows = {}
    for group, body in re.findall(r'<tr data-group="([^"]*)">(.*?)</tr>', table, re.S):
        rows[html.unescape(group)] = [_text(c).strip()
                                      for c in re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)]
    return rows


@pytest.fixture(scope="module")
def money(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("money")
    frame = sample_frame(8000, seed=2)
    frame["amount"] = np.random.default_rng(1).lognormal(3.0, 1.0, size=len(frame))
    config = base_config(min_risk={"fn": {"column": "amount"}, "fp": 4.0, "tp": 1.0,
                                   "weight_rated_rows": True}, target={"slope": 1.0})
    return _run(tmp, frame, config)


def test_rated_rows_are_integers_and_money_is_named(money):
    page, records = money
    graph = {r["group"]: r for r in records if r["method"] == "graph"}
    rows = _overview_rows(page)
    assert set(rows) == set(graph)
    for group, cells in rows.items():
        record = graph[group]
        assert record["rated_positives"] != record["rated_positive_rows"]  # money, not rows
        assert cells[2:4] == [f"{record['rated_positive_rows']:,d}",
                              f"{record['rated_negative_rows']:,d}"], group
    text = _text(page)
    assert "rated + (rows)" in text and "rated − (rows)" in text
    assert "TP (money)" in text and "FP (money)" in text
    assert "volume is in money" in text
    # a group's own rows, and what they weigh, in words
    first = graph["market_a"]
    assert (f"{first['rated_positive_rows']:,d} rated positive rows and "
            f"{first['rated_negative_rows']:,d} rated negative rows of its own; weighted: "
            f"{first['rated_positives']:,.2f} and {first['rated_negatives']:,.2f} money") in text


def test_every_term_of_the_page_is_explained(money):
    page, records = money
    text = _text(page)
    terms = text[text.index("Terms used on this page"):]
    for term in ("rated + / rated − (rows)", "units of TP, FP and volume", "status",
                 "point (point status)", "volume, coverage", "marginal precision in / out",
                 "finer lattice ≤ B (here V)", "off, Δ", "P̂, est. recall (audit)",
                 "TP / P on the PN curves", "coverage limited", "resolution limited",
                 "insufficient data", "wide interval", "audit for the target width"):
        assert term in terms, term
    bounded = [r for r in records if r["finer_bound"] is not None
               and r["finer_bound"] > r["objective_value"]]
    assert bounded  # the note the terms explain is on the page, with the value it bounds
    r = bounded[0]
    assert f"finer lattice ≤ {r['finer_bound']:.4g} (here {r['objective_value']:.4g})" in text


def test_audit_estimates_are_marked_and_the_axis_says_estimated_recall(tmp_path):
    config = base_config(columns=AUDIT, target={"marginal_precision": 0.05})
    page, records = _run(tmp_path, audited_frame(12_000, seed=1), config)
    text = _text(page)
    assert "TP (estimated rows)" in text and "~" in text
    assert "TP / P̂ is the estimated recall" in text
    rows = _overview_rows(page)
    for record in records:
        if record["method"] == "graph":
            assert rows[record["group"]][2] == f"{record['rated_positive_rows']:,d}"


@pytest.mark.parametrize("estimated", [False, True])
def test_figures_at_100_dpi_with_legends_inside_and_an_honest_y_axis(estimated):

    assert DPI >= 100
    figures = GroupFigures(["graph", "hull", "bucket", "analytic"],
                           {"graph": "path", "analytic": "path", "hull": "frontier",
                            "bucket": "frontier"}, ["text_model", "image_model"],
                           [np.linspace(0.05, 0.95, 12)] * 2, decision="graph",
                           estimated=estimated)
    label = figures.pn_axes[0].get_ylabel()
    assert ("estimated recall" in label) == estimated
    assert estimated or "not recall" in label
    assert figures.paths is not None
    for figure, size in ((figures.pn, PN_SIZE), (figures.paths, PATH_SIZE)):
        canvas = figure.canvas
        canvas.draw()
        renderer = canvas.get_renderer()
        width, height = canvas.get_width_height()
        assert (width, height) == (round(size[0] * DPI), round(size[1] * DPI))
        legends = figure.legends + [ax.get_legend() for ax in figure.axes if ax.get_legend()]
        assert legends
        for legend in legends:
            box = legend.get_window_extent(renderer)
            assert 0 <= box.x0 and box.x1 <= width and 0 <= box.y0 and box.y1 <= height
        label_box = figure.axes[0].yaxis.label.get_window_extent(renderer)
        assert 0 <= label_box.x0 and 0 <= label_box.y0 and label_box.y1 <= height


def test_the_embedded_figures_have_the_100_dpi_pixels(money):
    from PIL import Image

    page, _ = money
    sizes = {Image.open(io.BytesIO(base64.b64decode(data))).size
             for data in re.findall(r'src="data:image/png;base64,([^"]*)"', page)}
    assert sizes == {(round(PN_SIZE[0] * DPI), round(PN_SIZE[1] * DPI)),
                     (round(PATH_SIZE[0] * DPI), round(PATH_SIZE[1] * DPI))}
