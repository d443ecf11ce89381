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

Covers: the built site (``docs/``, ``.mkdocs/hooks.py``, ``.mkdocs/docstrings.py``).
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
    """The site, built once per session (skipped where the docs extra is not installed)."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
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
    symmetry = (site / "api" / "symmetry" / "index.html").read_text()
    assert re.search(r"<code>blocks_of</code>(</a>)? builds both", symmetry)
    # roles whose target has an entry in the API reference are links to it
    links = sum(p.read_text().count('class="autorefs autorefs-internal"') for p in pages)
    assert links > 300, links
    assert re.search(r'href="#paramgeo\.llc\.reduced_rank_regression"><code>'
                     r'reduced_rank_regression</code></a>',
                     (site / "api" / "llc" / "index.html").read_text())


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


# --------------------------------------------------------------------------- the API pages
def _text(html):
    """The visible text of an HTML fragment, whitespace collapsed."""
    import html as html_lib

    html = re.sub(r"</?(?:p|li|ul|ol|div|h\d|br|tr|td|th|pre|table)\b[^>]*>", " ", html)
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", "", html)).split())


def _documented(page_html, module):
    """The objects mkdocstrings rendered on an API page: the module and each heading's id."""
    import importlib

    out = [importlib.import_module(module)]
    for ident in re.findall(r'<h\d id="(paramgeo\.[\w.]+)" class="doc doc-heading"', page_html):
        obj = importlib.import_module(module)
        try:
            for part in ident[len(module) + 1:].split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        if callable(obj) or isinstance(obj, type):
            out.append(obj)
    return out


#: a Google-style section heading of a docstring (rendered as a table or a code block)
SECTION = re.compile(r"^(Args|Arguments|Returns|Raises|Attributes|Examples|Example|Yields):\s*$")


def _prose(doc):
    """The docstring as the page shows it in prose: the ``Examples:`` sections (rendered as code
    blocks) dropped, and the entry names of the other sections without their colon (rendered
    as table cells)."""
    lines, skipping = [], False
    for line in doc.splitlines():
        heading = SECTION.match(line.strip()) if not line.startswith("        ") else None
        if heading:
            skipping = False
            continue
        if skipping and line.strip() and not line.startswith(" "):
            skipping = False
        if skipping:
            continue
        lines.append(re.sub(r"^(\s{4})(\*{0,2}\w+)( \([^)]*\))?:(\s|$)", r"\1\2\4", line))
    return "\n".join(lines)


def _marked_words(doc):
    """The words of a docstring that hold ``*`` or ``_`` (markdown's emphasis characters), as
    the page shows them: roles and backticks dropped, trailing punctuation kept."""
    words = []
    for word in _prose(doc).split():
        word = re.sub(r":(?:py:)?\w+:(?=`)", "", word).replace("`", "").lstrip("~")
        if ("*" in word or "_" in word) and word.strip("*_"):
            words.append(word)
    return words


def api_problems(site):
    """Per API page: docstring words with ``*``/``_`` missing from the rendered text (a lost
    asterisk), raw cross-reference roles, docs paths that are not links, and autorefs left
    unresolved."""
    import inspect

    out = {}
    for md in sorted((DOCS / "api").glob("*.md")):
        module = re.search(r"^::: (paramgeo[\w.]*)", md.read_text(), re.M).group(1)
        html = (site / "api" / md.stem / "index.html").read_text()
        article = html[html.index("<article"):html.index("</article>")]
        text = _text(article)
        lost = sorted({w for obj in _documented(article, module)
                       for w in _marked_words(inspect.cleandoc(obj.__doc__ or ""))
                       if w not in text})
        roles = re.findall(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):`?\w*",
                           text)
        unlinked = [m.group(0) for m in re.finditer(r"(?<![\w/.-])docs/[\w/-]+\.md",
                                                    re.sub(r"<a\b.*?</a>|<pre\b.*?</pre>", "",
                                                           article, flags=re.S))]
        unlinked = [u for u in unlinked if f"<code>{u}</code>" in article or u in text]
        autorefs = re.findall(r"<autoref\b[^>]*>|\]\[[\w.]+\]", article)
        found = {"lost": lost, "roles": roles, "unlinked": unlinked, "autorefs": autorefs}
        if any(found.values()):
            out[md.stem] = {k: v for k, v in found.items() if v}
    return out


def test_api_pages_show_docstrings_as_written_and_resolve_references(site):
    """0 lost asterisks (every docstring word holding ``*`` or ``_`` is in the page's text), 0
    raw roles, 0 docs paths left as text, 0 unresolved autorefs, over every API page."""
    assert api_problems(site) == {}
    llc = _text((site / "api" / "llc" / "index.html").read_text())
    assert "L_n(w*)" in llc and "L_n(w_t) - L_n(w*))" in llc


def test_the_docstring_escape_keeps_what_markdown_would_eat():
    """The griffe extension (.mkdocs/docstrings.py) against plain markdown: the text that lost
    its asterisks and a tag-like inner product without it keeps them with it, code untouched."""
    import importlib.util

    import markdown

    spec = importlib.util.spec_from_file_location("docstrings", ROOT / ".mkdocs" /
                                                  "docstrings.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    doc = ("E[L_n(w)] - L_n(w*) over n*beta (w*, __init__) and <S theta, g>.\n\n"
           "``a*b*c`` stays, [a_b](https://x.org/a_b*c) too\n\n    x = a*b  # code\n")
    words = ["L_n(w*)", "n*beta", "(w*,", "__init__)", "<S", "a*b*c"]
    plain = _text(markdown.markdown(doc))
    assert any(w not in plain for w in words)
    shown = markdown.markdown(ext.escape_docstring(doc))
    assert all(w in _text(shown) for w in words), _text(shown)
    assert "<code>x = a*b  # code" in shown and 'href="https://x.org/a_b*c"' in shown
    listed = markdown.markdown(ext.escape_docstring("Rules:\n\n* ``a``: w*\n* b_i and c_i\n"))
    assert listed.count("<li>") == 2 and "w*" in listed and "b_i and c_i" in listed
    assert ext.escape_docstring(ext.escape_docstring(doc)) != doc  # applied once per object


def test_console_blocks_copy_without_the_prompt(site):
    """Every ``$ `` prompt of a console block is a Pygments prompt span, which the site's
    stylesheet keeps out of the copy button's text and of a mouse selection."""
    css = (site / "stylesheets" / "extra.css").read_text()
    assert re.search(r"code\[data-md-copying\] \.gp[^{]*\{\s*display: none", css)
    assert "user-select: none" in css
    shown = 0
    for page in PAGES:
        source = page.read_text().replace('--8<-- "README.md"', (ROOT / "README.md").read_text())
        prompts = sum(line.startswith("$ ") for block in
                      re.findall(r"^```console\n(.*?)^```", source, re.M | re.S)
                      for line in block.splitlines())
        html = built(site, page)
        assert html.count('<span class="gp">$ </span>') == prompts, page.name
        if prompts:
            assert "stylesheets/extra.css" in html
        shown += prompts
    assert shown > 50
