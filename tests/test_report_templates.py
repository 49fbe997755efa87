"""The report's Jinja2 templates: found through the package loader, autoescaped as
``html.escape`` writes it, strict about missing variables, and every template file in use."""

from __future__ import annotations

import html
from importlib import resources

import pytest
from jinja2 import StrictUndefined, UndefinedError
from jinja2.loaders import PackageLoader

from costlib_pipelines.report import cells
from costlib_pipelines.report.templates import environment, render

HOSTILE = '<script>alert("x")</script> & \'co\''


def _template_files() -> set[str]:
    folder = resources.files("costlib_pipelines.report") / "templates"
    return {entry.name for entry in folder.iterdir() if entry.name.endswith(".j2")}


def test_templates_are_found_through_the_package_loader():
    env = environment()
    assert isinstance(env.loader, PackageLoader)
    assert env.undefined is StrictUndefined
    assert set(env.list_templates()) == _template_files() >= {
        "base.html.j2", "run.html.j2", "history.html.j2", "macros.html.j2"}


def test_autoescape_is_on_and_writes_what_html_escape_writes():
    env = environment()
    assert env.autoescape("run.html.j2") is True
    table = cells.table([HOSTILE], [cells.row([cells.cell(HOSTILE, css=HOSTILE)], group=HOSTILE)])
    text = env.from_string('{% from "macros.html.j2" import table %}{{ table(t) }}').render(
        t=table)
    assert "<script>" not in text
    escaped = html.escape(HOSTILE, quote=True)
    assert text.count(escaped) == 4  # header, class, data-group, cell text
    section = render("capacity.html.j2", capacity={
        "figures": cells.table(["", "value"], []), "groups": table, "shown": 1, "total": 1})
    assert "<script>" not in section and escaped in section


def test_a_missing_variable_raises():
    with pytest.raises(UndefinedError):
        render("capacity.html.j2")
    with pytest.raises(UndefinedError):
        render("capacity.html.j2", capacity={"figures": cells.table([], [])})


def test_every_template_file_is_used_by_a_render():
    """Every file is a page, or is reached from one by extends, include or import."""
    env = environment()
    pages = {"run.html.j2", "history.html.j2", "capacity.html.j2"}
    used: set[str] = set()
    todo = list(pages)
    while todo:
        name = todo.pop()
        if name in used:
            continue
        used.add(name)
        source = env.loader.get_source(env, name)[0]
        from jinja2 import meta

        todo += [n for n in meta.find_referenced_templates(env.parse(source)) if n]
    assert used == _template_files()


def test_every_kind_of_part_is_written_as_the_templates_wrote_it():
    """report/table_html.py replaced the Jinja macros that laid out tables (half of a
    365-run history page's time); the markup, written out here by hand, is what they wrote,
    every value escaped as html.escape(quote=True) does and Markup kept as it is."""
    from markupsafe import Markup

    from costlib_pipelines.report.table_html import table_html

    e = html.escape(HOSTILE, quote=True)
    row = cells.row([
        cells.cell(cells.text(HOSTILE), cells.indented(1), cells.badge("ok"),
                   cells.badge("held", HOSTILE), css="c", value=0.5, sort_key=HOSTILE),
        cells.cell(cells.link("x", None), cells.link(HOSTILE, "g-1"),
                   cells.interval("0.5", ""), cells.interval("0.5", "[0.4, 0.6]")),
        cells.cell(cells.reason_badge("kept", HOSTILE), cells.note(HOSTILE),
                   cells.note("n", "note proposed", HOSTILE), Markup("<b>m</b>")),
        cells.cell("wide", css="note", colspan=2),
    ], run="r1", group=HOSTILE)
    got = str(table_html(cells.table(["a", HOSTILE], [row], "points")))
    want = (
        f'<table class="points"><thead><tr><th>a</th><th>{e}</th></tr></thead><tbody>'
        f'<tr data-run="r1" data-group="{e}">'
        f'<td class="c" data-value="0.5" data-sort-key="{e}">{e}&nbsp;&nbsp;1'
        '<span class="badge ok">ok</span>'
        f'<span class="badge held">{e}</span></td>'
        f'<td>x<a href="#g-1">{e}</a>0.5'
        '0.5 <span class="ci">[0.4, 0.6]</span></td>'
        f'<td><span title="{e}"><span class="badge kept">kept</span></span>'
        f'<div class="note">{e}</div><div class="note">{e}</div>'
        f'<div class="note proposed" title="{e}">n</div><b>m</b></td>'
        '<td colspan="2" class="note">wide</td></tr></tbody></table>')
    assert got == want
    rendered = environment().from_string(
        '{% from "macros.html.j2" import table %}{{ table(t) }}').render(
        t=cells.table(["a", HOSTILE], [row], "points"))
    assert rendered == want
