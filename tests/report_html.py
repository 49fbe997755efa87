"""Parsing the HTML reports in tests: sections, table rows and images."""

from __future__ import annotations

from html.parser import HTMLParser


class ReportPage(HTMLParser):
    """Sections (``data-group`` -> ``data-status``, in page order), table rows (with their
    data-* attributes and each cell's attributes and text) and image sources."""

    def __init__(self):
        super().__init__()
        self.sections: dict[str, str | None] = {}
        self.rows: list[dict] = []
        self.images: list[str] = []
        self._cell: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section" and "data-group" in attrs:
            self.sections[attrs["data-group"]] = attrs.get("data-status")
        elif tag == "tr":
            self.rows.append({"attrs": attrs, "cells": []})
        elif tag == "td" and self.rows:
            self._cell = {"attrs": attrs, "text": ""}
            self.rows[-1]["cells"].append(self._cell)
        elif tag == "img":
            self.images.append(attrs["src"])

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data
