"""Benchmark rows for the uut plugin: closed-form JVP/VJP against the autograd dense Jacobian,
and the closed-form horizontal projection against geomstats' BuresWassersteinBundle."""

import numpy as np

import paramgeo
from paramgeo import Parameterization


def autograd_dense_jacobian(param, theta):
    """The naive route's first step: the dense m x n Jacobian from autograd."""
    return Parameterization.jacobian(param, theta)


def bench(row, repeats):
    from tests.test_geometry import bures_wasserstein_bundle

    rng = np.random.default_rng(0)
    for d in (50, 100, 200):
        r = 10
        p = paramgeo.get("uut", d=d, r=r)
        theta = p.random_point(rng)
        v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
        reps = repeats if d < 200 else max(3, repeats // 3)
        row(f"uut d={d} r={r}: JVP closed vs autograd dense J",
            lambda: p.jvp(theta, v), lambda: autograd_dense_jacobian(p, theta) @ v, reps,
            target=50 if d == 200 else None)
        row(f"uut d={d} r={r}: VJP closed vs autograd dense J",
            lambda: p.vjp(theta, w), lambda: autograd_dense_jacobian(p, theta).T @ w, reps)
        bundle = bures_wasserstein_bundle(d, r)
        U, V = theta.reshape(d, r), v.reshape(d, r)
        row(f"uut d={d} r={r}: horizontal proj vs geomstats BW",
            lambda: paramgeo.horizontal_projection(p, theta, v),
            lambda: np.asarray(bundle.horizontal_projection(V, U)).ravel(), 50 * repeats,
            target=1)
