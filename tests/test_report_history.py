"""``costlib report --output OUTPUT --history``: one page over every complete run of an output.

Three runs of the real ``costlib recalibrate`` command on small audited streams (so records carry
an estimated recall), named so that their ids sort against their start order; the third run's
scores are pushed up, so its thresholds jump and the publish guard holds it. The page's values
are compared with each run's Parquet records, read here directly. The browser test renders the
page in headless Chromium (Debian's package) and skips without it.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from browser import browse, chromium, page_errors
from pipeline_data import base_config, write_files
from report_html import ReportPage
from test_pipeline_audit_estimation import AUDIT, audited_frame

from costlib_pipelines.commands.cli import main
from costlib_pipelines.report import history as report_history
from costlib_pipelines.report import history_data

#: Run ids in the order they run (ids sort the other way round).
RUNS = ("c-first", "b-second", "a-third")
HELD = "a-third"


def _fmt_threshold(value):
    if value is None:
        return "–"
    return "off" if np.isinf(value) else f"{value:.4f}"


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("history")
    out = tmp / "out"
    # moves without the evidence rule (on by default with audit data), so that the runs'
    # thresholds differ and every figure has something to show
    config = base_config(columns=AUDIT, methods=["graph", "hull"], bootstrap={"replicates": 4},
                         target={"marginal_precision": 0.05}, in_force={"evidence_z": None})
    (tmp / "config.yaml").write_text(json.dumps(config.raw))  # JSON is YAML
    codes = []
    for name, seed, power in zip(RUNS, (1, 2, 3), (1.0, 1.0, 0.4), strict=True):
        frame = audited_frame(8000, seed=seed)
        for column in ("text_model", "image_model"):
            frame[column] = frame[column] ** power  # the last run: every score pushed up
        pattern = write_files(frame, tmp / name, n_files=2)
        guard = ["--max-threshold-change", "0.05"] if name == HELD else []
        codes.append(main(["recalibrate", "--config", str(tmp / "config.yaml"), "--input",
                           pattern, "--output", str(out), "--run-id", name, *guard]))
    assert codes == [0, 0, 3]  # the last one held for review
    return out


@pytest.fixture(scope="module")
def page(output):
    path = output / "history.html"
    assert main(["report", "--output", str(output), "--history"]) == 0
    text = path.read_text()
    parser = ReportPage()
    parser.feed(text)
    return {"path": path, "html": text, "parsed": parser}


def _records(output: Path, run_id: str) -> dict[str, dict]:
    table = pq.read_table(output / "runs" / run_id / "operating_points.parquet")
    return {r["group"]: r for r in table.to_pylist() if r["method"] == "graph"}


def test_runs_are_listed_in_run_order_with_published_or_held(output, page):
    rows = [r for r in page["parsed"].rows if "data-run" in r["attrs"]
            and "data-group" not in r["attrs"]]
    assert [r["attrs"]["data-run"] for r in rows] == list(RUNS)  # started order, not id order
    for row in rows:
        run_id = row["attrs"]["data-run"]
        manifest = json.loads((output / "runs" / run_id / "manifest.json").read_text())
        assert row["attrs"]["data-published"] == ("false" if run_id == HELD else "true")
        assert manifest["published"] is (run_id != HELD)
        publication = row["cells"][3]["text"]
        if run_id == HELD:
            assert publication.startswith("held")
            assert f"{len(manifest['guard']['violations'])} violation(s)" in publication
        else:
            assert publication.startswith("published")
        assert ("LATEST" in publication) == (run_id == "b-second")
        accounting = manifest["row_accounting"]
        share = accounting["audit.audited"] / accounting["read"]
        assert row["cells"][7]["text"] == f"{share:.2%} (recalibrate)"


def test_every_group_and_run_shows_the_values_of_its_records(output, page):
    records = {run_id: _records(output, run_id) for run_id in RUNS}
    groups = set().union(*records.values())
    assert set(page["parsed"].sections) == groups  # few groups: every group has its figure
    assert len(page["parsed"].images) == len(groups)
    seen = 0
    for row in page["parsed"].rows:
        attrs = row["attrs"]
        if "data-group" not in attrs or "data-run" not in attrs:
            continue
        record = records[attrs["data-run"]][attrs["data-group"]]
        cells = [c["text"].strip() for c in row["cells"]]
        assert cells[1] == attrs["data-run"]
        assert cells[2] == ("held" if attrs["data-run"] == HELD else "published")
        assert row["cells"][3]["attrs"]["data-status"] == record["status"]
        assert cells[4] == (record["point_status"] or "–")
        assert cells[5:7] == [_fmt_threshold(t) for t in record["thresholds"]]
        volume = record["volume"]
        assert cells[7] == (f"{volume:,.0f}" if volume.is_integer() else f"{volume:,.2f}")
        precision = f"{record['precision']:.3f}"
        if record["precision_ci_low"] is not None:
            precision += f" [{record['precision_ci_low']:.3f}, {record['precision_ci_high']:.3f}]"
        assert cells[8] == precision
        recall = record["estimated_recall"]
        assert cells[9].startswith("–" if recall is None else f"{recall:.3f}")
        seen += 1
    assert seen == sum(len(r) for r in records.values())
    # the runs' thresholds differ, so the history has something to show
    assert len({tuple(records[r]["__all__"]["thresholds"]) for r in RUNS}) > 1


def test_groups_the_guard_named_are_marked_held(output, page):
    manifest = json.loads((output / "runs" / HELD / "manifest.json").read_text())
    named = {g for v in manifest["guard"]["violations"]
             for g in re.findall(r"group '([^']*)'", v)}
    assert named
    for group in named:
        start = page["html"].index(f'data-group="{html.escape(group)}"><h3>')
        assert "held" in page["html"][start:page["html"].index("</p>", start)]


def test_last_keeps_the_newest_runs_and_groups_choose_figures(output, tmp_path, monkeypatch):
    out = tmp_path / "last.html"
    assert main(["report", "--output", str(output), "--history", "--last", "2", "--out",
                 str(out)]) == 0
    text = out.read_text()
    assert re.findall(r'<tr data-run="([^"]*)" data-published', text) == list(RUNS[1:])
    monkeypatch.setattr(report_history, "MAX_PLOTTED_GROUPS", 1)
    runs = history_data.load_history(str(output))
    limited = report_history.build_history(runs, str(output), groups=["market_c"])
    parser = ReportPage()
    parser.feed(limited)
    assert list(parser.sections)[:2] == ["__all__", "market_c"]  # always; then held groups
    assert "Figures for at most 1 groups" in limited


@pytest.mark.parametrize(("argv", "message"), [
    (["--output", "{tmp}/nope", "--history"], "output directory not found"),
    (["--output", "{tmp}/empty", "--history"], "no complete recalibrate run"),
    (["--output", "{out}", "--history", "--last", "0"], "must be a positive number"),
    (["--output", "{out}", "--history", "--groups", "nope"], "no group 'nope'"),
    (["--history"], "--history needs --output"),
    (["--output", "{out}"], "--output goes with --history"),
    ([], "give --run DIR"),
    (["--output", "{out}", "--history", "--decisions", "{out}"], "no complete decide run"),
    (["--output", "{out}", "--history", "--out", "{tmp}"], "is a directory"),
])
def test_bad_input_exits_2_with_one_line(output, tmp_path, capsys, argv, message):
    (tmp_path / "empty" / "runs" / "x").mkdir(parents=True)  # a run without its manifest
    argv = [a.format(tmp=tmp_path, out=output) for a in argv]
    assert main(["report", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_decisions_give_each_run_the_share_its_decide_runs_sent_to_audit(output, tmp_path):
    """--decisions: a run's audit share is the rows the decide runs that applied its points
    sent to audit, per row decided (their manifests' audit.audited / decided, summed); runs no
    decide run applied keep the recalibrate manifest's share."""
    config = base_config(columns=AUDIT, audit={"enabled": True, "budget_share": 0.05})
    (tmp_path / "d.yaml").write_text(json.dumps(config.raw))
    decisions = tmp_path / "decisions"
    applied = []
    for day, seed in (("d1", 11), ("d2", 12)):
        pattern = write_files(audited_frame(3000, seed=seed), tmp_path / day, n_files=1)
        assert main(["decide", "--config", str(tmp_path / "d.yaml"), "--input", pattern,
                     "--operating-points", str(output), "--output", str(decisions),
                     "--run-id", day]) == 0
        applied.append(json.loads((decisions / "runs" / day / "manifest.json").read_text()))
    audited = sum(m["audit"]["audited"] for m in applied)
    decided = sum(m["row_accounting"]["decided"] for m in applied)
    assert audited > 0
    runs = {r.run_id: r for r in history_data.load_history(str(output),
                                                          decisions=str(decisions))}
    latest = (output / "LATEST").read_text().strip()
    assert {m["operating_points"]["run_ids"][0] for m in applied} == {latest}
    assert (runs[latest].audit.numerator, runs[latest].audit.denominator,
            runs[latest].audit.source) == (audited, decided, "decide")
    assert all(r.audit is None or r.audit.source == "recalibrate"
               for run_id, r in runs.items() if run_id != latest)
    out = tmp_path / "h.html"
    assert main(["report", "--output", str(output), "--history", "--decisions",
                 str(decisions), "--out", str(out)]) == 0
    assert f"{audited / decided:.2%} (decide)" in out.read_text()


def test_history_renders_in_chromium(page, tmp_path):
    from PIL import Image

    binary = chromium()
    probe = ('<script>window.addEventListener("load", () => { const i = [...document.images];'
             ' document.title = (i.length && i.every(x => x.complete && x.naturalWidth > 0)'
             ' ? "IMAGES-OK " : "IMAGES-BROKEN ") + i.length; });</script>')
    probed = tmp_path / "probe.html"
    probed.write_text(page["html"].replace("</body>", probe + "</body>"))
    result = browse(binary, tmp_path / "p0", "--dump-dom", probed.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"<title>IMAGES-OK {len(page['parsed'].images)}</title>" in result.stdout
    assert page_errors(result.stderr) == []

    def shot(path: Path, name: str):
        png = tmp_path / f"{name}.png"
        result = browse(binary, tmp_path / f"p-{name}", f"--screenshot={png}",
                        "--window-size=1280,2600", path.as_uri())
        assert result.returncode == 0 and png.exists(), result.stderr[-2000:]
        assert page_errors(result.stderr) == []
        image = np.asarray(Image.open(png).convert("RGB"), dtype=int)
        assert image.shape == (2600, 1280, 3)
        band = image[1000:]
        return int(((band.max(axis=2) - band.min(axis=2)) > 80).sum())

    blank = tmp_path / "blank.html"  # every image emptied: the baseline (text, badges)
    blank.write_text(re.sub(r'src="data:image/png;base64,[^"]*"', 'src=""', page["html"]))
    saturated, baseline = shot(page["path"], "history"), shot(blank, "blank")
    assert saturated > baseline + 1500, (saturated, baseline)
