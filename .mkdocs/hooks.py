"""mkdocs hooks.

1. The docs link to files of the repository outside docs/ (the example scripts, sweep files);
   those that exist are copied into the site and the links pointed at the copies, so the pages
   render on GitHub and in the site alike. A link to a missing file is left as written, and
   `mkdocs build --strict` reports it.
2. Rendered math without a CDN: the MathJax 3 files the pages need (the tex-chtml component, its
   TeX extensions, fonts and menu) are copied into the site under assets/mathjax/ from the
   django-static-mathjax package (a plain copy of MathJax 3.2.2 on PyPI, Apache-2.0, no Django
   needed), which the docs extra installs; docs/javascripts/mathjax.js configures it for
   pymdownx.arithmatex.
3. Cross-reference roles of the docstrings (``:func:`name```, ``:class:``, ``:mod:``, ...),
   which mkdocstrings renders as the role's text followed by the name in code, are shown as the
   name in code alone, a link to the object's entry where the API reference documents it (the
   name read relative to the page's module, as an optional autorefs reference: mkdocs-autorefs
   resolves it once every page is rendered and leaves the code alone where no entry exists).
4. On the API pages, a docs page named in a docstring (``docs/learning-coefficients.md``) is a
   link to that page of the site. The docstrings themselves are shown character for character
   by the griffe extension .mkdocs/docstrings.py.
"""

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
PREFIX = "_repo/"
#: where the MathJax files go in the site, and which files of MathJax's es5/ directory are copied
MATHJAX = "assets/mathjax/"
MATHJAX_PARTS = ("tex-chtml.js", "input/tex/extensions", "output/chtml/fonts/woff-v2", "ui",
                 "a11y", "adaptors")
#: a docs page named in a docstring, alone in a code span or in the text
DOCS_PATH = r"docs/((?:[\w-]+/)*[\w-]+\.md)"
CHUNK = re.compile(r"(<pre\b.*?</pre>|<a\b.*?</a>|<code>.*?</code>)", re.S)
#: a docstring's cross-reference role as mkdocstrings renders it: ":func:<code>name</code>"
ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):<code>([^<]*)</code>")


def _outside(page_src, target):
    """The repository-relative path of ``target`` (a link on page ``page_src``, relative to
    docs/) when it leaves docs/ and names an existing file of the repository, else None."""
    if "://" in target or target.startswith(("#", "/")):
        return None
    path = posixpath.normpath(posixpath.join("docs", posixpath.dirname(page_src), target))
    if path.startswith(("docs/", "../")) or not (ROOT / path).is_file():
        return None
    return path


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == "index.md":
        # the home page is README.md (included here rather than by pymdownx.snippets, so that
        # its links, relative to the repository root, are rewritten below)
        markdown = markdown.replace('--8<-- "README.md"', (ROOT / "README.md").read_text())

    def rewrite(match):
        target = match.group(2)
        if page.file.src_uri == "index.md" and target.startswith("docs/"):
            # the home page includes README.md, whose links are relative to the repository root
            return f"{match.group(1)}{target[len('docs/'):]}{match.group(3)}"
        path = _outside(page.file.src_uri, target)
        if path is None:
            return match.group(0)
        uri = PREFIX + path
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(ROOT / path)))
        rel = posixpath.relpath(uri, posixpath.dirname(page.file.src_uri) or ".")
        return f"{match.group(1)}{rel}{match.group(3)}"

    return LINK.sub(rewrite, markdown)


def _mathjax_root():
    """MathJax's es5/ directory inside the installed django-static-mathjax package."""
    import importlib.util

    spec = importlib.util.find_spec("mathjax")
    root = (Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax" / "es5"
            if spec and spec.submodule_search_locations else None)
    if root is None or not (root / "tex-chtml.js").is_file():
        raise RuntimeError("the docs need MathJax from the django-static-mathjax package: "
                           "pip install -e '.[docs]'")
    return root


def on_files(files, config):
    root = _mathjax_root()
    for part in MATHJAX_PARTS:
        src = root / part
        for path in ([src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())):
            uri = MATHJAX + path.relative_to(root).as_posix()
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    license_ = root.parent / "LICENSE"
    files.append(File.generated(config, MATHJAX + "LICENSE", abs_src_path=str(license_)))
    return files


def _link_docs_paths(html, page, files):
    """``docs/NAME.md`` in the text or alone in a code span, as a link to the page NAME."""
    from mkdocs.utils import get_relative_url

    def link(match, inner):
        file = files.get_file_from_path(match.group(1))
        if file is None:
            return match.group(0)  # left as written: tests/test_site.py reports it
        return f'<a href="{get_relative_url(file.url, page.url)}">{inner}</a>'

    out = []
    for i, chunk in enumerate(CHUNK.split(html)):
        if i % 2 == 0:
            chunk = re.sub(r"(?<![\w/.-])" + DOCS_PATH, lambda m: link(m, m.group(0)), chunk)
        elif chunk.startswith("<code>"):
            chunk = re.sub(rf"<code>{DOCS_PATH}</code>", lambda m: link(m, m.group(0)), chunk)
        out.append(chunk)
    return "".join(out)


def _reference(name, page):
    """The name of a role on an API page as an optional autorefs reference to its entry."""
    stem = posixpath.splitext(posixpath.basename(page.file.src_uri))[0]
    module = "paramgeo" if stem == "paramgeo" else f"paramgeo.{stem}"
    target = name.lstrip("~")
    if target.startswith("."):
        target = module + target
    elif not target.startswith("paramgeo"):
        target = f"{module}.{target}"
    return f'<autoref identifier="{target}" optional><code>{name}</code></autoref>'


def on_page_content(html, page, config, files):
    """Drop the role text before a cross-referenced name, link docs pages named on the API
    pages (items 3 and 4 of the module docstring)."""
    if not page.file.src_uri.startswith("api/"):
        return ROLE.sub(r"<code>\1</code>", html)
    html = ROLE.sub(lambda m: _reference(m.group(1), page), html)
    return _link_docs_paths(html, page, files)
