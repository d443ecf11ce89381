"""The example third-party plugin package, installed for real (pip, into a temporary target)
and driven through the CLI in a subprocess, so importlib.metadata finds its entry point.

Covers: ``examples/paramgeo-example-plugin``, ``paramgeo.contract.registry``.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "paramgeo-example-plugin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """pip install --no-deps --no-build-isolation --target <tmp> (no network needed)."""
    work = tmp_path_factory.mktemp("example")
    source = work / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                    "__pycache__"))
    target = work / "site"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert list(target.glob("paramgeo_example_plugin-*.dist-info"))
    return target


def cli(target, *args, home):
    env = dict(os.environ, PYTHONPATH=str(target), PARAMGEO_HOME=str(home))
    return subprocess.run([sys.executable, "-c", "from paramgeo.cli import main; main()", *args],
                          capture_output=True, text=True, env=env, cwd=target, timeout=120)


def test_installed_package_is_listed_and_passes_check(installed, tmp_path):
    res = cli(installed, "list", "--json", home=tmp_path)
    assert res.returncode == 0, res.stderr
    names = {row["name"] for row in json.loads(res.stdout)}
    assert "tanh-net" in names and "uut" in names
    res = cli(installed, "check", "tanh-net", "-p", "h=3", home=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "tanh-net (d=2, h=3, samples=8, data_seed=0): passed" in res.stdout
    assert "invariance" in res.stdout and "declared-vs-discovered" in res.stdout


def test_installed_package_discover_and_describe(installed, tmp_path):
    res = cli(installed, "discover", "tanh-net", "-p", "h=2", "--json", home=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["dim"] == 0  # a generic tanh network has no continuous symmetry
    assert "flip index 0 of W axis 0 & a axis 0" in out["discrete"]  # tanh is odd
    assert "swap indices 0 <-> 1 of W axis 0 & a axis 0" in out["discrete"]
    res = cli(installed, "describe", "tanh-net", "--json", home=tmp_path)
    assert json.loads(res.stdout)["generic_rank"] == 8  # n = h (d + 1) = 9 > N = 8 outputs


def test_not_installed_means_not_listed(tmp_path):
    env = dict(os.environ, PARAMGEO_HOME=str(tmp_path))
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, "-c", "import paramgeo; print(paramgeo.available())"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0 and "tanh-net" not in out.stdout
