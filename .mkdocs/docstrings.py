"""A griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): docstrings shown as written.

The docstrings are plain text in the RST manner (``code`` in double backticks, ``w*`` and
``a * b`` as arithmetic, ``<a, b>`` as inner products), and mkdocstrings renders them as
markdown, where ``*`` and ``_`` pairs become emphasis and vanish (``L_n(w*) ... (w*)`` showed as
``L_n(w) ... (w)``) and ``<word ...>`` is taken for an HTML tag that swallows the text after
it. Before rendering, every ``*`` and ``_`` outside code is escaped and every ``<`` that would
open a tag is written as ``&lt;``, so the page shows the characters of the docstring. Code
spans, fenced and indented code blocks, links, URLs and the ``* `` of list items are left
alone. In the Google-style sections (``Args:``, ``Returns:``, ``Attributes:``, ...) the entry
names are kept as written (they become table cells) and ``Examples:`` sections (doctest code)
are not touched.
"""

import re

from griffe import Extension

#: what is kept as written: code spans, markdown links' targets, autolinks and bare URLs
_KEEP = re.compile(r"(`+)(?:(?!\n[ \t]*\n).)+?\1|\]\([^)\s]*\)|<https?://[^>\s]+>|https?://[^\s)>]+", re.S)
_TAG = re.compile(r"<(?=[A-Za-z/!?])")
#: a Google-style section heading, and an entry of a section ("    name (type): text")
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Attributes|Returns|Yields|Raises|Warns|"
                      r"Examples|Example|Other Parameters|Keyword Args):\s*$")
_ENTRY = re.compile(r"^( {4}\*{0,2}[\w.]+(?: \([^)]*\))?:)( .*)?$")


def _escape_text(text):
    """``text`` (no code) with its ``*`` and ``_`` escaped and tag-opening ``<`` as ``&lt;``;
    a ``* `` that starts a line stays a list item."""
    text = re.sub(r"(?<!\\)([*_])", r"\\\1", text)
    return _TAG.sub("&lt;", re.sub(r"(?m)^([ \t]*)\\\*(?= )", r"\1*", text))


def _escape_prose(text):
    """Escape the prose lines ``text`` outside their code spans (which may span lines)."""
    out, pos = [], 0
    for match in _KEEP.finditer(text):
        out.append(_escape_text(text[pos:match.start()]))
        out.append(match.group(0))
        pos = match.end()
    out.append(_escape_text(text[pos:]))
    return "".join(out)


def escape_docstring(text):
    """The markdown that shows the plain-text docstring ``text`` character for character."""
    out, prose, fence, code, blank, section = [], [], None, False, True, None

    def keep(line):
        if prose:
            out.append(_escape_prose("\n".join(prose)))
            prose.clear()
        out.append(line)

    for line in text.split("\n"):
        stripped = line.lstrip()
        heading = _SECTION.match(line)
        if heading:
            section, blank, code = heading.group(1), False, False
            keep(line)
            continue
        if section is not None and stripped and not line.startswith(" "):
            section = None  # a line back at the margin ends the section
        if section in ("Examples", "Example"):
            keep(line)
            continue
        entry = _ENTRY.match(line) if section is not None else None
        if entry:
            blank = code = False
            keep(entry.group(1) + _escape_prose(entry.group(2) or ""))
            continue
        if fence is not None:
            keep(line)
            if stripped.startswith(fence):
                fence = None
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            keep(line)
            continue
        # an indented code block: four spaces after a blank line, running until a line that
        # is neither indented nor blank
        indented = line.startswith("    ") and bool(stripped)
        code = indented and (blank or code) or (code and not stripped)
        blank = not stripped
        if code:
            keep(line)
        else:
            prose.append(line)
    keep(None)
    return "\n".join(out[:-1])


class PlainDocstrings(Extension):
    """Escape each docstring once, when griffe creates its object."""

    def on_instance(self, *, obj, **kwargs):
        doc = obj.docstring
        if doc is not None and not getattr(doc, "_escaped", False):
            doc.value = escape_docstring(doc.value)
            doc._escaped = True
