"""The ``paramgeo quotient`` commands: results as text and JSON, bad input as one Error line.

Covers: ``paramgeo.cli``.
"""

import json

import numpy as np
from click.testing import CliRunner

from paramgeo.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_align_and_barrier_commands(tmp_path):
    U = np.arange(1.0, 9.0).reshape(4, 2)
    np.save(tmp_path / "A.npy", U)
    np.save(tmp_path / "B.npy", U @ np.diag([1.0, -1.0]))
    res = run("quotient", "align", "uut", "-p", "d=4", "-p", "r=2", str(tmp_path / "A.npy"),
              str(tmp_path / "B.npy"), "--json", "--out", str(tmp_path / "C.npy"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["distance"] < 1e-12 and out["certificate"]["exact"]
    assert np.allclose(out["g"], np.diag([1.0, -1.0]), atol=1e-12)
    assert np.allclose(np.load(tmp_path / "C.npy"), U.ravel())
    np.save(tmp_path / "h1.npy", [1.0, 1.0])
    np.save(tmp_path / "h2.npy", [-1.0, -1.0])
    np.savez(tmp_path / "d.npz", A=np.ones((1, 1)), y=np.ones(1))
    res = run("quotient", "barrier", "hadamard", "-p", "p=1", str(tmp_path / "h1.npy"),
              str(tmp_path / "h2.npy"), "--data", str(tmp_path / "d.npz"), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["ainsworth"] == 0.5
    res = run("quotient", "barrier", "hadamard", "-p", "p=1", str(tmp_path / "h1.npy"),
              str(tmp_path / "h2.npy"), "--data", str(tmp_path / "d.npz"), "--path", "aligned")
    assert res.exit_code == 0 and "Entezari" in res.output


def test_teleport_command(tmp_path):
    np.save(tmp_path / "t.npy", [2.0, 0.5])
    np.savez(tmp_path / "d.npz", A=np.ones((1, 1)), y=np.ones(1))
    res = run("quotient", "teleport", "hadamard", "-p", "p=1", str(tmp_path / "t.npy"),
              "--data", str(tmp_path / "d.npz"), "--objective", "sharpness", "--mode", "min",
              "--radius", "2", "--json", "--out", str(tmp_path / "o.npy"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    # L = (1/2)(u v - 1)^2 at u v = 1: Hessian (v, u)(v, u)^T, sharpness u^2 + v^2 >= 2 |u v|
    assert out["before"] == 2.0 ** 2 + 0.5 ** 2 and abs(out["after"] - 2.0) < 1e-6
    u, v = np.load(tmp_path / "o.npy")
    assert abs(u * v - 1.0) < 1e-12 and abs(abs(u) - 1.0) < 1e-3


def test_bad_input_is_one_error_line(tmp_path):
    np.save(tmp_path / "h1.npy", [1.0, 1.0])
    np.savez(tmp_path / "d.npz", A=np.ones((1, 1)), y=np.ones(1))
    np.savez(tmp_path / "d9.npz", A=np.eye(9), y=np.ones(9))  # predictors of size 9, not 1
    cases = [
        ("quotient", "align", "uut", "-p", "d=4", "-p", "r=2", str(tmp_path / "h1.npy"),
         str(tmp_path / "h1.npy")),
        ("quotient", "barrier", "uvt", "-p", "m=1", "-p", "n=1", "-p", "r=1",
         str(tmp_path / "h1.npy"), str(tmp_path / "h1.npy"), "--data", str(tmp_path / "d.npz"),
         "--path", "geodesic"),
        ("quotient", "align", "uut", str(tmp_path / "missing.npy"), str(tmp_path / "h1.npy")),
        ("quotient", "teleport", "hadamard", "-p", "p=1", str(tmp_path / "h1.npy"),
         "--data", str(tmp_path / "d9.npz")),
    ]
    for args in cases:
        res = run(*args)
        assert res.exit_code == 2, res.output
        errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and "Traceback" not in res.output, res.output
