"""The tables of the report's view models: rows of cells, each cell a list of parts.

The Python side says what a cell holds (:func:`text`, :func:`badge`, :func:`interval`, ...); the
macros of ``templates/macros.html.j2`` lay it out (``table``, ``row``, ``cell``, ``part``). Every
value is text, escaped when the page is rendered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["Part", "badge", "cell", "indented", "interval", "link", "note", "reason_badge",
           "row", "table", "text"]

Part = dict[str, Any]


def text(value: Any) -> Part:
    """Plain text."""
    return {"kind": "text", "text": value}


def indented(value: Any) -> Part:
    """Text after two non-breaking spaces (a sub-row)."""
    return {"kind": "indented", "text": value}


def badge(status: str, label: str | None = None) -> Part:
    """A coloured status label (``status`` is its CSS class; label: the status in words)."""
    return {"kind": "badge", "css": status,
            "label": status.replace("_", " ") if label is None else label}


def reason_badge(status: str, reason: str) -> Part:
    """A status label with its reason as its title and below it."""
    return {**badge(status), "kind": "reason_badge", "reason": reason}


def link(value: Any, anchor: str | None) -> Part:
    """A link to ``#anchor`` (plain text when ``anchor`` is None)."""
    return {"kind": "link", "text": value, "anchor": anchor}


def interval(value: Any, bracket: str) -> Part:
    """A value with its interval (or another aside) in a muted span; none when empty."""
    return {"kind": "interval", "value": value, "interval": bracket}


def note(value: Any, css: str = "note", title: str = "") -> Part:
    """A ``div`` of small muted text (``title``: its tooltip)."""
    return {"kind": "note", "text": value, "css": css, "title": title}


def cell(*parts: Any, css: str = "", colspan: int | None = None, **data: Any
         ) -> dict[str, Any]:
    """A ``td`` of ``parts`` (anything else is :func:`text`), with ``class`` and ``data-*``
    attributes (underscores in names become dashes); ``colspan``: a cell across columns."""
    return {"parts": [p if isinstance(p, dict) else text(p) for p in parts], "css": css,
            "colspan": colspan, "data": data}


def row(cells: Iterable[dict[str, Any]], **data: Any) -> dict[str, Any]:
    """A ``tr`` of cells with ``data-*`` attributes."""
    return {"cells": list(cells), "data": data}


def table(headers: Sequence[str], rows: Sequence[dict[str, Any]], css: str = ""
          ) -> dict[str, Any]:
    """A table: header texts, rows, ``class``."""
    return {"headers": list(headers), "rows": list(rows), "css": css}
