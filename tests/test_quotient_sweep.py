"""The quotient's sweep queries (quotient-align, quotient-barrier, quotient-teleport) run as
sweeps in this process, against closed forms: the Bures-Wasserstein distance of U U^T (scipy's sqrtm) for
random pairs, 0 for planted pairs, the Hadamard barrier 1/2 -> 0, and the minimal sharpness
of U V^T on its GL(r) orbit, 2 sigma_1 / N.

Covers: ``paramgeo.sweeps._quotient_queries``, ``paramgeo.sweeps.run``, ``paramgeo.sweeps.spec``,
``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import numpy as np
import pytest
from scipy.linalg import sqrtm

import paramgeo
from paramgeo.sweeps import sweep
from paramgeo.sweeps.spec import SweepSpecError


def _bures_wasserstein(p, seed):
    """The distance of the points the query draws (one generator, theta1 then theta2)."""
    rng = np.random.default_rng(seed)
    U, V = (p.random_point(rng).reshape(p.d, p.r) for _ in range(2))
    A, B = U @ U.T, V @ V.T
    root = sqrtm(A)
    inner = np.trace(sqrtm(root @ B @ root)).real
    return np.sqrt(max(np.trace(A) + np.trace(B) - 2 * inner, 0.0))


def test_align_query_against_bures_wasserstein_and_planted_pairs(tmp_path):
    # full rank (d = r): sqrtm is accurate there (at rank-deficient A it loses about 1e-7)
    spec = {"query": "quotient-align", "plugin": "uut",
            "cells": [{"sizes": {"d": 2, "r": 2}}, {"sizes": {"d": 3, "r": 3}}],
            "grid": {"options": {"seed": [0, 1], "planted": [False, True]}}}
    df = sweep(spec, tmp_path / "t.jsonl", workers=0).table
    assert (df["status"] == "ok").all() and len(df) == 8
    assert df["exact"].all() and df["isometric"].all()
    assert (df["group"] == [f"O({r})" for r in df["r"]]).all()
    assert (df["invariance_error"] < 1e-12).all()
    planted = df[df["planted"]]
    assert (planted["distance"] < 1e-10).all() and (planted["naive_distance"] > 1e-3).all()
    for _, row in df[~df["planted"]].iterrows():
        p = paramgeo.get("uut", d=int(row["d"]), r=int(row["r"]))
        assert abs(row["distance"] - _bures_wasserstein(p, int(row["seed"]))) < 1e-10


def test_barrier_query_hadamard_sign_flip(tmp_path):
    np.save(tmp_path / "h1.npy", [1.0, 1.0])
    np.save(tmp_path / "h2.npy", [-1.0, -1.0])
    np.savez(tmp_path / "one.npz", A=np.ones((1, 1)), y=np.ones(1))
    spec = {"query": "quotient-barrier", "plugin": "hadamard", "sizes": {"p": 1},
            "options": {"first": str(tmp_path / "h1.npy"), "second": str(tmp_path / "h2.npy"),
                        "data": str(tmp_path / "one.npz"), "points": 21},
            "grid": {"options": {"path": ["linear", "aligned"]}}}
    df = sweep(spec, tmp_path / "b.jsonl", workers=0).table.set_index("path")
    # the straight path computes u v = (1 - 2 lambda)^2: (1/2)(u v - 1)^2 peaks at 1/2
    assert abs(df.loc["linear", "ainsworth"] - 0.5) < 1e-12
    assert abs(df.loc["linear", "entezari"] - 0.5) < 1e-12
    assert abs(df.loc["aligned", "ainsworth"]) < 1e-12
    assert abs(df.loc["linear", "distance"] - np.sqrt(8)) < 1e-12
    assert abs(df.loc["aligned", "distance"]) < 1e-12


def test_bad_quotient_options_are_refused_before_running(tmp_path):
    with pytest.raises(SweepSpecError, match="path"):
        sweep({"query": "quotient-barrier", "plugin": "hadamard", "sizes": {"p": 1},
               "options": {"data": "x.npz", "path": "curved"}}, tmp_path / "x.jsonl",
              workers=0)
    with pytest.raises(SweepSpecError, match="factors"):
        sweep({"query": "quotient-align", "plugin": "uut", "sizes": {"d": 3, "r": 2},
               "options": {"factors": "all"}}, tmp_path / "y.jsonl", workers=0)


def test_teleport_query_reaches_the_closed_form_minimal_sharpness(tmp_path):
    """uvt at a minimum of (1/2N) sum_i (<A_i, U V^T> - y_i)^2 with A the N = m n unit
    matrices: the Hessian's largest eigenvalue is (|U|_2^2 + |V|_2^2) / N, and the flattest
    point of the GL(r) orbit has 2 sigma_1(Y) / N (the balanced factors)."""
    rng = np.random.default_rng(3)
    m, n, r = 4, 3, 2
    P, s, Qt = np.linalg.svd(rng.standard_normal((m, r)) @ rng.standard_normal((r, n)),
                             full_matrices=False)
    P, s, Qt = P[:, :r], s[:r], Qt[:r]
    G = np.array([[2.0, 0.5], [0.0, 0.7]])
    U, V = P * np.sqrt(s) @ G, Qt.T * np.sqrt(s) @ np.linalg.inv(G).T
    q = paramgeo.get("uvt", m=m, n=n, r=r)
    np.save(tmp_path / "t.npy", q.spec.pack(U=U, V=V))
    N = m * n
    np.savez(tmp_path / "d.npz", A=np.eye(N).reshape(N, m, n), y=(U @ V.T).ravel())
    spec = {"query": "quotient-teleport", "plugin": "uvt", "sizes": {"m": m, "n": n, "r": r},
            "options": {"point": str(tmp_path / "t.npy"), "data": str(tmp_path / "d.npz"),
                        "objective": "sharpness", "radius": 3.0, "starts": 1},
            "grid": {"options": {"mode": ["min", "max"]}}}
    df = sweep(spec, tmp_path / "t.jsonl", workers=0).table.set_index("mode")
    before = (np.linalg.norm(U, 2) ** 2 + np.linalg.norm(V, 2) ** 2) / N
    assert np.allclose(df["before"], before, rtol=1e-10)
    assert abs(df.loc["min", "after"] - 2 * s[0] / N) < 1e-6 * before
    assert df.loc["max", "after"] > before and df.loc["max", "at_bound"]
    assert (df["invariance_error"] < 1e-12).all() and (df["loss_after"] < 1e-20).all()
