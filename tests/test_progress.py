"""Progress with elapsed time and ETA: the CLI's --progress (a bar on a terminal, plain lines in
a pipe, nothing in a pipe unless asked), and the long engines' progress= in Python (shown by
default only in an interactive session).

Covers: ``paramgeo.cli``, ``paramgeo.critical.classification``, ``paramgeo.geometry.jacobian``,
``paramgeo.io.progress``, ``paramgeo_plugins.uut``.
"""

import io
import re

import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo.io import progress as pg
from paramgeo.cli import main

ETA_LINE = re.compile(r"^(rank|critical): (\d+)/(\d+) \(\d+%\), elapsed [\d.]+ s, ETA (\d+|\?) s?$")


@pytest.mark.parametrize("command", ["rank", "critical", "describe", "check"])
def test_cli_progress_prints_elapsed_and_eta_only_when_asked(command):
    """In a pipe (CliRunner's stderr is not a terminal) --progress prints plain lines with the
    elapsed time and the ETA, ending at total/total; without it nothing at all."""
    args = [command, *(("hadamard", "-p", "p=2") if command == "check" else
                       ("uut", "-p", "d=4", "-p", "r=2"))]
    asked = CliRunner().invoke(main, args + ["--progress"])
    assert asked.exit_code == 0, asked.output
    lines = [line for line in asked.stderr.splitlines() if "elapsed" in line]
    assert lines and all(", ETA " in line for line in lines)
    done, total = re.search(r": (\d+)/(\d+) ", lines[-1]).groups()
    assert done == total  # the last line is the finished state
    if command in ("rank", "critical"):
        assert all(ETA_LINE.match(line) for line in lines), lines
    quiet = CliRunner().invoke(main, args)
    assert quiet.exit_code == 0 and "elapsed" not in quiet.stderr and "ETA" not in quiet.stderr
    assert quiet.stdout == asked.stdout  # progress changes nothing else


def test_eta_is_the_linear_extrapolation(monkeypatch):
    """ETA = elapsed (total - done) / done, by a clock under the test's control; the live line
    (terminal, notebook) redraws in place with a bar and ends with a newline."""
    now = [100.0]
    monkeypatch.setattr(pg.time, "monotonic", lambda: now[0])
    out = io.StringIO()
    shown = pg.Display("work", out, live=True)
    now[0] = 104.0
    shown(2, 10)
    assert shown.eta() == pytest.approx(4.0 * 8 / 2)
    assert "\r" in out.getvalue() and "[####----------------]" in out.getvalue()
    assert "elapsed 0:04  ETA 0:16" in out.getvalue()
    now[0] = 110.0
    shown(10, 10)
    shown.close()
    assert out.getvalue().endswith("ETA 0:00\n")
    plain = io.StringIO()
    lines = pg.Display("work", plain, live=False)
    now[0] += 3.0
    lines(1, 4)
    assert plain.getvalue() == "work: 1/4 (25%), elapsed 3.0 s, ETA 9 s\n"
    assert pg.clock(3723) == "1:02:03" and pg.clock(float("inf")) == "?"


def test_auto_shows_only_in_an_interactive_session_and_not_nested(monkeypatch):
    with pg.reporting("auto", "x") as update:
        assert update is None  # pytest is no interactive session
    monkeypatch.setattr(pg, "interactive", lambda: True)
    with pg.reporting("auto", "x") as update:
        assert isinstance(update, pg.Display) and update.delay == pg.AUTO_DELAY
        with pg.reporting("auto", "inner") as inner:
            assert inner is None  # one display at a time
    with pg.reporting(None, "x") as update:
        assert update is None
    calls = []
    with pg.reporting(lambda d, t: calls.append((d, t)), "x") as update:
        update(1, 2)
    assert calls == [(1, 2)]
    with pytest.raises(paramgeo.ParamgeoError, match="progress='yes'"):
        with pg.reporting("yes", "x"):
            pass


def test_engines_take_progress_and_give_the_same_result(capsys):
    """generic_rank_decision (a long engine: progress="auto" by default) with progress=True
    shows plain lines on stderr and decides the same rank; classify reports its five stages."""
    from paramgeo.critical import classify
    from paramgeo.geometry import generic_rank_decision

    param = paramgeo.get("uut", d=4, r=2)
    quiet = generic_rank_decision(param, progress=None).rank
    assert generic_rank_decision(param, progress=True).rank == quiet == 7
    err = capsys.readouterr().err
    assert "generic rank (random points): 3/3 (100%), elapsed" in err
    calls = []
    theta = param.random_point(np.random.default_rng(0))
    loud = classify(param, theta, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (5, 5) and [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert loud.to_dict() == classify(param, theta).to_dict()
