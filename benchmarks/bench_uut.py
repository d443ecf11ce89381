"""Benchmark rows for the uut plugin: closed-form JVP/VJP against the autograd dense Jacobian,
the closed-form horizontal projection against geomstats' BuresWassersteinBundle, the public
``paramgeo.horizontal_projection`` against the plugin method and a raw numpy eigenbasis solve
(issue 16 targets: within 1.1x and 1.3x), and the closed-form ``rank_at`` against the SVD of the
dense Jacobian (target: 1000x at (d, r) = (200, 10), same rank at random U and at column ranks
7 and 1)."""

import time

import numpy as np

import paramgeo
from paramgeo import Parameterization
from paramgeo.linalg import decide_rank


def autograd_dense_jacobian(param, theta):
    """The naive route's first step: the dense m x n Jacobian from autograd."""
    return Parameterization.jacobian(param, theta)


def numpy_horizontal_projection(theta, v, d, r):
    """H = V - U Omega, (U^T U) Omega + Omega (U^T U) = U^T V - V^T U solved in the eigenbasis
    of U^T U (full-rank U), written directly in numpy."""
    U, V = theta.reshape(d, r), v.reshape(d, r)
    a, P = np.linalg.eigh(U.T @ U)
    A = U.T @ V
    Ct = P.T @ (A - A.T) @ P
    return (V - U @ (P @ (Ct / (a[:, None] + a[None, :])) @ P.T)).ravel()


def bench_public_projection(row, repeats):
    rng = np.random.default_rng(1)
    for d in (50, 200, 800):
        r = 10
        p = paramgeo.get("uut", d=d, r=r)
        theta, v = p.random_point(rng), rng.standard_normal(p.n)
        row.many(f"uut d={d} r={r}: public h-proj",
                 lambda: paramgeo.horizontal_projection(p, theta, v),
                 {"plugin method": lambda: p.horizontal_projection(theta, v),
                  "numpy eigenbasis": lambda: numpy_horizontal_projection(theta, v, d, r)},
                 200 * repeats, targets={"plugin method": 1 / 1.1, "numpy eigenbasis": 1 / 1.3})


def bench_rank_at(row, repeats):
    rng = np.random.default_rng(2)
    for d, r, reps in ((100, 10, 3), (200, 10, 1)):
        p = paramgeo.get("uut", d=d, r=r)
        for k in (r, 7, 1):
            U = rng.standard_normal((d, k)) @ rng.standard_normal((k, r)) / np.sqrt(r)
            theta = U.ravel()
            row(f"uut d={d} r={r} rank U={k}: rank_at closed vs dense SVD",
                lambda: np.array([paramgeo.rank_at(p, theta).rank]),
                lambda: np.array([decide_rank(p.jacobian(theta), warn=False).rank]), reps,
                target=1000 if d == 200 else None)


def bench_products_at_scale(row, repeats):
    """uut and uvt products at d = 4000 against the matrix products they are made of (target:
    within 1.2x, ratio >= 0.83) and against one d x d x r product (target 0.83 for uut). uut's
    JVP is one product of inner size 2r; its VJP reads W once in tiles S_IJ = W_IJ + W_JI^T
    (one product's flops plus a transposed addition pass over W); uvt's need two products'
    flops (dU V^T + U dV^T as one product of inner size 2r; W V and W^T U), so one product is a
    bound they cannot reach. The rows also show the expressions the closed forms replaced:
    P + P^T and (W + W^T) U, each a strided pass over a d x d array. The agreement column
    compares different quantities for the one-product rows. A last line prints the parts these
    products are made of (:func:`floor_parts`)."""
    rng = np.random.default_rng(3)
    d, r = 4000, 16
    reps = max(3, repeats // 3)
    p, q = paramgeo.get("uut", d=d, r=r), paramgeo.get("uvt", m=d, n=d, r=r)
    U, dU, V, dV = (rng.standard_normal((d, r)) for _ in range(4))
    W = rng.standard_normal((d, d))
    theta, v, w = U.ravel(), dU.ravel(), W.ravel()
    row.many(f"uut d={d} r={r}: JVP", lambda: p.jvp(theta, v),
             {"U dU^T + dU U^T": lambda: (U @ dU.T + dU @ U.T).ravel(),
              "P + P^T": lambda: (lambda P: P + P.T)(U @ dU.T).ravel(),
              "one product U dU^T": lambda: (U @ dU.T).ravel()}, reps,
             targets={"U dU^T + dU U^T": 0.83, "one product U dU^T": 0.83})
    row.many(f"uut d={d} r={r}: VJP", lambda: p.vjp(theta, w),
             {"W U + W^T U": lambda: (W @ U + W.T @ U).ravel(),
              "(W + W^T) U": lambda: ((W + W.T) @ U).ravel(),
              "one product W U": lambda: (W @ U).ravel()}, reps,
             targets={"W U + W^T U": 0.83, "one product W U": 0.83})
    th2, v2 = np.concatenate([U.ravel(), V.ravel()]), np.concatenate([dU.ravel(), dV.ravel()])
    row.many(f"uvt d={d} r={r}: JVP", lambda: q.jvp(th2, v2),
             {"dU V^T + U dV^T": lambda: (dU @ V.T + U @ dV.T).ravel(),
              "one product dU V^T": lambda: (dU @ V.T).ravel()}, reps,
             targets={"dU V^T + U dV^T": 0.83})
    row(f"uvt d={d} r={r}: VJP vs W V, W^T U", lambda: q.vjp(th2, w),
        lambda: np.concatenate([(W @ V).ravel(), (W.T @ U).ravel()]), reps, target=0.83)
    floor_parts(row, U, dU, W, reps)


def floor_parts(row, U, dU, W, repeats):
    """CPU milliseconds (medians, interleaved) of the parts of the d = 4000 products: a fresh
    d x d output written once (the page faults every product that returns one pays), the
    product U dU^T (inner r) and [U, dU] [dU, U]^T (inner 2r) into an output already touched,
    the upper triangle of the latter by row panels and the strided pass that mirrors it, the
    product W U, and the transposed pass W_IJ + W_JI^T over the tiles I <= J of W. The uut JVP
    is the fresh output plus the inner-2r product; its floor, one product of inner r, differs
    by the r extra inner columns (the mirror pass of the half-flops triangle costs more than
    they do). The uut VJP is W U plus the transposed pass."""
    d, r = U.shape
    A, B = np.hstack([U, dU]), np.hstack([dU, U])
    out, tile = np.empty((d, d)), 256
    out.fill(0.0)

    def fresh():
        np.empty((d, d)).fill(0.0)

    def triangle():
        for i in range(0, d, tile):
            np.matmul(A[i:i + tile], B[i:].T, out=out[i:i + tile, i:])

    def mirror():
        for i in range(0, d, tile):
            e = min(i + tile, d)
            out[e:, i:e] = out[i:e, e:].T

    def transposed_pass():
        S = np.empty((tile, tile))
        for i in range(0, d, tile):
            for j in range(i, d, tile):
                blk = W[i:i + tile, j:j + tile]
                np.add(blk, W[j:j + tile, i:i + tile].T, out=S[:blk.shape[0], :blk.shape[1]])

    parts = {"fresh d x d output": fresh,
             "U dU^T (inner r)": lambda: np.matmul(U, dU.T, out=out),
             "[U, dU] [dU, U]^T (inner 2r)": lambda: np.matmul(A, B.T, out=out),
             "its upper triangle": triangle, "mirror pass": mirror,
             "W U": lambda: W @ U, "pass W_IJ + W_JI^T": transposed_pass}
    medians = row.median_times(list(parts.values()), repeats, clock=time.process_time)
    print(f"uut d={d} r={r} parts (CPU ms): " + ", ".join(
        f"{name} {t * 1e3:.1f}" for name, t in zip(parts, medians)), flush=True)


def bench(row, repeats):
    bench_products_at_scale(row, repeats)
    bench_public_projection(row, repeats)
    bench_rank_at(row, repeats)

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
