"""Every Python and shell block of the README and docs/ runs as written, and the site's API
reference covers every public module.

Blocks are fenced with a language. ``python`` blocks run as scripts; ``bash``/``sh`` blocks run
line by line, ``console`` blocks run their ``$ `` lines (continued on the next line after a
trailing backslash; an example whose shown output starts with ``Error:`` must exit with code 2
and print that error). A ``toml``/``ini`` block whose first
line is a comment ``# NAME`` is written to the file NAME for the blocks after it. The blocks of a
page run in order in one temporary directory (with ``examples/`` linked in and
``PARAMGEO_HOME`` inside it); ``paramgeo`` commands run in-process through click's CliRunner,
other commands through bash with this venv first on PATH.

Shown output is the code's output, checked whole: a ``text`` block right after a ``python`` block
(nothing but blank lines between) is that block's printed output, and the lines after a ``$ ``
line of a ``console`` block are that command's output; each must equal what the code prints,
line for line, where a line ``...`` stands for any number of lines and a line ending in ``...``
for the rest of a line (:func:`matches_output`).
So a page whose shown output drifts from the code fails here.

A block that cannot run in a test is preceded by ``<!-- no-test: REASON -->``; the opt-outs are
counted and each needs a reason (:func:`test_opt_outs_are_few_and_justified`).

Covers: ``paramgeo.cli``, ``paramgeo.contract.registry``.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").rglob("*.md")
                                      if "api" not in p.relative_to(ROOT / "docs").parts)
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
NO_TEST = re.compile(r"<!--\s*no-test:\s*(.*?)\s*-->\s*$")
RUN = {"python", "bash", "sh", "console"}
FILE_KINDS = {"toml", "ini"}
#: fenced blocks that are neither run nor written: output, diagrams, formats
SHOWN = {"text", "json"}
#: the most blocks the docs may exempt (each with its reason)
MAX_OPT_OUTS = 10
SHELL_CHARS = set("|&;<>()$`*")
#: pages whose shown outputs are not yet compared with the code's (each with its reason)
OUTPUT_UNCHECKED: dict[str, str] = {}


def blocks(page):
    """(language, code, opt-out reason or None, line number) of each fenced block of ``page``."""
    return [block[:4] for block in _blocks(page)]


def _blocks(page):
    """As :func:`blocks`, with a fifth entry: whether only blank lines separate the block from
    the one before it (a ``text`` block so placed after a ``python`` block is its output)."""
    text = page.read_text()
    out, end = [], None
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = NO_TEST.search(before)
        adjacent = end is not None and not text[end:match.start()].strip()
        out.append((match.group(1), match.group(2), reason.group(1) if reason else None,
                    text.count("\n", 0, match.start()) + 1, adjacent))
        end = match.end()
    return out


def matches_output(shown, output):
    """Whether the shown output (a docs block) is the printed ``output`` whole: line for line
    (trailing spaces aside), where a shown line ``...`` stands for any number of lines and a
    line ending in ``...`` for any line that starts with the text before it."""
    def line_pattern(line):
        line = line.rstrip()
        if line.strip() == "...":
            return r"(?:[^\n]*\n)*?"
        if line.endswith("..."):
            return re.escape(line[:-3].rstrip()) + r"[^\n]*\n"
        return re.escape(line) + r"[ \t]*\n"

    pattern = "".join(line_pattern(line) for line in shown.strip("\n").splitlines())
    text = "\n".join(line.rstrip() for line in output.strip("\n").splitlines()) + "\n"
    return re.fullmatch(pattern, text) is not None


def _check_shown(shown, output, where, what, drifts):
    """Record in ``drifts`` a shown output that is not the code's."""
    if not matches_output(shown, output):
        drifts.append(f"{where}: the output shown for {what} is not the code's; the code "
                      f"prints:\n{output}\n(shown:\n{shown})")


def _rel(page):
    return str(page.relative_to(ROOT))


def test_every_fenced_block_has_a_known_language():
    """An unlabeled fence would hide a shell block from this test: every block says what it is."""
    bad = [f"{_rel(page)}:{line} ({lang or 'no language'})"
           for page in PAGES for lang, _, _, line in blocks(page)
           if lang not in RUN | FILE_KINDS | SHOWN]
    assert not bad, f"label these fences (python, bash, console, toml, ini, text, json): {bad}"


def test_no_indented_command_examples():
    """Examples are fenced (so they run here), not indented code blocks."""
    bad = [f"{_rel(page)}:{i + 1}" for page in PAGES
           for i, line in enumerate(page.read_text().splitlines())
           if re.match(r"^ {4}(\$ |>>> )", line)]
    assert not bad, f"fence these examples as ```console or ```python blocks: {bad}"


def test_opt_outs_are_few_and_justified():
    outs = [(f"{_rel(page)}:{line}", reason) for page in PAGES
            for _, _, reason, line in blocks(page) if reason is not None]
    assert all(len(reason) > 15 for _, reason in outs), outs
    assert len(outs) <= MAX_OPT_OUTS, outs
    runnable = sum(lang in RUN for page in PAGES for lang, _, _, _ in blocks(page))
    assert runnable >= 3 * len(outs)


class _Session:
    """One page's blocks, run in order in ``tmp``."""

    def __init__(self, tmp, monkeypatch):
        from paramgeo.contract import registry

        self.tmp = tmp
        self.drifts = []
        # what a page registers in this process (--plugin, define) is forgotten after it
        monkeypatch.setattr(registry, "_registered", dict(registry._registered))
        monkeypatch.setattr(registry, "_sources", dict(registry._sources))
        (tmp / "examples").symlink_to(ROOT / "examples")
        monkeypatch.chdir(tmp)
        monkeypatch.setenv("PARAMGEO_HOME", str(tmp / "home"))
        monkeypatch.setenv("MPLBACKEND", "Agg")
        # one intra-op thread for torch (docs/own-model.md): on 2 shared cores its threads
        # spin against each other and make a small backward pass 25x slower
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}"
                                   f"{os.environ.get('PATH', '')}")

    def command(self, line, expect_error=None, where=""):
        """Run one command line; its printed output."""
        args = shlex.split(line, comments=True)
        if not args:
            return ""
        if args[0] == "paramgeo" and not SHELL_CHARS & set(line.split("#")[0]):
            from paramgeo.cli import main

            res = CliRunner().invoke(main, args[1:], prog_name="paramgeo")
            code, output = res.exit_code, res.output
            if res.exception is not None and not isinstance(res.exception, SystemExit):
                raise res.exception
        else:
            proc = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=self.tmp,
                                  capture_output=True, text=True, timeout=300)
            code, output = proc.returncode, proc.stdout + proc.stderr
        if expect_error is None:
            assert code == 0, f"{where}: `{line}` exited {code}:\n{output}"
        else:
            assert code == 2, f"{where}: `{line}` should fail with exit 2, got {code}:\n{output}"
            assert expect_error in output, f"{where}: `{line}` printed\n{output}"
        return output

    def run(self, lang, code, where):
        if lang in FILE_KINDS:
            first = code.splitlines()[0] if code.strip() else ""
            name = re.fullmatch(r"#\s*([\w.-]+\.\w+)\s*", first)
            if name:
                (self.tmp / name.group(1)).write_text(code)
        elif lang == "python":
            proc = subprocess.run([sys.executable, "-c", code], cwd=self.tmp,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"{where}: python block failed:\n{proc.stderr}"
            return proc.stdout
        elif lang in ("bash", "sh"):
            for line in _logical_lines(code):
                self.command(line, where=where)
        elif lang == "console":
            for command, shown in console_commands(code):
                error = None
                if shown and shown[0].startswith("Error:"):
                    error = shown[0].split("...")[0].rstrip(" (")
                output = self.command(command, expect_error=error, where=where)
                if shown and error is None:
                    _check_shown("\n".join(shown), output, where, f"`{command}`", self.drifts)


def console_commands(code):
    """(command, shown output lines) of each ``$ `` line of a console block; a command whose
    line ends in a backslash continues on the next line (as in a shell: backslash and newline
    are dropped)."""
    out, lines, i = [], code.splitlines(), 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        command = lines[i][2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + lines[i]
        rest = lines[i + 1:]
        shown = rest[:next((j for j, r in enumerate(rest) if r.startswith("$ ")), len(rest))]
        out.append((command, shown))
        i += 1 + len(shown)
    return out


def _logical_lines(code):
    """Lines of a shell block, with backslash continuations joined."""
    out, cur = [], ""
    for line in code.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    return [line for line in out if line.strip()]


@pytest.mark.parametrize("page", [p for p in PAGES
                                  if any(lang in RUN and reason is None
                                         for lang, _, reason, _ in blocks(p))],
                         ids=lambda p: _rel(p))
def test_page_blocks_run(page, tmp_path, monkeypatch):
    session = _Session(tmp_path, monkeypatch)
    ran, out, last = 0, None, None
    checked = _rel(page) not in OUTPUT_UNCHECKED
    for lang, code, reason, line, adjacent in _blocks(page):
        if lang == "text" and adjacent and last == "python" and out is not None:
            _check_shown(code, out, f"{_rel(page)}:{line}", "the python block above it",
                         session.drifts)
        last, out = lang, None
        if reason is not None:
            continue
        out = session.run(lang, code, f"{_rel(page)}:{line}")
        ran += lang in RUN
        if page.name == "README.md" and lang == "python":
            lines = out.splitlines()
            assert lines[:4] == ["7", "4", "O(2)", "True"]
            assert "critical (factor-rank)" in out and "U lost rank 1" in out
            assert "orbit-degenerate" not in out and "u_0**2 - v_0**2" in out
    assert ran
    assert not (checked and session.drifts), "\n\n".join(session.drifts)


# ------------------------------------------------------------------------- the site's API pages
def _public_modules():
    """The top level's public modules and folders (one API page each)."""
    pkg = ROOT / "paramgeo"
    names = {p.stem if p.is_file() else p.name for p in pkg.iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").is_file())
             and not p.name.startswith("_")}
    return sorted(names - {"cli"})  # the CLI is documented in docs/cli.md


def _rendered_through_package(folder, module):
    """Whether the folder's ``__init__`` re-exports from the module (then the folder's
    ``::: paramgeo.folder`` renders its public names)."""
    init = (ROOT / "paramgeo" / folder / "__init__.py").read_text()
    return re.search(rf"^from \.{module} import", init, re.M) is not None


def test_every_public_module_has_an_api_page():
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [m for m in _public_modules()
               if f"api/{m}.md" not in nav
               or f"::: paramgeo.{m}" not in (ROOT / "docs" / "api" / f"{m}.md").read_text()]
    assert not missing, f"add docs/api/NAME.md with `::: paramgeo.NAME` and its nav entry: " \
                        f"{missing}"
    pages = {p.stem for p in (ROOT / "docs" / "api").glob("*.md")}
    assert pages == set(_public_modules()) | {"paramgeo"}
    # every public module of a folder is rendered: on its folder's page, or through the
    # folder's __init__ re-exporting it
    unrendered = []
    for folder in _public_modules():
        if not (ROOT / "paramgeo" / folder).is_dir():
            continue
        page = (ROOT / "docs" / "api" / f"{folder}.md").read_text()
        for module in sorted((ROOT / "paramgeo" / folder).glob("[!_]*.py")):
            name = f"paramgeo.{folder}.{module.stem}"
            if f"::: {name}\n" not in page + "\n" and not _rendered_through_package(
                    folder, module.stem):
                unrendered.append(name)
    assert not unrendered, f"add `::: NAME` to the folder's API page: {unrendered}"


def test_shown_output_is_matched_whole():
    """The comparison of shown and printed output: elisions stand for what they say and no
    more; a changed word, a missing line or an extra line is a drift."""
    out = "header: critical (orbit-degenerate, factor-rank)\n  rank 22\n  tol 1e-08; gap 5\n"
    assert matches_output("header: critical (orbit-degenerate, factor-rank)\n...\n", out)
    assert matches_output("header: critical ...\n  rank 22\n  tol 1e-08; ...", out)
    assert matches_output(out + "\n\n", out.replace("\n", "  \n"))
    assert not matches_output("header: critical (orbit-degenerate)\n...", out)
    assert not matches_output("header: critical (orbit-degenerate, factor-rank)\n  rank 22",
                              out)
    assert not matches_output(out + "  rank 23\n", out)
    assert not matches_output("...\n  rank 21\n...", out)


#: the widest code line the site's code box shows without scrolling (about 88-90 characters)
CODE_WIDTH = 90
#: pages whose code lines are not yet held to CODE_WIDTH (each with its reason)
WIDTH_UNCHECKED: dict[str, str] = {}


def test_code_lines_fit_the_code_box():
    """Python, shell and file lines, and the commands of console blocks (continued with a
    trailing backslash), fit in CODE_WIDTH characters: expected values go on a comment line of
    their own. The output lines of console blocks are the code's and may be wider."""
    wide = [f"{_rel(page)}:{line + 1 + i} ({len(text)} characters)"
            for page in PAGES if _rel(page) not in WIDTH_UNCHECKED
            for lang, code, _, line in blocks(page)
            for i, text in enumerate(code.splitlines())
            if len(text) > CODE_WIDTH and (lang in (RUN | FILE_KINDS) - {"console"}
                                           or lang == "console" and text.startswith("$ "))]
    assert not wide, f"wrap these code lines at {CODE_WIDTH} characters: {wide}"


def test_console_commands_continue_after_a_backslash():
    code = "$ paramgeo rank uut \\\n    -p d=4 -p r=2\nrank 7\n...\n$ ls\n"
    assert console_commands(code) == [("paramgeo rank uut     -p d=4 -p r=2", ["rank 7", "..."]),
                                      ("ls", [])]


def test_links_between_pages_reach_a_page():
    """Every relative markdown link to a page (``[text](page.md#anchor)``) names a file of
    docs/ (mkdocs --strict reports a missing one only on some setups)."""
    missing = []
    for page in sorted(ROOT.joinpath("docs").rglob("*.md")):
        for target in re.findall(r"\]\(([^)\s#:]+\.md)(?:#[^)]*)?\)", page.read_text()):
            if not (page.parent / target).resolve().is_file():
                missing.append(f"{_rel(page)} -> {target}")
    assert not missing, f"links to no page: {missing}"
