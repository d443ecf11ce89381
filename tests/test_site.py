"""The built site shows what the pages say: no prose swallowed as an HTML tag, no stray heading,
math served from the site itself.

Markdown passes ``<word ...>`` through as raw HTML, so an ASCII inner product such as
``<S theta, grad L>`` in prose becomes a strikethrough tag that hides the text after it, and a
line starting with ``#`` becomes a heading. ``mkdocs build --strict`` reports neither. This test
builds the site once and checks, for every page of ``docs/`` (the API pages aside):

* every tag inside the page's content is one that markdown and its extensions write, with
  attributes they write (a tag such as ``<u * v, f(x)>`` fails: ``u`` is not written by them);
* the headings of the built page are the ``#`` heading lines of its source, level by level
  (outside code fences), plus the title heading the theme adds to a page without one;
* pages with math load MathJax from the site (``assets/mathjax/``), and no page loads a script
  from another host.
"""

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if p.relative_to(DOCS).parts[0] != "api")

#: tags markdown, its extensions (tables, admonition, superfences, arithmatex, toc) and the pages'
#: own HTML (images, comments) write into a page's content
TAGS = {"a", "p", "h1", "h2", "h3", "h4", "h5", "h6", "code", "pre", "span", "div", "em",
        "strong", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "img", "br",
        "hr", "blockquote", "sup", "sub", "details", "summary", "figure", "figcaption", "dl",
        "dt", "dd", "kbd", "button", "nav", "label", "input"}
ATTRS = {"href", "src", "alt", "title", "class", "id", "style", "align", "width", "height",
         "name", "type", "for", "checked", "open", "loading", "data-md-color-scheme",
         "tabindex", "aria-label"}


class _Content(HTMLParser):
    """Start tags and headings inside ``<article>``, and the src of every script."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.tags = []
        self.headings = []
        self.scripts = []

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self.scripts.append(dict(attrs).get("src"))
        if tag == "article":
            self.depth += 1
            return
        if self.depth:
            self.tags.append((tag, [a for a, _ in attrs]))
            if re.fullmatch(r"h[1-6]", tag):
                self.headings.append(int(tag[1]))

    def handle_endtag(self, tag):
        if tag == "article" and self.depth:
            self.depth -= 1


def source_headings(text):
    """Levels of the ATX heading lines (``# Title``) of a markdown source, fences skipped."""
    text = re.sub(r"^(```|~~~).*?^\1[ \t]*$", "", text, flags=re.M | re.S)
    return [len(m.group(1)) for m in re.finditer(r"^(#{1,6})[ \t]+\S", text, re.M)]


def problems(page, html):
    """What is wrong with the built ``html`` of the source ``page``: a list of sentences."""
    parser = _Content()
    parser.feed(html)
    out = []
    for tag, attrs in parser.tags:
        odd = [a for a in attrs if a not in ATTRS and not a.startswith(("data-", "aria-"))]
        if tag not in TAGS or odd:
            out.append(f"text taken for an HTML tag <{tag} {' '.join(attrs)}>: write "
                       "inner products and comparisons as math ($\\langle a, b\\rangle$), in "
                       "backticks, or with &lt;")
    # the home page is README.md, included
    want = source_headings(page.read_text().replace('--8<-- "README.md"',
                                                    (ROOT / "README.md").read_text()))
    got = parser.headings
    if got != want and not (got[:1] == [1] and 1 not in want and got[1:] == want):
        out.append(f"headings {got} in the site but {want} in the source: a line starting "
                   "with # that is not meant as a heading (put it in backticks or math)")
    foreign = [s for s in parser.scripts if s and re.match(r"(https?:)?//", s)]
    if foreign:
        out.append(f"scripts from another host: {foreign}")
    if 'class="arithmatex"' in html and not any(
            s and "assets/mathjax/tex-chtml.js" in s for s in parser.scripts):
        out.append("math on the page but MathJax not loaded from assets/mathjax/")
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d",
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def built(site, page):
    rel = page.relative_to(DOCS).with_suffix("")
    html = site / (rel.parent if rel.name == "index" else rel) / "index.html"
    return html.read_text()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_renders_as_written(site, page):
    bad = problems(page, built(site, page))
    assert not bad, f"{page.relative_to(ROOT)}: " + "; ".join(bad)


def test_mathjax_is_served_by_the_site(site):
    assert (site / "assets" / "mathjax" / "tex-chtml.js").stat().st_size > 100_000
    fonts = list((site / "assets" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2")
                 .glob("*.woff"))
    assert len(fonts) > 10
    assert 'class="arithmatex"' in built(site, DOCS / "flows.md")


def test_api_pages_show_cross_references_without_their_role_text(site):
    import re

    pages = sorted((site / "api").glob("*/index.html"))
    assert len(pages) == len(list((DOCS / "api").glob("*.md")))
    raw = {p.parent.name: len(re.findall(r":(?:func|class|mod|meth|attr|exc):<code>",
                                         p.read_text())) for p in pages}
    assert sum(raw.values()) == 0, {k: v for k, v in raw.items() if v}
    assert "<code>blocks_of</code> builds both" in (site / "api" / "symmetry" /
                                                    "index.html").read_text()


def test_the_check_catches_swallowed_text_and_stray_headings(tmp_path):
    """The checks above fail on the two ways a page breaks: planted in a copy of flows.md and
    rendered by the same markdown configuration as the site."""
    import markdown
    import yaml

    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    exts, configs = [], {}
    for item in config["markdown_extensions"]:
        name, opts = (next(iter(item.items())) if isinstance(item, dict) else (item, None))
        if name == "pymdownx.snippets":
            continue
        exts.append(name)
        if opts:
            configs[name] = {k: (v == "true" if v in ("true", "false") else v)
                             for k, v in opts.items()}
    md = markdown.Markdown(extensions=exts, extension_configs=configs)
    text = (DOCS / "flows.md").read_text()

    def render(source):
        page = tmp_path / "page.md"
        page.write_text(source)
        html = md.reset().convert(source)
        return problems(page, f'<script src="assets/mathjax/tex-chtml.js"></script>'
                              f"<article>{html}</article>")

    assert render(text) == []
    planted = text.replace("## Conserved quantities",
                           "## Conserved quantities\n\nthe fit y = <u * v, f(x)> of the model\n", 1)
    assert any("<u " in p for p in render(planted))
    stray = text + "\n#{s_i > tol} singular values count\n"
    assert any("headings" in p for p in render(stray))
