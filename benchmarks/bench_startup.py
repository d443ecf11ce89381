"""Start-up cost, each a fresh interpreter, medians of wall time interleaved with the floor:

* ``import paramgeo`` (then one public name, which loads numpy and autograd) against
  ``python -c 'import autograd'`` (numpy and autograd are the floor; target within 1.2x, ratio
  >= 0.83);
* ``paramgeo --help`` against ``python -c 'import click'`` (listing the commands needs neither
  numpy nor any command module; target within 2x, ratio >= 0.5).
"""

import subprocess
import sys

import numpy as np


def _run(*args):
    subprocess.run([sys.executable, *args], check=True, capture_output=True)
    return np.zeros(1)


def bench(row, repeats):
    reps = max(5, repeats)
    row("import paramgeo (+ paramgeo.Parameterization) vs import autograd",
        lambda: _run("-c", "import paramgeo; paramgeo.Parameterization"),
        lambda: _run("-c", "import autograd"), reps, target=0.83)
    row("paramgeo --help vs import click",
        lambda: _run("-c", "from paramgeo.cli import main; main(['--help'])"),
        lambda: _run("-c", "import click"), reps, target=0.5)
