"""The public modules type-check: ``python -m mypy`` (its configuration, the list of modules
that define paramgeo's public API, is the ``[mypy]`` section of setup.cfg) reports no error.

The type hints are part of the API: a signature that promises an array where the code returns a
tuple, or a result class whose field is declared ``float`` and built with ``None``, fails here.

Covers: the type hints of the modules in setup.cfg's ``[mypy]`` section.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mypy(*args):
    """(exit code, output) of ``python -m mypy`` run from the repository root."""
    run = subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    return run.returncode, run.stdout + run.stderr


def test_public_modules_type_check():
    code, out = mypy()
    assert code == 0 and "Success: no issues found" in out, out


def test_the_checker_reports_a_wrong_hint(tmp_path):
    """The same configuration on a function whose hint its body contradicts: mypy sees it (the
    check above can fail)."""
    bad = tmp_path / "wrong_hint.py"
    bad.write_text("import numpy as np\nfrom numpy.typing import NDArray\n\n\n"
                   "def rank(theta: NDArray[np.float64]) -> int:\n"
                   "    return theta.shape\n")
    code, out = mypy("--config-file", str(ROOT / "setup.cfg"), str(bad))
    assert code == 1 and "wrong_hint.py:6: error: Incompatible return value type" in out, out
