"""mkdocs hook: the docs link to files of the repository outside docs/ (the figures under
examples/output/ that the example scripts write); those that exist are copied into the site
and the links pointed at the copies, so the pages render on GitHub and in the site alike. A link
to a missing file is left as written, and `mkdocs build --strict` reports it."""

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
PREFIX = "_repo/"


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
    def rewrite(match):
        path = _outside(page.file.src_uri, match.group(2))
        if path is None:
            return match.group(0)
        uri = PREFIX + path
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(ROOT / path)))
        rel = posixpath.relpath(uri, posixpath.dirname(page.file.src_uri) or ".")
        return f"{match.group(1)}{rel}{match.group(3)}"

    return LINK.sub(rewrite, markdown)
