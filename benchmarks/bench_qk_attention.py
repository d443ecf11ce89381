"""Benchmark rows for the qk-attention plugin: the closed-form JVP and VJP of every ``output``
against autograd's generic forward / reverse mode (``Parameterization.jvp``/``vjp``) and against
the same mathematics written directly in numpy (the floor: no paramgeo overhead).

Targets (issue 16): ratio to raw numpy >= 0.67 (paramgeo within 1.5x of it) and to autograd
>= 1.5, at d=100 r=10 H=4 (scores, sum), d=50 r=5 H=4 T=50 (attention) and d=768 r=64 H=12
(T=128 for attention). A cold attention JVP (a new point) and autograd's forward mode do the
same work: the four products Xs Q_h, Xs K_h, Xs dQ_h, Xs dK_h (T x d x r each, per head), the
logits, the softmax and its tangent; :func:`cold_floor` prints the share of the four products.
"""

import time


import numpy as np

import paramgeo
from paramgeo import Parameterization

TARGETS = {"numpy": 0.67, "autograd": 1.5}


def numpy_routes(p):
    """(jvp(theta, v), vjp(theta, w)) written directly in numpy from the formulas of the plugin
    docs, everything recomputed from theta on each call as paramgeo and autograd do:
    dS_h = dQ_h K_h^T + Q_h dK_h^T, J^T G = (G_h K_h, G_h^T Q_h); attention through the factors
    X Q_h, X K_h and the softmax derivative A * (dL - rowsum(A * dL))."""
    H, d, r = p.heads, p.d, p.r
    k = H * d * r
    X, c = p.X, 1.0 / np.sqrt(d)

    def factors(theta):
        Q = theta[:k].reshape(H, d, r)
        return Q, (Q if p.tied else theta[k:].reshape(H, d, r))

    def softmax(XQ, XK):
        L = XQ @ XK.transpose(0, 2, 1) * c
        E = np.exp(L - L.max(axis=2, keepdims=True))
        return E / E.sum(axis=2, keepdims=True)

    def jvp(theta, v):
        Q, K = factors(theta)
        dQ, dK = factors(v)
        if p.output == "attention":
            XQ, XK = X @ Q, X @ K
            A = softmax(XQ, XK)
            dL = ((X @ dQ) @ XK.transpose(0, 2, 1) + XQ @ (X @ dK).transpose(0, 2, 1)) * c
            return (A * (dL - (A * dL).sum(axis=2, keepdims=True))).ravel()
        dS = dQ @ K.transpose(0, 2, 1) + Q @ dK.transpose(0, 2, 1)
        return (dS.sum(axis=0) if p.output == "sum" else dS).ravel()

    def vjp(theta, w):
        Q, K = factors(theta)
        if p.output == "attention":
            XQ, XK = X @ Q, X @ K
            A = softmax(XQ, XK)
            G = w.reshape(H, p.tokens, p.tokens)
            Z = A * (G - (A * G).sum(axis=2, keepdims=True)) * c
            gQ, gK = X.T @ (Z @ XK), X.T @ (Z.transpose(0, 2, 1) @ XQ)
        else:
            G = np.broadcast_to(w.reshape(d, d), (H, d, d)) if p.output == "sum" \
                else w.reshape(H, d, d)
            gQ, gK = G @ K, G.transpose(0, 2, 1) @ Q
        if p.tied:
            return (gQ + gK).ravel()
        return np.concatenate([gQ.ravel(), gK.ravel()])

    return jvp, vjp


CASES = [
    dict(d=100, r=10, heads=4, output="scores"),
    dict(d=100, r=10, heads=4, output="scores", tied=True),
    dict(d=100, r=10, heads=4, output="sum"),
    dict(d=100, r=10, heads=4, output="sum", tied=True),
    dict(d=50, r=5, heads=4, output="attention", tokens=50),
    dict(d=50, r=5, heads=4, output="attention", tokens=50, tied=True),
    dict(d=768, r=64, heads=12, output="scores"),
    dict(d=768, r=64, heads=12, output="sum"),
    dict(d=768, r=64, heads=12, output="attention", tokens=128),
    dict(d=768, r=64, heads=12, output="attention", tokens=128, tied=True),
]


def bench(row, repeats):
    rng = np.random.default_rng(0)
    for sizes in CASES:
        p = paramgeo.get("qk-attention", **sizes)
        theta = p.random_point(rng)
        v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
        jvp, vjp = numpy_routes(p)
        reps = max(3, repeats // 3) if p.d > 500 else 4 * repeats
        tag = (f"qk {p.output}{' tied' if p.tied else ''} d={p.d} r={p.r} H={p.heads}"
               + (f" T={p.tokens}" if p.output == "attention" else ""))
        # For attention the plugin keeps the softmax of the last point: the "cold" rows alternate
        # two points so that every call pays the forward products X Q_h, X K_h; the plain rows
        # repeat one point, as Lanczos or conjugate gradients on J^T J do.
        points = [theta, p.random_point(rng)]
        for cold in (False, True) if p.output == "attention" else (False,):
            for what, x, mine, ours, auto in (("JVP", v, p.jvp, jvp, Parameterization.jvp),
                                              ("VJP", w, p.vjp, vjp, Parameterization.vjp)):

                def call(fn, x=x, cold=cold):
                    """fn(point, x); the point alternates between two on each call if cold."""
                    turn = iter(range(10 ** 9))
                    return lambda: fn(points[next(turn) % 2 if cold else 0], x)

                row.many(f"{tag} {what}{' cold' if cold else ''}", call(mine),
                         {"numpy": call(ours),
                          "autograd": call(lambda t, y, f=auto: f(p, t, y))}, reps, TARGETS)
        if p.output == "attention" and not p.tied and p.d > 500:
            cold_floor(row, p, points, v, reps)


def cold_floor(row, p, points, v, repeats):
    """CPU milliseconds (medians, interleaved) of the cold untied attention JVP, of autograd's
    cold forward mode, and of the four products both must compute, Xs [Q, K] and Xs [dQ, dK]
    as stacked matmuls over the 2H heads: 1.5x autograd's time is reachable only if it exceeds
    1.5x those products."""
    stack = (2 * p.heads, p.d, p.r)
    turns = [iter(range(10 ** 9)) for _ in range(2)]
    parts = {"cold JVP": lambda: p.jvp(points[next(turns[0]) % 2], v),
             "autograd": lambda: Parameterization.jvp(p, points[next(turns[1]) % 2], v),
             "4 products": lambda: (p._Xs @ points[0].reshape(stack), p._Xs @ v.reshape(stack))}
    cold, auto, floor = (t * 1e3 for t in row.median_times(list(parts.values()), repeats,
                                                           clock=time.process_time))
    print(f"qk attention d={p.d} r={p.r} H={p.heads} T={p.tokens} cold JVP (CPU ms): paramgeo "
          f"{cold:.1f}, autograd {auto:.1f}, the four T x d x r products per head {floor:.1f} "
          f"({floor / cold:.0%} of paramgeo's); 1.5x autograd = {auto / 1.5:.1f} ms", flush=True)
