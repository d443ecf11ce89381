"""The one progress display of paramgeo: elapsed time and an estimate of the time left (ETA),
on stderr, for the command line and for the long engines called from Python.

An engine takes ``progress``: a callable ``progress(done, total)`` (called with the cumulative
number of units done out of ``total``), ``True`` (show this display), ``False`` or ``None``
(nothing), or ``"auto"`` (the default of the long engines: show it in an interactive session,
a notebook or a Python prompt on a terminal, and not in scripts, pipes or inside another
display). ``reporting`` turns that value into the callable the engine calls.

On a terminal or in a notebook the display is one line rewritten in place::

    llc estimate  [########------------]  40% 4/10  elapsed 0:12  ETA 0:18

elsewhere (stderr a file or a pipe, when asked for) it prints plain lines, at most one every
few seconds and the last one at the end::

    llc estimate: 4/10 (40%), elapsed 12.0 s, ETA 18 s

The ETA is the linear extrapolation elapsed * (total - done) / done of the units finished.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import sys
import time
from typing import Any, Callable, Iterator, Optional, TextIO

#: seconds between two plain lines (stderr not a terminal)
LINE_EVERY = 5.0
#: seconds between two redraws of the line on a terminal
REDRAW_EVERY = 0.1
#: width of the bar on a terminal
BAR_WIDTH = 20
#: seconds a display asked for by "auto" waits before it shows (a quick call stays silent)
AUTO_DELAY = 1.0

_active = [0]  # displays open now: an engine inside another's display stays quiet


def interactive() -> bool:
    """Whether this is an interactive session: a Jupyter/IPython kernel, or a Python prompt
    (``python -i``, the REPL) whose stderr is a terminal."""
    prompt = hasattr(sys, "ps1") or bool(getattr(sys.flags, "interactive", 0))
    return in_notebook() or (prompt and is_terminal(sys.stderr))


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (False for streams without ``isatty`` or closed ones)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def clock(seconds: float) -> str:
    """"0:07", "1:02:03": a duration for the display."""
    if not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class Display:
    """``Display(label)(done, total)``: the display of one run (see the module's docstring);
    ``close()`` ends it (the final line). ``live``: redraw one line (a terminal or notebook)
    rather than print plain lines; None decides from ``stream``."""

    def __init__(self, label, stream=None, live=None, delay=0.0):
        self.label, self.delay = label, delay
        self.stream = sys.stderr if stream is None else stream
        self.live = (is_terminal(self.stream) or in_notebook()) if live is None else live
        self.start = time.monotonic()
        self.done, self.total, self.shown = 0, None, -math.inf
        self.width = 0

    def __call__(self, done, total):
        self.done, self.total = int(done), max(int(total), 1)
        now = time.monotonic()
        if now - self.start < self.delay:
            return
        first = self.shown == -math.inf
        if first or now - self.shown >= (REDRAW_EVERY if self.live else LINE_EVERY):
            self._show(now)

    def eta(self, now: Optional[float] = None) -> float:
        """Seconds left: elapsed * (total - done) / done (inf before the first unit)."""
        elapsed = (time.monotonic() if now is None else now) - self.start
        if self.total is None or self.done <= 0:
            return math.inf
        return elapsed * max(self.total - self.done, 0) / self.done

    def text(self, now: Optional[float] = None) -> str:
        """The display's text now (without the bar)."""
        now = time.monotonic() if now is None else now
        elapsed = now - self.start
        if self.total is None:
            return f"{self.label}: elapsed {elapsed:.1f} s"
        pct = 100.0 * min(self.done / self.total, 1.0)
        if self.live:
            fill = int(round(BAR_WIDTH * min(self.done / self.total, 1.0)))
            bar = "#" * fill + "-" * (BAR_WIDTH - fill)
            return (f"{self.label}  [{bar}] {pct:3.0f}% {self.done}/{self.total}  elapsed "
                    f"{clock(elapsed)}  ETA {clock(self.eta(now))}")
        eta = self.eta(now)
        return (f"{self.label}: {self.done}/{self.total} ({pct:.0f}%), elapsed {elapsed:.1f} s, "
                f"ETA {eta:.0f} s" if math.isfinite(eta) else
                f"{self.label}: {self.done}/{self.total} ({pct:.0f}%), elapsed {elapsed:.1f} s, "
                "ETA ?")

    def _show(self, now):
        line = self.text(now)
        if self.live:
            pad = " " * max(self.width - len(line), 0)
            self.stream.write("\r" + line + pad)
            self.width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self.shown = now

    def close(self) -> None:
        """The last state (once a unit was reported), then a new line on a terminal."""
        now = time.monotonic()
        if self.total is None or now - self.start < self.delay:
            return
        if self.live or now > self.shown:
            self._show(now)
        if self.live:
            self.stream.write("\n")
            self.stream.flush()


def in_notebook() -> bool:
    """Whether this runs in a Jupyter (IPython) kernel, whose output redraws a line on a
    carriage return."""
    shell = sys.modules.get("IPython")
    ip = getattr(shell, "get_ipython", lambda: None)() if shell is not None else None
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


@contextlib.contextmanager
def display(label: str, enabled: bool = True, stream: Optional[TextIO] = None,
            delay: float = 0.0) -> Iterator[Optional[Display]]:
    """A ``Display`` of ``label`` as the callback ``progress(done, total)`` for the
    duration of the block (shown once ``delay`` seconds have passed), or None when not
    ``enabled`` (pass it straight to an engine)."""
    if not enabled:
        yield None
        return
    shown = Display(label, stream, delay=delay)
    _active[0] += 1
    try:
        yield shown
    finally:
        _active[0] -= 1
        shown.close()


@contextlib.contextmanager
def reporting(progress: Any, label: str) -> Iterator[Any]:
    """The callback an engine calls for its ``progress`` argument: a callable as given; True a
    ``display`` of ``label``; "auto" that display in an interactive session
    (``interactive``) unless another display is open; False or None nothing (None is
    yielded)."""
    if callable(progress):
        yield progress
        return
    if isinstance(progress, str):
        if progress != "auto":
            from ..errors import ParamgeoError

            raise ParamgeoError(f"progress={progress!r}: give True, False, 'auto' or a "
                                "callable progress(done, total)")
        progress = interactive() and _active[0] == 0
        with display(label, progress, delay=AUTO_DELAY) as update:
            yield update
        return
    with display(label, bool(progress)) as update:
        yield update


def shows_progress(label: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator of a long engine whose argument ``progress`` (default "auto") takes what
    ``reporting`` takes: the engine itself receives the callable (or None)."""
    def wrap(engine):
        signature = inspect.signature(engine)

        @functools.wraps(engine)
        def run(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            with reporting(bound.arguments["progress"], label) as update:
                bound.arguments["progress"] = update
                return engine(*bound.args, **bound.kwargs)
        return run
    return wrap
