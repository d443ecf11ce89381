"""Benchmark rows for the uvt plugin: closed-form JVP/VJP against the autograd dense Jacobian,
and the closed-form Euclidean and balanced horizontal projections against the generic routes
(SVD of the GL(r) generators; metric-orthogonal projection onto them)."""

import numpy as np
import scipy.linalg

import paramgeo
from paramgeo import Parameterization


def autograd_dense_jacobian(param, theta):
    """The naive route's first step: the dense m x n Jacobian from autograd."""
    return Parameterization.jacobian(param, theta)


def generic_balanced_projection(param, theta, v):
    """v - G (G^T M G)^{-1} G^T M v with M the balanced metric matrix
    blockdiag(I kron (U^T U)^{-1}, I kron (V^T V)^{-1}) and G the GL(r) generators."""
    m, n, r = param.sizes["m"], param.sizes["n"], param.sizes["r"]
    U, V = theta[: m * r].reshape(m, r), theta[m * r:].reshape(n, r)
    M = scipy.linalg.block_diag(np.kron(np.eye(m), np.linalg.inv(U.T @ U)),
                                np.kron(np.eye(n), np.linalg.inv(V.T @ V)))
    G = param.symmetry().generators(theta)
    return v - G @ np.linalg.solve(G.T @ M @ G, G.T @ M @ v)


def bench(row, repeats):
    rng = np.random.default_rng(0)
    for m, n, r in ((30, 20, 5), (60, 40, 5), (100, 80, 10)):
        p = paramgeo.get("uvt", m=m, n=n, r=r)
        theta = p.random_point(rng)
        v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
        reps = repeats if m < 100 else max(3, repeats // 3)
        tag = f"uvt {m}x{n} r={r}:"
        row(f"{tag} JVP closed vs autograd dense J",
            lambda: p.jvp(theta, v), lambda: autograd_dense_jacobian(p, theta) @ v, reps)
        row(f"{tag} VJP closed vs autograd dense J",
            lambda: p.vjp(theta, w), lambda: autograd_dense_jacobian(p, theta).T @ w, reps)
        row(f"{tag} Euclid h-proj vs generic SVD",
            lambda: paramgeo.horizontal_projection(p, theta, v),
            lambda: paramgeo.horizontal_projection(p, theta, v, generic=True), 5 * repeats)
        if m < 100:  # the dense metric matrix route grows as n_params^2
            row(f"{tag} balanced h-proj vs metric solve",
                lambda: p.balanced_horizontal_projection(theta, v),
                lambda: generic_balanced_projection(p, theta, v), 5 * repeats)
