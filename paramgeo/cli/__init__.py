"""The ``paramgeo`` command line: geometry queries on registered parameterizations.

The CLI holds no mathematics: each command resolves a plugin, calls one engine and renders the
result as text or ``--json``. Subcommands live in their own modules and are imported only when
invoked (click's lazy-loading pattern), so ``paramgeo --help`` never imports sympy or
geomstats. Every :class:`~paramgeo.errors.ParamgeoError` becomes one line on stderr and exit
code 2, here and nowhere else.
"""

import contextlib
import importlib
import os
import sys
import warnings

import click

from ..errors import ParamgeoError

#: command name -> "module:function" (relative to paramgeo.cli); add one line per command.
COMMANDS = {
    "list": "_core:list_cmd",
    "describe": "_core:describe_cmd",
    "rank": "_core:rank_cmd",
    "check": "_core:check_cmd",
    "quotient": "_quotient:quotient_cmd",
    "mirror": "_mirror:mirror_cmd",
    "implicit-bias": "_mirror:implicit_bias_cmd",
    "pacbayes": "_pacbayes:pacbayes_cmd",
    "define": "_define:define_cmd",
    "undefine": "_define:undefine_cmd",
    "discover": "_define:discover_cmd",
    "exact": "_define:exact_cmd",
    "flow": "_flow:flow_cmd",
    "critical": "_critical:critical_cmd",
    "strata": "_critical:strata_cmd",
    "search": "_critical:search_cmd",
    "sweep": "_sweep:sweep_cmd",
    "structure": "_risk:structure_cmd",
    "early-stopping": "_risk:early_stopping_cmd",
    "spectral-filters": "_risk:spectral_filters_cmd",
    "online-sgd": "_online:online_sgd_cmd",
    "llc": "_llc:llc_cmd",
}


#: command name -> the one line ``paramgeo --help`` shows, so that listing the commands imports
#: none of them (nor numpy); tests/test_cli.py checks each against the command's own help.
SHORT_HELP = {
    "check": 'Run the contract check on a plugin (by name or .py file); exit 1 if a property fails.',
    "critical": 'Classify a point: regular, critical with its causes (orbit-degenerate, subnetwork, factor-rank, dependent-weights, other) or on a kink; the rank against the generic rank and the stratum the point lies on.',
    "quotient": 'Moving in the quotient: align two points modulo the symmetry group, loss barriers along straight, aligned and geodesic paths, and teleportation along an orbit.',
    "define": 'Define a parameterization from an expression spec (TOML) and save it for later use.',
    "describe": 'Dimensions, generic rank, symmetry group and quotient dimension of a parameterization.',
    "discover": 'Discover symmetries: linear (Lie algebra of A with J(theta) A theta = 0), scaling, discrete.',
    "exact": 'Exact (sympy) ranks: rank of J over Q at random rational points and over Q(theta).',
    "flow": 'Train a parameterization on a loss of its predictors: gradient descent or flow.',
    "implicit-bias": 'Compare argmin R_alpha(beta) subject to X beta = y with the gradient-flow limit.',
    "list": 'List the registered parameterizations with their sizes.',
    "llc": 'Learning coefficients: exact (lambda, m) where theory has them, and the LLC estimated by localized Langevin sampling at a local minimum.',
    "mirror": 'Lie algebra of the fields grad phi_i, conservation laws and mirror potential.',
    "pacbayes": 'KL(Q||P) and KL(Q_bar||P_bar) for the neutral prior N(0, s^2 I) and the orbit-volume implicit-bias prior, with McAllester, Maurer-Seeger and Catoni certificates.',
    "rank": 'Rank of the Jacobian at a point, the generic rank and the singular values.',
    "search": 'Search for critical points (drive s_R/s_1 of J to 0 on |theta| = 1 from random starts) and classify each one: how many lie on subnetworks, how many the engine cannot explain.',
    "strata": 'The strata of a network (sub-architectures) or a factorization (factor rank) with their generic ranks, as a poset (edges from a stratum to the strata in its closure).',
    "sweep": 'Run a grid of queries (describe, rank, search, mirror, pacbayes, ...) from a TOML sweep file, one Dask task per cell, into a tidy table; a failing cell records its error and the sweep goes on.',
    "undefine": 'Remove a parameterization saved by `paramgeo define`.',
    "structure": 'Structure matrices A(x) of a layer at zero weights: f(W; x) = f(0; x) + Tr[W W^T A(x)] + O(W^3).',
    "early-stopping": 'Exact excess 0-1 risk of logistic GD under label flips: at the oracle stop, at the end, and of the max-margin interpolator.',
    "spectral-filters": 'Risk of ridge, GD and negatively shifted GD in a spike-plus-flat model, beside the Marchenko-Pastur edge and the shift that cancels the implicit penalty.',
    "online-sgd": 'Online SGD on attention-indexed data to weak recovery, with order parameters.',
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module on first use and maps errors."""

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def format_commands(self, ctx, formatter):
        """The command list of ``--help`` from SHORT_HELP, importing no command module (one
        without an entry there is imported for its help)."""
        rows = []
        for name in self.list_commands(ctx):
            text = SHORT_HELP.get(name)
            if text is None:  # click cuts short help at about 45 characters: not here
                text = self.get_command(ctx, name).get_short_help_str(limit=300)
            rows.append((name, text))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_command(self, ctx, cmd_name):
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:  # the group's own options: one line too
            raise _one_line_usage(exc) from None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ParamgeoError as exc:
            raise UserError(str(exc)) from None
        except click.UsageError as exc:  # a bad option or argument: one line, not click's three
            raise _one_line_usage(exc) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:  # Ctrl-C before an engine finished anything it could print
            error = UserError("interrupted before any result was finished")
            error.exit_code = 130  # the shell's code for an interrupt
            raise error from None
        except MemoryError as exc:  # sizes beyond this machine's memory: the user's to change
            raise UserError(f"out of memory ({exc or 'an allocation failed'}); use smaller "
                            "sizes") from None
        except BrokenPipeError:  # output piped into `head` and closed: not an error of ours
            _silence_stdout()
            raise click.exceptions.Exit(0) from None
        except Exception as exc:  # a bug, not a user error: say so in one line, keep exit != 0
            if os.environ.get("PARAMGEO_DEBUG"):
                raise
            raise InternalError(
                f"internal error: {type(exc).__name__}: {exc} "
                "(set PARAMGEO_DEBUG=1 for the traceback and please report it)"
            ) from None


def _silence_stdout():
    """Point stdout at /dev/null so that the interpreter's final flush of a closed pipe does
    not raise a second BrokenPipeError at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real stdout (e.g. CliRunner)
        pass


class UserError(click.ClickException):
    """A user mistake: one line on stderr, exit code 2."""

    exit_code = 2

    def show(self, file=None):
        click.echo(f"Error: {self.format_message()}", err=True)


class InternalError(UserError):
    exit_code = 1


def _one_line_usage(exc):
    """click's usage error (usage line, "Try ... --help", then the error) as one line that ends
    with where the help is; exit code 2 as click's."""
    path = exc.ctx.command_path if exc.ctx is not None else "paramgeo"
    return UserError(f"{exc.format_message()} (see '{path} --help')")


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--plugin",
    "plugin_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Load parameterizations from a Python file (repeatable).",
)
@click.version_option(package_name="paramgeo")
def main(plugin_files):
    """Geometry of neural-network parameterizations.

    \b
    Examples:
      paramgeo list
      paramgeo describe uut -p d=4 -p r=2
      paramgeo rank uut -p d=4 -p r=2 --at U.npy --json
      paramgeo --plugin my_param.py check mine
    """
    from ..contract.registry import load_plugin_file

    click.get_current_context().with_resource(_one_line_warnings())  # until the command ends
    try:
        for path in plugin_files:
            load_plugin_file(path)
    except ParamgeoError as exc:
        raise UserError(str(exc)) from None


@contextlib.contextmanager
def _one_line_warnings():
    """The CLI's warnings, restored afterwards: numpy's floating-point warnings ("overflow
    encountered in matmul") only repeat what the one-line error (or the finiteness checks
    behind it) says, so they are ignored; any other warning is one line "Warning: MESSAGE", as
    the commands' own, not a file name and a line of source, on the command's stderr wherever
    it runs (in a terminal, a pipe, or a test's CliRunner, which then holds it in its stderr)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"(overflow|invalid value|divide by zero|underflow) "
                                "encountered", RuntimeWarning)
        warnings.showwarning = _one_line_warning  # restored by catch_warnings
        yield


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    click.echo(f"Warning: {message}", err=True)


def run():  # pragma: no cover - console entry for `python cli.py`
    main(prog_name="paramgeo")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
