"""``costlib report`` for many groups: which groups get a section, the page size, and the
overview's search and sort in a real browser (headless Chromium, skipped when absent).

The runs are copies of two real small recalibrations spread over many groups
(``tests/benchmarks/bench_report.py``); which groups must get a section is computed here from
the records of both runs, independently of the report code.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from browser import browse, chromium, page_errors

import costlib_pipelines.report.page as report
import costlib_pipelines.report.runs_data as runs_data
from costlib_pipelines.commands.cli import main
from costlib_pipelines.io.files import InputError

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
from bench_report import make_runs, template_runs


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return template_runs(tmp_path_factory.mktemp("template"))


def _records(run: Path, method: str = "graph") -> dict[str, dict]:
    return {r["group"]: r for r in pq.read_table(run / "operating_points.parquet").to_pylist()
            if r["method"] == method}


def _expected_sections(run: Path, selected=()) -> set[str]:
    """Groups that changed (decision method's thresholds), fell back or have none, have a
    coverage-limited or infeasible point, plus __all__ and the selected ones."""
    now, before = _records(run), _records(run.parent / "previous")
    expected = {"__all__", *selected}
    for group, record in now.items():
        if record["status"] != "ok" or record.get("point_status") in ("coverage_limited",
                                                                      "infeasible"):
            expected.add(group)
        if group not in before or before[group]["thresholds"] != record["thresholds"]:
            expected.add(group)
    return expected


def _sections(text: str) -> set[str]:
    import html

    return {html.unescape(g) for g in re.findall(r'<section class="group" id="[^"]*" '
                                                 r'data-group="([^"]*)"', text)}


def test_many_groups_get_sections_only_when_they_need_a_look(template, tmp_path):
    run = make_runs(template, tmp_path / "big", 1200, seed=3, changed_share=0.01,
                    fallback_share=0.005)
    out = tmp_path / "big.html"
    code = main(["report", "--run", str(run), "--out", str(out), "--groups",
                 "group_00007, group_01111"])
    assert code == 0
    text = out.read_text()
    expected = _expected_sections(run, selected=("group_00007", "group_01111"))
    assert 8 < len(expected) < 60  # changed, fell back, __all__, selected: a few dozen
    assert _sections(text) == expected
    # every group is a row of the overview; only those with a section link to it
    rows = re.findall(r'<tr data-group="([^"]*)">', text)
    assert len(rows) == 1201
    assert len(re.findall(r'<td data-sort="group_\d+"><a href="#group-', text)) == \
        len(expected) - 1
    assert 'data-sort="group_00007"><a href=' in text
    # page size: the overview costs ~0.5 KB per group, each section its two figures
    assert len(text.encode()) < 1201 * 700 + len(expected) * 40_000
    assert len(text.encode()) < 2_000_000


def test_every_group_has_a_section_up_to_the_limit_or_when_asked(template, tmp_path,
                                                                 monkeypatch):
    run = make_runs(template, tmp_path / "small", 12, seed=4, changed_share=0.2)
    everyone = set(_records(run))
    text = report.build_report(runs_data.load_run(str(run)), runs_data.load_run(
        str(run.parent / "previous")))
    assert _sections(text) == everyone and "details</th>" not in text
    monkeypatch.setattr(report, "MAX_DETAILED_GROUPS", 5)
    current = runs_data.load_run(str(run))
    previous = runs_data.load_run(str(run.parent / "previous"))
    limited = report.build_report(current, previous)
    assert _sections(limited) == _expected_sections(run) != everyone
    assert _sections(report.build_report(current, previous, all_details=True)) == everyone
    with pytest.raises(InputError, match="no group 'nope'"):
        report.build_report(current, previous, groups=["nope"])


def test_held_groups_are_named_by_the_guard(template, tmp_path, monkeypatch):
    run = make_runs(template, tmp_path / "held", 30, seed=5, changed_share=0.0,
                    fallback_share=0.0)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["published"] = False
    manifest["guard"] = {"violations": ["group 'group_00011': TP fell by 40% (limit 20%)"]}
    (run / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(report, "MAX_DETAILED_GROUPS", 5)
    current = runs_data.load_run(str(run))
    text = report.build_report(current, runs_data.previous_run(current))
    assert _sections(text) == _expected_sections(run) | {"group_00011"}
    assert "Shown in detail: held." in text


PROBE = """<script>window.addEventListener("load", () => {
  const input = document.getElementById("group-search");
  const visible = () => [...document.querySelectorAll("table.overview tbody tr")]
    .filter(r => !r.hidden).map(r => r.dataset.group);
  const result = {};
  input.value = "group_0001";
  input.dispatchEvent(new Event("input"));
  result.search = visible();
  result.count = document.getElementById("group-count").textContent;
  input.value = "";
  input.dispatchEvent(new Event("input"));
  const header = [...document.querySelectorAll("table.overview thead th")]
    .find(th => th.textContent.startsWith("rated −"));
  header.click();
  result.ascending = visible();
  header.click();
  result.descending = visible();
  document.title = "RESULT " + JSON.stringify(result);
});</script>"""


def test_search_and_sort_work_in_chromium(template, tmp_path):
    binary = chromium()
    run = make_runs(template, tmp_path / "browse", 40, seed=6, changed_share=0.0)
    page = tmp_path / "page.html"
    report.write_report(str(run), str(page))
    page.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    result = browse(binary, tmp_path / "profile", "--dump-dom", page.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    assert page_errors(result.stderr) == []
    found = re.search(r"<title>RESULT (.*?)</title>", result.stdout)
    assert found, result.stdout[:2000]
    import html

    got = json.loads(html.unescape(found.group(1)))
    assert got["search"] == [f"group_000{i}" for i in range(10, 20)]
    assert got["count"] == "10 of 41 groups"
    negatives = {g: r["rated_negatives"] for g, r in _records(run).items()}
    # sorted by the number (not the text) of rated negatives, ties in page order
    want = sorted(negatives, key=lambda g: (negatives[g], g == "__all__", g))
    assert got["ascending"] == want
    assert [negatives[g] for g in got["descending"]] == sorted(negatives.values(), reverse=True)
