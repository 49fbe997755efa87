"""``costlib report``: the HTML report of a recalibration run, checked as text and in Chromium.

Two batch runs of the recalibrate pipeline (different samples, so thresholds move) share one
output directory; a small group with no rated positives falls back to ``__all__``, and its name
holds HTML metacharacters to check the escaping. The browser tests render the report in headless
Chromium (Debian's package; ``.ci/run`` installs it) and skip when no Chromium is installed.
"""

from __future__ import annotations

import html
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from browser import browse, chromium, page_errors
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_data import base_config
from report_html import ReportPage

from costlib.sample import generate_score_stream, write_score_stream
from costlib_pipelines.commands.cli import main
from costlib_pipelines.io.files import InputError
from costlib_pipelines.recalibrate.pipeline import run_recalibrate
from costlib_pipelines.report.changes import applied_points, latest_points, threshold_changes
from costlib_pipelines.report.page import build_report, write_report
from costlib_pipelines.report.runs_data import load_run, previous_run

TINY = 'tiny <market> & "co"'  # falls back (no rated positives); escaping must hold
GROUPS = ("market_a", "market_b", "market_c", TINY, "__all__")
PROBE = (
    '<script>window.addEventListener("load", () => {'
    " const images = [...document.images];"
    " const ok = images.length > 0 && images.every(i => i.complete && i.naturalWidth > 0);"
    ' document.title = (ok ? "IMAGES-OK " : "IMAGES-BROKEN ") + images.length; });</script>'
)


def _stream(seed: int, n: int = 24_000):
    frame = generate_score_stream(n, seed=seed)
    frame.loc[frame.index[:60], "group"] = TINY
    return frame


def _recalibrate(tmp: Path, name: str, seed: int, output: Path, **overrides) -> dict:
    write_score_stream(_stream(seed), str(tmp / name), n_files=2, row_group_size=5000)
    config = base_config(**overrides)
    return run_recalibrate(config, str(tmp / name / "*.parquet"), str(output), run_id=name)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Two complete batch runs (run-1 then run-2) and an incomplete one in one output dir."""
    tmp = tmp_path_factory.mktemp("report")
    output = tmp / "out"
    first = _recalibrate(tmp, "run-1", 0, output, bootstrap={"replicates": 8})
    second = _recalibrate(tmp, "run-2", 1, output, bootstrap={"replicates": 8})
    incomplete = output / "runs" / "run-3-incomplete"  # e.g. interrupted: no manifest
    incomplete.mkdir()
    shutil.copy(output / "runs" / "run-2" / "operating_points.parquet", incomplete)
    return {"output": output, "runs": output / "runs", "first": first, "second": second}


@pytest.fixture(scope="module")
def report(batch):
    """The report of run-2 (written to its default place) and its parsed HTML."""
    path = write_report(str(batch["runs"] / "run-2"))
    text = Path(path).read_text()
    return {"path": Path(path), "html": text, "parsed": _parse(text)}


def _parse(text: str) -> ReportPage:
    parser = ReportPage()
    parser.feed(text)
    return parser


def _records(path: Path) -> dict[tuple[str, str], dict]:
    return {(r["group"], r["method"]): r for r in pq.read_table(path).to_pylist()}


# --------------------------------------------------------------------------- content


def test_report_shows_every_group_with_its_status(batch, report):
    parsed = report["parsed"]
    assert set(parsed.sections) == set(GROUPS)
    records = _records(batch["runs"] / "run-2" / "operating_points.parquet")
    for group in GROUPS:
        assert parsed.sections[group] == records[(group, "graph")]["status"]
    assert parsed.sections[TINY] == "fallback"
    assert parsed.sections["market_a"] == "ok"


def test_fallback_group_names_its_parent_and_links_to_it(report):
    text = report["html"]
    escaped = html.escape(TINY)
    start = text.index(f'data-group="{escaped}" data-status="fallback"')
    section = text[start:text.index("</section>", start)]
    assert "falls back" in section and '<a href="#group-' in section and "__all__" in section
    assert "<img" not in section  # no curve of its own
    overview = next(r for r in report["parsed"].rows if r["attrs"].get("data-group") == TINY)
    assert overview["cells"][-1]["text"] == "thresholds of __all__"


def test_all_text_is_escaped(report):
    assert TINY not in report["html"] and "<market>" not in report["html"]
    assert html.escape(TINY) in report["html"]


def test_accounting_numbers_equal_the_manifest(batch, report):
    manifest = json.loads((batch["runs"] / "run-2" / "manifest.json").read_text())
    accounting = manifest["row_accounting"]
    shown = {r["attrs"]["data-key"]: int(r["cells"][1]["text"].replace(",", ""))
             for r in report["parsed"].rows if "data-key" in r["attrs"]}
    assert shown == {k: accounting[k] for k in ("read", "used", "unrated", "dead_lettered")}
    assert shown["read"] == 24_000 == shown["used"] + shown["unrated"] + shown["dead_lettered"]


def test_previous_run_is_the_newest_earlier_complete_one(batch):
    second = load_run(str(batch["runs"] / "run-2"))
    assert previous_run(second).run_id == "run-1"  # run-3 has no manifest: skipped
    first = load_run(str(batch["runs"] / "run-1"))
    assert previous_run(first) is None  # run-2 finished later
    assert "no previous run" in build_report(first, None)


def test_changes_equal_hand_computation_from_both_runs(batch, report):
    old = _records(batch["runs"] / "run-1" / "operating_points.parquet")
    new = _records(batch["runs"] / "run-2" / "operating_points.parquet")
    expected = {}
    for key in new:
        for name, a, b in zip(new[key]["classifiers"], old[key]["thresholds"],
                              new[key]["thresholds"], strict=True):
            if a == b:
                expected[(*key, name)] = 0.0  # also "off in both runs"
            else:
                expected[(*key, name)] = b - a if math.isfinite(a) and math.isfinite(b) else None
    assert any(v not in (0.0, None) for v in expected.values())  # the runs differ

    changes = threshold_changes(latest_points(old.values()), latest_points(new.values()),
                                ("text_model", "image_model"))
    assert {(c.group, c.method, c.classifier): c.difference for c in changes} == expected

    shown = {}
    for row in report["parsed"].rows:
        for cell in row["cells"]:
            if "data-difference" in cell["attrs"]:
                key = (row["attrs"]["data-group"], row["attrs"]["data-method"],
                       cell["attrs"]["data-classifier"])
                value = cell["attrs"]["data-difference"]
                shown[key] = float(value) if value else None
                if shown[key]:
                    assert cell["text"] == f"{shown[key]:+.4f}"
    assert shown == expected


def test_bootstrap_intervals_are_shown(batch, report):
    record = _records(batch["runs"] / "run-2" / "operating_points.parquet")[("market_a", "graph")]
    row = next(r for r in report["parsed"].rows
               if r["attrs"].get("data-group") == "market_a"
               and r["attrs"].get("data-method") == "graph" and len(r["cells"]) == 10)
    low, high = record["threshold_ci_low"][0], record["threshold_ci_high"][0]
    assert row["cells"][1]["text"] == f"{record['thresholds'][0]:.4f} [{low:.4f}, {high:.4f}]"
    assert f"[{record['precision_ci_low']:.3f}, {record['precision_ci_high']:.3f}]" in (
        row["cells"][5]["text"])
    assert "90% bootstrap intervals" in report["html"]


def test_images_are_embedded_png_data_uris(report):
    images = report["parsed"].images
    ok_groups = [g for g, status in report["parsed"].sections.items() if status == "ok"]
    assert len(images) == 2 * len(ok_groups) == 8  # PN curves + paths per group with curves
    assert all(src.startswith("data:image/png;base64,iVBORw0KGgo") for src in images)
    # one inline script (the overview's search and sort): no source file, nothing fetched
    text = report["html"]
    assert text.count("<script") == 1 and "<script>" in text
    assert not any(word in text for word in ("http://", "https://", "fetch(", "XMLHttpRequest",
                                             "import("))


def test_incomplete_run_and_bad_path_arepage_errors(batch, tmp_path):
    with pytest.raises(InputError, match="incomplete"):
        write_report(str(batch["runs"] / "run-3-incomplete"))
    with pytest.raises(InputError, match="not found"):
        write_report(str(tmp_path / "nowhere"))


def test_cli_writes_the_report_and_exits_2_onpage_errors(batch, tmp_path, capsys):
    out = tmp_path / "sub" / "r.html"
    assert main(["report", "--run", str(batch["output"]), "--out", str(out)]) == 0  # LATEST
    assert "run run-2" in out.read_text() and f"wrote {out}" in capsys.readouterr().out
    assert main(["report", "--run", str(batch["runs"] / "run-3-incomplete")]) == 2
    assert "no manifest.json" in capsys.readouterr().err
    assert main(["report", "--run", str(tmp_path / "nowhere")]) == 2


def test_windowed_run_shows_each_groups_latest_window(tmp_path):
    output = tmp_path / "out"
    _recalibrate(tmp_path, "win", 2, output,
                 windowing={"size_days": 7, "period_days": 7, "allowed_lateness_days": 0})
    run = load_run(str(output / "runs" / "win"))
    points = latest_points(run.records)
    ends = {r["window_end"] for r in run.records}
    assert len(ends) > 1
    for (group, _), point in points.items():  # each group at its own latest window
        assert point["window_end"] == max(r["window_end"] for r in run.records
                                          if r["group"] == group)
    assert points[("market_a", "graph")]["window_end"] == max(ends)
    assert points[(TINY, "graph")]["window_end"] < max(ends)  # its rows are the earliest
    text = build_report(run, None)
    parsed = _parse(text)
    assert set(parsed.sections) == set(GROUPS)
    applied = applied_points(run)  # decide's rule: the latest complete window
    assert applied[(TINY, "graph")]["window_complete"] is False  # only early, partial windows
    for group, label in (("market_a", "Applied window"), (TINY, "Latest window")):
        start = applied[(group, "graph")]["window_start"]
        section = text[text.index(f'data-group="{html.escape(group)}" data-status'):]
        assert section.index(f"{label} {start:%Y-%m-%d %H:%M}") < section.index("</section>")
    window_rows = [r for r in parsed.rows if len(r["cells"]) == 5 and not r["attrs"]]
    assert len(window_rows) == len(ends)


def test_one_classifier_and_insufficient_data(tmp_path):
    output = tmp_path / "out"
    _recalibrate(tmp_path, "k1", 3, output, classifiers=["text_model"],
                 methods=["graph", "hull"], fallback="none")
    text = build_report(load_run(str(output / "runs" / "k1")), None)
    assert "drawn for k = 2 classifiers only; this run has k = 1" in text
    parsed = _parse(text)
    assert len(parsed.images) == 4  # PN curves only, for the 4 groups with curves
    assert parsed.sections[TINY] == "insufficient_data"
    section = text[text.index(f'data-group="{html.escape(TINY)}" data-status'):]
    section = section[:section.index("</section>")]
    assert "<strong>no thresholds</strong>" in section and "<table" not in section
    assert "no previous run" in section


# --------------------------------------------------------------------------- Chromium


def _probe(binary: str, tmp_path: Path, text: str, name: str):
    page = tmp_path / f"{name}.html"
    page.write_text(text.replace("</body>", PROBE + "</body>"))
    result = browse(binary, tmp_path / f"profile-{name}", "--dump-dom", page.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_report_renders_in_chromium_with_every_group_and_image(report, tmp_path):
    binary = chromium()
    result = _probe(binary, tmp_path, report["html"], "probe")
    count = len(report["parsed"].images)
    assert f"<title>IMAGES-OK {count}</title>" in result.stdout
    for group in GROUPS:
        assert html.escape(group, quote=False) in result.stdout
    assert page_errors(result.stderr) == []


def test_the_browser_check_fails_on_a_broken_page(report, tmp_path):
    binary = chromium()
    broken = report["html"].replace(
        "</body>", '<img src="missing.png"><script>notDefined();</script></body>')
    result = _probe(binary, tmp_path, broken, "broken")
    assert "IMAGES-BROKEN" in result.stdout
    assert any("Uncaught" in line for line in page_errors(result.stderr))


def _screenshot(binary: str, page: Path, profile: Path, shot: Path):
    from PIL import Image

    result = browse(binary, profile, f"--screenshot={shot}", "--window-size=1280,2600",
                     page.as_uri())
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    assert page_errors(result.stderr) == []
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 2600)
    band = np.asarray(image.crop((0, 1300, 1280, 2600)), dtype=int)
    saturated = int(((band.max(axis=2) - band.min(axis=2)) > 80).sum())
    return len(image.getcolors(maxcolors=1 << 24)), saturated


def test_screenshot_of_the_report_is_not_blank(report, tmp_path):
    binary = chromium()
    # the same page with every image emptied is the baseline: text, badges, links
    blank = tmp_path / "blank.html"
    blank.write_text(re.sub(r'src="data:image/png;base64,[^"]*"', 'src=""', report["html"]))
    colours, saturated = _screenshot(binary, report["path"], tmp_path / "p1",
                                     tmp_path / "report.png")
    blank_colours, blank_saturated = _screenshot(binary, blank, tmp_path / "p2",
                                                 tmp_path / "blank.png")
    # Measured: ~1,700 colours with or without the (palette) images (text antialiasing makes
    # most of them), and in the band of the first group's figures (y 1300-2600) ~6,500 saturated
    # pixels with the images, ~120 without.
    assert colours > 1000 and blank_colours > 1000
    assert saturated > blank_saturated + 3000, (saturated, blank_saturated)


def test_run_held_by_the_publish_guard_says_so(tmp_path):
    from costlib_pipelines.recalibrate.publish import PublishRefused

    output = tmp_path / "out"
    write_score_stream(_stream(4, n=8000), str(tmp_path / "in"), n_files=1)
    with pytest.raises(PublishRefused):
        run_recalibrate(base_config(), str(tmp_path / "in" / "*.parquet"), str(output),
                        run_id="held", min_rated=10**6)
    text = build_report(load_run(str(output / "runs" / "held")), None)
    assert "held by the publish guard" in text and "Publish guard violations" in text
    assert "fewer than min_rated=1e+06" in text


# --------------------------------------------------------------------------- figures
#
# The figures are blitted (costlib_pipelines.report.figures): static parts drawn once per view,
# per group only the data. These tests check what is drawn against the run's Parquet files,
# and where it lands in the PNG against a hand computation of the axes geometry.


def _png(uri: str) -> np.ndarray:
    import base64
    import io

    from PIL import Image

    assert uri.startswith("data:image/png;base64,")
    data = base64.b64decode(uri.split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=int)


def _group_inputs(run_dir: Path, group: str, methods):
    """The group's records and PN curves straight from the Parquet files, in method order."""
    points = _records(run_dir / "operating_points.parquet")
    curves = {(c["group"], c["method"]): c
              for c in pq.read_table(run_dir / "pn_curves.parquet").to_pylist()}
    return [points[(group, m)] for m in methods], [curves.get((group, m)) for m in methods]


def _pixel(x: float, y: float, box, xlim, ylim, size) -> tuple[int, int]:
    """Row and column of data point (x, y) in an image of ``size`` = (width, height) pixels,
    for axes at figure fractions ``box`` = (left, bottom, right, top) with limits xlim/ylim."""
    width, height = size
    left, bottom, right, top = box
    fx = left + (x - xlim[0]) / (xlim[1] - xlim[0]) * (right - left)
    fy = bottom + (y - ylim[0]) / (ylim[1] - ylim[0]) * (top - bottom)
    return round((1 - fy) * height - 0.5), round(fx * width - 0.5)


def _marker_colour_at(image: np.ndarray, row: int, col: int, colours) -> bool:
    """Whether one of ``colours`` (RGB 0-255) is within 1 pixel of (row, col)."""
    patch = image[max(row - 1, 0):row + 2, max(col - 1, 0):col + 2].reshape(-1, 3)
    return any(np.abs(patch - np.asarray(c)).max(axis=1).min() <= 40 for c in colours)


METHODS = ("graph", "hull", "bucket", "analytic")


def _rgb(method: str) -> tuple[int, int, int]:
    from matplotlib.colors import to_rgb

    from costlib.thresholds.plots._plots import METHOD_COLORS

    return tuple(round(255 * v) for v in to_rgb(METHOD_COLORS[method]))


def test_pn_figure_draws_the_parquet_curves_and_points_where_they_are(batch):
    from costlib_pipelines.report.figures import DPI, PN_MARGINS, PN_SIZE
    from costlib_pipelines.report.run_figures import group_figures

    run_dir = batch["runs"] / "run-2"
    drawer = group_figures(load_run(str(run_dir)), METHODS)
    width, height = round(PN_SIZE[0] * DPI), round(PN_SIZE[1] * DPI)
    # two gridspec columns: cell width w, gap wspace * w, filling left..right
    cell = (PN_MARGINS["right"] - PN_MARGINS["left"]) / (2 + PN_MARGINS["wspace"])
    full_box = (PN_MARGINS["left"], PN_MARGINS["bottom"], PN_MARGINS["left"] + cell,
                PN_MARGINS["top"])
    zoom_box = (PN_MARGINS["right"] - cell, PN_MARGINS["bottom"], PN_MARGINS["right"],
                PN_MARGINS["top"])
    checked = 0
    for group in ("market_a", "market_b", "market_c", "__all__"):
        points, curves = _group_inputs(run_dir, group, METHODS)
        image = _png(drawer.pn_uri(points, curves))
        assert image.shape == (height, width, 3)
        n, p = points[0]["rated_negatives"], points[0]["rated_positives"]
        view = drawer.last_view
        assert (view.n, view.p) == (n, p)
        largest = max(r["fp"] for r in points)
        # the zoom shows the chosen points with room: at least 4 x the largest FP (or 1 row)
        assert view.zoom_x >= min(max(4 * largest, 1) / n, 1) and view.zoom_x <= 1
        for method, record, curve in zip(METHODS, points, curves, strict=True):
            for panel in (0, 1):
                fp, tp = drawer.curve_lines[panel, method].get_data()
                np.testing.assert_array_equal(fp, np.asarray(curve["fp"]) / n)
                np.testing.assert_array_equal(tp, np.asarray(curve["tp"]) / p)
                x, y = drawer.point_lines[panel, method].get_data()
                assert (x[0], y[0]) == (record["fp"] / n, record["tp"] / p)
        # each chosen point's marker is in the PNG where the record puts it (both panels);
        # markers within 5 pixels overlap (about 7 pixels wide): any of their colours will do
        for box, xlim, ylim in ((full_box, (0, 1.02), (0, 1.05)),
                                (zoom_box, (0, view.zoom_x), (0, view.zoom_y))):
            at = {m: _pixel(r["fp"] / n, r["tp"] / p, box, xlim, ylim, (width, height))
                  for m, r in zip(METHODS, points, strict=True)}
            for method, (row, col) in at.items():
                near = [_rgb(m) for m, (r, c) in at.items() if math.hypot(r - row, c - col) <= 5]
                assert _marker_colour_at(image, row, col, near), (group, method, box)
                checked += 1
        # the target line passes through the best point: TP - slope * FP is largest there
        from costlib.thresholds.point._target import Target

        slope = Target.from_marginal_precision(points[0]["target_marginal_precision"]).slope
        best = max(points, key=lambda r: r["tp"] - slope * r["fp"])
        xs, ys = drawer.target_lines[0].get_data()
        on_line = np.interp(best["fp"] / n, xs, ys)
        assert on_line == pytest.approx(best["tp"] / p, abs=1e-12)
        assert (ys[1] - ys[0]) / (xs[1] - xs[0]) == pytest.approx(slope * n / p)
    assert checked == 4 * 4 * 2


def test_a_groups_figures_do_not_depend_on_the_groups_drawn_before(batch):
    """Backgrounds are cached per view: drawing other groups (other zoom views) first must
    not change a group's PNG by a single pixel."""
    from costlib_pipelines.report.run_figures import group_figures

    run_dir = batch["runs"] / "run-2"
    run = load_run(str(run_dir))
    inputs = {g: _group_inputs(run_dir, g, METHODS)
              for g in ("market_a", "market_b", "market_c", "__all__")}
    alone = {}
    for group, (points, curves) in inputs.items():  # a fresh drawer per group
        drawer = group_figures(run, METHODS)
        alone[group] = (drawer.pn_uri(points, curves), drawer.path_uri(points, curves))
    drawer = group_figures(run, METHODS)
    order = ["market_c", "__all__", "market_a", "market_b", "market_c", "market_a"]
    for group in order:
        points, curves = inputs[group]
        assert (drawer.pn_uri(points, curves), drawer.path_uri(points, curves)) == alone[group]
    assert len({drawer.last_view} | {None}) == 2  # a view was recorded


def test_path_figure_marks_each_chosen_cell_where_the_parquet_puts_it(batch):
    from costlib_pipelines.report.figures import DPI, PATH_MARGINS, PATH_SIZE
    from costlib_pipelines.report.run_figures import group_figures

    run_dir = batch["runs"] / "run-2"
    run = load_run(str(run_dir))
    drawer = group_figures(run, METHODS)
    assert drawer.lattice is not None  # uniform edges: the lattice is fixed
    size = (round(PATH_SIZE[0] * DPI), round(PATH_SIZE[1] * DPI))
    box = (PATH_MARGINS["left"], PATH_MARGINS["bottom"], PATH_MARGINS["right"],
           PATH_MARGINS["top"])
    limits = [(-0.5, len(axis) - 0.5) for axis in drawer.lattice]
    for group in ("market_a", "market_b", "market_c", "__all__"):
        points, curves = _group_inputs(run_dir, group, METHODS)
        image = _png(drawer.path_uri(points, curves))
        assert image.shape == (size[1], size[0], 3)
        cells = {m: tuple(np.asarray(c["path"]).reshape(-1, 2)[c["chosen_position"]])
                 for m, c in zip(METHODS, curves, strict=True)}
        for method, curve in zip(METHODS, curves, strict=True):
            path = np.asarray(curve["path"]).reshape(-1, 2)
            x, y = drawer.path_lines[method].get_data()
            np.testing.assert_array_equal(np.column_stack([x, y]), path)
            # the smallest marker on a cell is drawn last (on top): its colour is at the centre
            top = [m for m in METHODS if cells[m] == cells[method]][-1]
            row, col = _pixel(*cells[method], box, *limits, size)
            assert _marker_colour_at(image, row, col, [_rgb(top)]), (group, method)


def test_pn_note_states_n_and_p_of_each_group(batch, report):
    records = _records(batch["runs"] / "run-2" / "operating_points.parquet")
    found = re.findall(r'data-group="([^"]*)" data-status="ok">.*?class="note pn-scale" '
                       r'data-n="([^"]*)" data-p="([^"]*)"', report["html"])
    assert {html.unescape(g) for g, _, _ in found} == {g for g in GROUPS if g != TINY}
    for group, n, p in found:
        record = records[(html.unescape(group), "graph")]
        assert (float(n), float(p)) == (record["rated_negatives"], record["rated_positives"])


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=1e-7, max_value=2.0, allow_nan=False))
def test_nice_ceiling_is_the_smallest_ladder_value_at_least_the_value(value):
    from costlib_pipelines.report.figures import nice_ceiling

    ladder = sorted({float(f"{m}e{e}") for m in (1, 2, 5) for e in range(-8, 1)} | {1.0})
    expected = min([v for v in ladder if v >= value and v <= 1.0] or [1.0])
    assert nice_ceiling(value) == expected


def test_path_figure_marks_the_previous_runs_thresholds_in_this_runs_lattice(batch, report):
    from costlib_pipelines.report.figures import DPI, PATH_MARGINS, PATH_SIZE
    from costlib_pipelines.report.run_figures import group_figures

    run_dir = batch["runs"] / "run-2"
    drawer = group_figures(load_run(str(run_dir)), METHODS)
    old = _records(batch["runs"] / "run-1" / "operating_points.parquet")
    size = (round(PATH_SIZE[0] * DPI), round(PATH_SIZE[1] * DPI))
    box = (PATH_MARGINS["left"], PATH_MARGINS["bottom"], PATH_MARGINS["right"],
           PATH_MARGINS["top"])
    limits = [(-0.5, len(axis) - 0.5) for axis in drawer.lattice]
    for group in ("market_a", "market_b", "market_c"):
        points, curves = _group_inputs(run_dir, group, METHODS)
        before = old[(group, "graph")]["thresholds"]  # graph: the decision method
        image = _png(drawer.path_uri(points, curves, before))
        # both runs have the same 24 uniform edges: the old thresholds are lattice points
        cell = [int(np.flatnonzero(axis == t)[0]) for axis, t in
                zip(drawer.lattice, before, strict=True)]
        x, y = drawer.previous_marker.get_data()
        assert (x[0], y[0]) == tuple(cell)
        row, col = _pixel(*cell, box, *limits, size)
        assert _marker_colour_at(image, row, col, [(0, 0, 0)])
    assert report["html"].count("Black cross: the previous run") == 4


@pytest.fixture(scope="module")
def in_force_edges(tmp_path_factory):
    """run-1 on 24 uniform edges, then run-2 on 20: run-1's thresholds (in force) are added to
    run-2's edges, so its lattice is not the config's."""
    tmp = tmp_path_factory.mktemp("in_force")
    output = tmp / "out"
    _recalibrate(tmp, "run-1", 0, output)
    _recalibrate(tmp, "run-2", 1, output, grid={"edges": "uniform", "bins": 20,
                                                 "range": [0.0, 1.0]})
    return output / "runs"


def test_path_ticks_use_the_lattice_with_the_thresholds_in_force(in_force_edges):
    from costlib_pipelines.report.run_figures import group_figures

    run = load_run(str(in_force_edges / "run-2"))
    assert any(run.manifest["in_force"]["edges_added"].values())
    drawer = group_figures(run, METHODS)
    old = [r for r in pq.read_table(in_force_edges / "run-1" / "operating_points.parquet")
           .to_pylist() if r["method"] == "graph" and r["thresholds"] is not None]
    for j, axis in enumerate(drawer.lattice):
        added = {r["thresholds"][j] for r in old if math.isfinite(r["thresholds"][j])}
        expected = [*sorted(set(np.linspace(0.0, 1.0, 20)) | added), math.inf]
        np.testing.assert_array_equal(axis, expected)
    # every chosen cell indexes the record's thresholds in that lattice
    points = _records(in_force_edges / "run-2" / "operating_points.parquet")
    for curve in pq.read_table(in_force_edges / "run-2" / "pn_curves.parquet").to_pylist():
        cell = np.asarray(curve["path"]).reshape(-1, 2)[curve["chosen_position"]]
        thresholds = points[(curve["group"], curve["method"])]["thresholds"]
        assert [drawer.lattice[j][cell[j]] for j in range(2)] == thresholds
    text = build_report(run, previous_run(run))
    assert "ticks show the threshold value" in text and "cannot be rebuilt" not in text


def test_path_ticks_are_indices_when_the_lattice_cannot_be_rebuilt(in_force_edges, tmp_path):
    """A run from before manifests recorded ``grid_edges`` whose thresholds in force came from
    a run that is gone: no threshold ticks, no boxes. With ``grid_edges`` the lattice is the
    recorded one."""
    from costlib_pipelines.report.run_figures import group_figures

    copy = tmp_path / "runs"
    shutil.copytree(in_force_edges / "run-2", copy / "run-2")
    manifest = json.loads((copy / "run-2" / "manifest.json").read_text())
    manifest["in_force"]["source"] = str(tmp_path / "gone" / "run-1")
    recorded = manifest["grid_edges"]["edges"]
    (copy / "run-2" / "manifest.json").write_text(json.dumps(manifest))
    lattice = group_figures(load_run(str(copy / "run-2")), METHODS).lattice
    assert [list(axis[:-1]) for axis in lattice] == recorded
    del manifest["grid_edges"]
    (copy / "run-2" / "manifest.json").write_text(json.dumps(manifest))
    run = load_run(str(copy / "run-2"))
    assert group_figures(run, METHODS).lattice is None
    text = build_report(run, None)
    assert "the run&#x27;s lattice cannot be rebuilt" in text
