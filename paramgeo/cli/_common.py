"""Option bundles and helpers shared by every paramgeo command."""

import contextlib
import json
import math
import sys

import click
import numpy as np

from ..errors import ParamgeoError, SizeError, approx
from ..io.progress import display, in_notebook, is_terminal
from ..results import title


def json_option(f):
    """``--json``: print the result as JSON instead of text."""
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(f)


def sizes_option(f):
    """``-p KEY=VALUE`` (repeatable): the plugin's size parameters."""
    return click.option(
        "-p",
        "--param",
        "sizes",
        multiple=True,
        metavar="KEY=VALUE",
        help="A size of the parameterization, e.g. -p d=4 -p r=2 (repeatable).",
    )(f)


COMMANDLINE = click.core.ParameterSource.COMMANDLINE


class Command(click.Command):
    """Every paramgeo command: before the callback runs, each former option name the user gave
    (a :class:`FormerOption`) prints one deprecation line on stderr and hands its value to the
    option that replaced it; giving both is a usage error."""

    def invoke(self, ctx):
        for param in self.params:
            if isinstance(param, FormerOption):
                value = ctx.params.pop(param.name, None)
                if ctx.get_parameter_source(param.name) != COMMANDLINE:
                    continue
                old = param.opts[0]
                click.echo(f"Warning: {old} {FORMER}; use {param.new}", err=True)
                if ctx.get_parameter_source(param.target) == COMMANDLINE:
                    raise click.UsageError(f"give {param.new} only ({old} is its deprecated "
                                           "former name)")
                ctx.params[param.target] = value
        return super().invoke(ctx)


class Group(click.Group):
    """A group of paramgeo commands (``llc``, ``quotient``): its subcommands are
    :class:`Command`."""

    command_class = Command


def command(name, **kwargs):
    """``click.command(name)`` as a paramgeo :class:`Command`."""
    return click.command(name, cls=Command, **kwargs)


#: the words of every deprecation line: "Warning: --time is deprecated and goes in the next
#: release; use --t-final"
FORMER = "is deprecated and goes in the next release"


class FormerOption(click.Option):
    """A hidden option: the former name of the option ``new`` (its flag, e.g. "--t-final")
    whose value goes to the parameter ``target``, kept for one release (see :class:`Command`)."""

    def __init__(self, decls, new, target, **kwargs):
        super().__init__(decls, hidden=True, **kwargs)
        self.new, self.target = new, target


def former_option(old, new, target, **kwargs):
    """The hidden former name ``old`` of option ``new`` (destination ``target``): it still
    works for one release and prints a deprecation line naming ``new``."""
    dest = "former_" + old.lstrip("-").replace("-", "_").lower()
    return click.option(old, dest, cls=FormerOption, new=new, target=target, **kwargs)


class LossChoice(click.Choice):
    """A choice of loss names that still accepts a former name (paramgeo.losses.data's
    FORMER_LOSSES) for one release, with a deprecation line naming today's."""

    def convert(self, value, param, ctx):
        from ..losses.data import FORMER_LOSSES

        if value in FORMER_LOSSES:
            click.echo(f"Warning: --loss {value} {FORMER}; use --loss {FORMER_LOSSES[value]}",
                       err=True)
            value = FORMER_LOSSES[value]
        return super().convert(value, param, ctx)


def loss_option(default="squared", extra=(), help=""):
    """``--loss KIND``: one of the losses on predictors (paramgeo.losses.data.LOSS_KINDS, the
    same in every command) and the command's ``extra`` ones, with ``help`` before the list of
    layouts (docs/flows.md)."""
    from ..losses.data import LOSS_KINDS

    return click.option(
        "--loss", "loss_kind", type=LossChoice(tuple(LOSS_KINDS) + tuple(extra)), default=default,
        show_default=True,
        help=(help + " " if help else "") + "Loss on predictors: squared, logistic and "
             "exponential need A (N, m) and y (N,), quadratic X (N, d) and y (N,), linear-map "
             "(the predictor is an out x in matrix B applied to the inputs) X (N, in) and Y "
             "(N, out); the former name regression is linear-map.")


#: JSON keys that name one quantity under an engine's own name -> the one name every
#: ``--json`` output uses (docs/cli.md, "One vocabulary")
JSON_KEYS = {"param_dim": "n", "predictor_dim": "m", "doubtful": "near_singular",
             "plugin": "name"}


def shared_json(out, param=None, renames=None):
    """The dict ``out`` of a ``--json`` output in the shared schema: the keys of JSON_KEYS (and
    the command's own ``renames``) under their shared names, and, for a query on ``param``,
    first ``name``, ``sizes``, ``n`` (parameters) and ``m`` (predictor entries)."""
    from ..results import to_jsonable

    keys = dict(JSON_KEYS, **(renames or {}))
    out = {keys.get(k, k): v for k, v in out.items()}
    if param is None:
        return out
    head = {"name": param.name, "sizes": to_jsonable(dict(param.sizes)), "n": int(param.n),
            "m": int(param.m)}
    clash = [k for k in head if k in out and to_jsonable(out[k]) != head[k]]
    if clash:  # a key of the engine's meaning something else: rename it in ``renames``
        raise RuntimeError(f"--json key {clash[0]!r} = {out[clash[0]]!r} is not the shared "
                           f"{clash[0]} = {head[clash[0]]!r}")
    return {**head, **{k: v for k, v in out.items() if k not in head}}


def echo_json(out, param=None, renames=None):
    """Print ``out`` (a dict) as the JSON of :func:`shared_json`."""
    click.echo(json.dumps(shared_json(out, param, renames), indent=2, default=str))


def seed_option(help="Seed of the random points."):
    """``--seed N`` (an integer >= 0, default 0), with the command's own help text."""
    return click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                        help=help)


def point_options(f):
    """``--seed N`` / ``--at FILE.npy``: where to evaluate (random point or a saved theta)."""
    f = seed_option("Seed of the random point (ignored with --at).")(f)
    return click.option("--at", "at", type=click.Path(dir_okay=False),
                        help="A .npy file holding theta (flat, or the shape of a single block).")(f)


def precision_option(f):
    """``--precision DIGITS``: decide ranks on singular values of that many digits
    (paramgeo.geometry.precision: exact rational J where the plugin declares ``symbolic``)."""
    return click.option(
        "--precision", "precision", type=click.IntRange(min=0), default=None,
        help="Decide ranks on singular values with DIGITS significant digits (an exact rational "
             "J where the plugin is symbolic, else forward in mpmath); 0: float64 only "
             "[default: float64, redone in 50 digits where float64 cannot resolve a "
             "decision].")(f)


def progress_option(f):
    """``--progress/--no-progress``: show progress with elapsed time and ETA (default: when
    stderr is a terminal)."""
    return click.option("--progress/--no-progress", default=None,
                        help="Show progress on stderr with the elapsed time and the time left "
                             "(ETA): a bar on a terminal, plain lines in a pipe [default: when "
                             "stderr is a terminal or in a notebook].")(f)


def stiff_flow_options(f):
    """``--chart theta|log``, ``--time-scale T``, ``--exact-jacobian/--no-exact-jacobian``: the
    coordinates, time and Jacobian of a gradient flow (``paramgeo.flows.gradient_flow``'s
    ``chart``, ``time_scale`` and ``exact_jacobian``), for commands that run one."""
    f = click.option(
        "--exact-jacobian/--no-exact-jacobian", "exact_jacobian", default=False,
        show_default=True,
        help="Give the implicit integrator (LSODA, BDF, Radau) the loss Hessian as the "
             "Jacobian of its field instead of finite differences: far fewer steps when the "
             "flow is stiff (plateaus of small initialisations).")(f)
    f = click.option(
        "--time-scale", "time_scale", type=float, default=1.0, show_default=True,
        help="Integrate in tau = t / T for this T > 0 (times are still reported in t), e.g. "
             "T = alpha^(2-L) for a depth-L diagonal network from init scale alpha, whose "
             "plateaus then last O(1) in tau.")(f)
    return click.option(
        "--chart", type=click.Choice(["theta", "log"]), default="theta", show_default=True,
        help="Coordinates of the integration: theta, or r = log|theta| on theta0's orthant "
             "(every entry of theta0 nonzero), where --atol bounds the relative error of each "
             "coordinate; use log from small initialisations.")(f)


def progress_enabled(progress, quiet=False):
    """The value of ``--progress``: as given, else whether stderr is a terminal or this runs
    in a notebook (and not ``quiet``)."""
    if progress is not None:
        return bool(progress)
    return (is_terminal(sys.stderr) or in_notebook()) and not quiet


#: the progress display of paramgeo (elapsed time and ETA on stderr) as the callback
#: ``progress(done, total)`` engines take, or None when not enabled
progress_bar = display


def exit_if_interrupted(result, how_far):
    """After a result was printed: if the engine was interrupted (Ctrl-C), end with one line
    ``Error: interrupted {how_far}`` (e.g. "after 3 of 20 starts") and exit code 130 (the
    shell's code for an interrupt); the output above holds what was finished."""
    if getattr(result, "interrupted", False):
        raise_interrupted(f"interrupted {how_far}; the output above holds the finished ones")


#: seconds an interrupted command has to print what finished when that needs the plugin again
#: (the records of a trajectory); past them it ends as if Ctrl-C had been pressed again
AFTER_INTERRUPT_SECONDS = 3.0


@contextlib.contextmanager
def finishing(result, how_far):
    """Around the printing of ``result``: when Ctrl-C interrupted it, the printing gets
    AFTER_INTERRUPT_SECONDS (a plugin whose forward loops would otherwise hold the command
    until a second Ctrl-C); past them it ends with ``Error: interrupted {how_far}...`` and exit
    code 130."""
    if not getattr(result, "interrupted", False):
        yield
        return
    seconds = AFTER_INTERRUPT_SECONDS
    import _thread
    import threading

    timer = threading.Timer(seconds, _thread.interrupt_main)
    timer.daemon = True
    timer.start()
    try:
        yield
    except KeyboardInterrupt:
        raise_interrupted(f"interrupted {how_far}; the finished records were not printed: "
                          f"evaluating them took over {seconds:g} s")
    finally:
        timer.cancel()


def raise_interrupted(message):
    """End with the one line ``Error: {message}`` and exit code 130 (the shell's code for an
    interrupt, Ctrl-C)."""
    from . import UserError

    error = UserError(message)
    error.exit_code = 130
    raise error from None


def parse_sizes(pairs):
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SizeError(f"size {pair!r} must look like KEY=VALUE, e.g. -p d=4")
        if key.strip() in out:
            raise SizeError(f"size {key.strip()} is given twice ({key.strip()}={out[key.strip()]} "
                            f"and {pair.strip()}); give each -p KEY=VALUE once")
        out[key.strip()] = value.strip()
    return out


#: The largest dense Jacobian (m x n entries) a command forms; 5e7 float64 = 400 MB, and its
#: SVD already takes minutes. Raise it with the environment variable of the same name.
MAX_JACOBIAN_ENTRIES = 50_000_000
#: The largest parameter vector any command accepts (even one that never forms J).
MAX_PARAMS = 50_000_000


def _limit(env, default):
    """The limit in environment variable ``env`` (a number such as 1e8; ``inf`` means no limit),
    else ``default``; anything else (text, nan, a negative number) is a SizeError."""
    import os

    raw = os.environ.get(env)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0:
        raise SizeError(f"environment variable {env}={raw!r} must be a number >= 0 (e.g. 1e8), "
                        "or inf for no limit")
    return value if math.isinf(value) else int(value)


#: The work m n min(m, n) of one dense SVD above which a command says, before starting, that it
#: may take long (2e9: a 1000 x 2000 Jacobian, seconds on an idle core, a minute on a busy one).
SLOW_SVD_WORK = 1_000_000_000
#: The most memory (bytes) the matrix-free route may allocate (its Lanczos vectors).
MAX_MATRIX_FREE_BYTES = 8 * 10**9


def resolve(name, sizes, dense=True):
    """Instantiate plugin ``name`` (or load the plugin file ``name`` if it ends in .py).

    Refuses sizes whose parameter vector exceeds ``MAX_PARAMS``, and checks what the command
    will allocate: ``dense=True`` (commands that form the m x n Jacobian) refuses more than
    ``MAX_JACOBIAN_ENTRIES`` entries; ``dense="auto"`` (describe, rank: the route of
    :func:`paramgeo.linalg.routes.choose_route`) checks the dense Jacobian only where that route is
    dense and the matrix-free route's O(n k) vectors against ``MAX_MATRIX_FREE_BYTES``
    otherwise; ``dense=False`` (commands that only use J^T v) checks n alone. Each limit is
    overridable by the environment variable of that name (PARAMGEO_...; ``inf`` lifts it). A
    dense route whose SVDs cost more than ``SLOW_SVD_WORK`` flops each is announced on stderr
    before it starts.
    """
    from ..linalg.matfree import matrix_free_bytes
    from ..linalg.routes import choose_route

    param = _instantiate(name, sizes)
    max_n = _limit("PARAMGEO_MAX_PARAMS", MAX_PARAMS)
    where = title(param.name, param.sizes)
    if param.n > max_n:
        raise SizeError(f"{where} has n = {approx(param.n)} parameters, more than paramgeo "
                        f"handles ({max_n:.3g}, PARAMGEO_MAX_PARAMS); use smaller sizes")
    route = choose_route(param) if dense == "auto" else ("dense" if dense else None)
    if route == "dense":
        max_entries = _limit("PARAMGEO_MAX_JACOBIAN_ENTRIES", MAX_JACOBIAN_ENTRIES)
        if param.n * param.m > max_entries:
            raise SizeError(
                f"{where}: the dense Jacobian would have m x n = {param.m} x {param.n} = "
                f"{approx(param.n * param.m)} entries ({approx(param.n * param.m * 8 // 10**9)} "
                f"GB), more than the limit {max_entries:.3g}; use smaller sizes, or `paramgeo "
                "describe`, `rank` or `critical`, which take the matrix-free route at this size "
                "(or raise PARAMGEO_MAX_JACOBIAN_ENTRIES if you have the memory and time)")
        work = param.n * param.m * min(param.n, param.m)
        if work > SLOW_SVD_WORK:
            faster = ("`--route matrix-free` avoids it" if dense == "auto" else
                      "`paramgeo describe` / `paramgeo rank` can avoid it with --route "
                      "matrix-free")
            click.echo(f"Note: {where}: every dense SVD of the {param.m} x {param.n} Jacobian "
                       f"costs about {work:.2g} flops (seconds to minutes each); {faster}",
                       err=True)
    elif route in ("sparse", "matrix-free", "closed-form"):
        # the closed-form rank is cheap, but the command's other steps (vertical space, orbit
        # dimension) keep vectors of length n and m too: the same budget bounds them
        max_bytes = _limit("PARAMGEO_MAX_MATRIX_FREE_BYTES", MAX_MATRIX_FREE_BYTES)
        need = matrix_free_bytes(param)
        if need > max_bytes:
            raise SizeError(
                f"{where}: the {route} route would keep {need / 1e9:.3g} GB of work vectors "
                f"(n = {approx(param.n)}, m = {approx(param.m)}), more than the limit "
                f"{max_bytes / 1e9:.3g} GB; use smaller sizes (or raise "
                "PARAMGEO_MAX_MATRIX_FREE_BYTES if you have the memory)")
    return param


def _instantiate(name, sizes):
    from ..contract.registry import get, load_plugin_file

    if name.endswith(".py"):
        names = load_plugin_file(name)
        if len(names) != 1:
            raise ParamgeoError(
                f"{name} defines several parameterizations ({', '.join(names)}); "
                "load it with --plugin and name one"
            )
        name = names[0]
    return get(name, **parse_sizes(sizes))


def load_point(param, at, seed):
    """theta from a .npy file (validated) or a random point from ``seed``."""
    if at is None:
        return param.random_point(np.random.default_rng(seed))
    from ..io.npzfile import read_npy

    blocks = list(param.spec.blocks.values())
    need = (f"{param.name} needs {param.n} entries (blocks {dict(param.spec.blocks)}), flat or "
            "in the shape of its single block")

    def fits(shape):
        size = math.prod(shape)
        ok = size == param.n and (len(shape) <= 1 or len(blocks) != 1 or shape == blocks[0])
        return None if ok else need

    arr = read_npy(at, "point file", "save a float array with numpy.save", fits, subject="theta")
    return param.as_theta(arr.ravel())


def emit(result, as_json, text=None, param=None, renames=None):
    """Print ``result`` as JSON (``to_dict`` in the shared schema of :func:`shared_json`, with
    ``param``'s name, sizes, n and m) or as text (``text`` or ``str(result)``)."""
    if as_json:
        echo_json(result.to_dict(), param, renames)
    else:
        click.echo(text if text is not None else str(result))


def table(rows, headers):
    """A plain-text table with aligned columns."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(line.rstrip() for line in out)
