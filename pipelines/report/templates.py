"""The Jinja2 environment of the report's templates (``templates/`` of this package).

The templates lay out what the Python modules compute (:mod:`.sections`, :mod:`.group_section`,
:mod:`.capacity`, :mod:`.history`): they hold the page skeleton, the style sheets, the inline
script and every section's HTML. Two conventions:

- **Escaping**: autoescape is on, and every value a template prints is escaped as
  :func:`html.escape` (``quote=True``) does, so ``"`` becomes ``&quot;`` as the report has always
  written it; a value that is already HTML (``__html__``: a macro's output, or a
  :class:`~markupsafe.Markup` the Python side made from trusted pieces such as a PNG data URI)
  is printed as it is. A variable a template uses but the caller did not pass raises
  (:class:`~jinja2.StrictUndefined`).
- **Lines**: in ``*.html.j2`` templates a line break and the indentation after it are not
  output (:class:`JoinLines`), so templates can be indented by structure while the page stays
  as compact as before; text meant to be on one line of the page stays on one line of the
  template, and ``{{ "\\n" }}`` writes a line break. Style sheets and scripts (``*.css.j2``,
  ``*.js.j2``) are output as written.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from jinja2.ext import Extension

from costlib_pipelines.report.table_html import badge_html, escape, table_html

__all__ = ["JoinLines", "environment", "escape", "render"]

_BREAK = re.compile(r"\n[ \t]*")


class JoinLines(Extension):
    """Drops each line break and the indentation after it from ``*.html.j2`` sources."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        if name is not None and name.endswith(".html.j2"):
            return _BREAK.sub("", source)
        return source


@cache
def environment() -> Environment:
    """The environment: package loader, autoescape, StrictUndefined, :class:`JoinLines`, and
    the globals ``table_html`` and ``badge_html`` (:mod:`.table_html`) that the ``table`` and
    ``badge`` macros print."""
    env = Environment(
        loader=PackageLoader("costlib_pipelines.report", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html.j2",), default=True),
        undefined=StrictUndefined,
        finalize=escape,
        keep_trailing_newline=True,
        extensions=[JoinLines],
    )
    env.globals["table_html"] = table_html
    env.globals["badge_html"] = badge_html
    return env


def render(name: str, **context: Any) -> str:
    """The template ``name`` rendered with ``context``."""
    return environment().get_template(name).render(**context)
