"""Every Python and shell block of the README and docs/ runs as written, and the site's API
reference covers every public module.

Blocks are fenced with a language. ``python`` blocks run as scripts; ``bash``/``sh`` blocks run
line by line, ``console`` blocks run their ``$ `` lines (an example whose shown output starts
with ``Error:`` must exit with code 2 and print that error). A ``toml``/``ini`` block whose first
line is a comment ``# NAME`` is written to the file NAME for the blocks after it. The blocks of a
page run in order in one temporary directory (with ``examples/`` linked in and
``PARAMGEO_HOME`` inside it); ``paramgeo`` commands run in-process through click's CliRunner,
other commands through bash with this venv first on PATH.

A block that cannot run in a test is preceded by ``<!-- no-test: REASON -->``; the opt-outs are
counted and each needs a reason (:func:`test_opt_outs_are_few_and_justified`).
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


def blocks(page):
    """(language, code, opt-out reason or None, line number) of each fenced block of ``page``."""
    text = page.read_text()
    out = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = NO_TEST.search(before)
        out.append((match.group(1), match.group(2), reason.group(1) if reason else None,
                    text.count("\n", 0, match.start()) + 1))
    return out


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
        args = shlex.split(line, comments=True)
        if not args:
            return
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
            lines = code.splitlines()
            for i, line in enumerate(lines):
                if not line.startswith("$ "):
                    continue
                shown = lines[i + 1] if i + 1 < len(lines) else ""
                error = None
                if shown.startswith("Error:"):
                    error = shown.split("...")[0].rstrip(" (")
                self.command(line[2:], expect_error=error, where=where)


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
    ran = 0
    for lang, code, reason, line in blocks(page):
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
