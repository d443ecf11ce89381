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
   name in code alone.
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
#: a docstring's cross-reference role as mkdocstrings renders it: ":func:<code>"
ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):(?=<code>)")


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


def on_page_content(html, page, config, files):
    """Drop the role text before a cross-referenced name (item 3 of the module docstring)."""
    return ROLE.sub("", html)
