"""One HTML page helper for the lab's self-contained pages (``normlab report``'s and
``normlab inspect --html``'s): the page's skeleton with its style sheet inline, escaping, and a
plain table. A page references nothing outside itself: no scripts, fonts, style sheets or images
from the network."""

from __future__ import annotations

import html
from collections.abc import Iterable


def escape(text: object) -> str:
    """``text`` as HTML text (quotes escaped too: safe inside an attribute)."""
    return html.escape(str(text), quote=True)


def page(title: str, body: Iterable[str], *, css: str) -> str:
    """A whole page: the doctype, a head with the charset, the viewport, ``title`` (escaped)
    and ``css`` inline, then ``body``'s parts (HTML), one per line."""
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8" />',
        '<meta name="viewport" content="width=device-width, initial-scale=1" />',
        f"<title>{escape(title)}</title>",
        f"<style>{css}</style>",
        "</head>",
        "<body>",
        *body,
        "</body>",
        "</html>",
        "",
    ])


def table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """A table: ``head``'s cells escaped, ``rows``' cells as given (HTML)."""
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{escape(cls)}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'
