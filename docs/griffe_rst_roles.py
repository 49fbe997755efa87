"""Griffe extension for the API reference: numpydoc docstrings written with Sphinx roles.

costlib's docstrings use reStructuredText roles (``:func:`x```, ``:math:`x```) and
``.. math::`` blocks. Markdown shows those literally, so before mkdocstrings renders a
docstring this extension rewrites them: cross-reference roles become inline code (the last
dotted component when written with ``~``), ``:math:`` becomes inline math and ``.. math::``
blocks become display math (``pymdownx.arithmatex``), and RST double backticks become single
ones. Used only by the docs build (mkdocs.yml); the docstrings stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|obj|exc):`(~?)([^`]+)`")
_MATH_ROLE = re.compile(r":math:`([^`]+)`")
_MATH_BLOCK = re.compile(r"^(?P<indent>[ \t]*)\.\. math::[ \t]*(?P<first>.*)$")


def _role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def _math_blocks(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _MATH_BLOCK.match(lines[i])
        if match is None:
            out.append(lines[i])
            i += 1
            continue
        indent = match["indent"]
        body = [match["first"].strip()] if match["first"].strip() else []
        i += 1
        while i < len(lines) and (not lines[i].strip() or
                                  len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
            if not lines[i].strip() and body:
                break
            if lines[i].strip():
                body.append(lines[i].strip())
            i += 1
        out.extend([f"{indent}$$", *(indent + b for b in body), f"{indent}$$"])
    return "\n".join(out)


def rst_to_markdown(text: str) -> str:
    """The docstring with Sphinx roles and math directives in Markdown form."""
    text = _math_blocks(text)
    text = _MATH_ROLE.sub(lambda m: f"${m.group(1)}$", text)
    text = _ROLE.sub(_role, text)
    return re.sub(r"``([^`]+)``", r"`\1`", text)


class RstRoles(griffe.Extension):
    """Rewrite every docstring once, when griffe loads the object."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rst_to_markdown(obj.docstring.value)
