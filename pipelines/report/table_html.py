"""The HTML of a table of :mod:`.cells` (rows of cells of parts), written in Python.

A history page of 365 runs holds ~40,000 cells; laid out by Jinja2 macros (one call per table,
row, cell and part) they took half of the page's time. This writes the same markup directly,
escaping every value as the templates do (:func:`escape`, the templates' ``finalize``:
:func:`html.escape` with quotes, values with ``__html__`` as they are). The templates print it
through the ``table`` macro of ``templates/macros.html.j2``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

__all__ = ["badge_html", "escape", "table_html"]


def escape(value: Any) -> Markup:
    """``value`` as HTML text: :func:`html.escape` with quotes, unless it is HTML already."""
    if hasattr(value, "__html__"):
        return Markup(value)
    return Markup(html.escape(str(value), quote=True))


def _attrs(css: Any = "", data: Mapping[str, Any] | None = None) -> str:
    out = f' class="{escape(css)}"' if css else ""
    for key, value in (data or {}).items():
        out += f' data-{escape(str(key).replace("_", "-"))}="{escape(value)}"'
    return out


def badge_html(css: Any, label: Any) -> Markup:
    """A status badge: ``<span class="badge CSS">LABEL</span>`` (the ``badge`` macro)."""
    return Markup(f'<span class="badge {escape(css)}">{escape(label)}</span>')


def _part(p: Mapping[str, Any]) -> str:
    kind = p["kind"]
    if kind == "text":
        return str(escape(p["text"]))
    if kind == "indented":
        return f"&nbsp;&nbsp;{escape(p['text'])}"
    if kind == "badge":
        return badge_html(p["css"], p["label"])
    if kind == "link":
        if p["anchor"] is None:
            return str(escape(p["text"]))
        return f'<a href="#{escape(p["anchor"])}">{escape(p["text"])}</a>'
    if kind == "interval":
        aside = f' <span class="ci">{escape(p["interval"])}</span>' if p["interval"] else ""
        return f"{escape(p['value'])}{aside}"
    if kind == "reason_badge":
        return (f'<span title="{escape(p["reason"])}">{badge_html(p["css"], p["label"])}</span>'
                f'<div class="note">{escape(p["reason"])}</div>')
    if kind == "note":
        title = f' title="{escape(p["title"])}"' if p["title"] else ""
        return f'<div class="{escape(p["css"])}"{title}>{escape(p["text"])}</div>'
    return ""


def _cell(c: Mapping[str, Any]) -> str:
    if c["colspan"]:
        head = f'<td colspan="{escape(c["colspan"])}"{_attrs(c["css"])}>'
    else:
        head = f"<td{_attrs(c['css'], c['data'])}>"
    return head + "".join(_part(p) for p in c["parts"]) + "</td>"


def table_html(t: Mapping[str, Any]) -> Markup:
    """A :func:`costlib_pipelines.report.cells.table` as HTML."""
    head = "".join(f"<th>{escape(h)}</th>" for h in t["headers"])
    body = "".join(f"<tr{_attrs('', r['data'])}>" + "".join(_cell(c) for c in r["cells"])
                   + "</tr>" for r in t["rows"])
    return Markup(f"<table{_attrs(t['css'])}><thead><tr>{head}</tr></thead><tbody>{body}"
                  "</tbody></table>")
