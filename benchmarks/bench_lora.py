"""Benchmark rows for the lora plugin (W0 + B A; uvt's products with B and A^T stored): the
closed-form JVP and VJP at m = n = 4000, r = 16 against the matrix products they are made of
(dB A + B dA; G A^T and B^T G: target within 1.2x, ratio >= 0.83), and against autograd's
forward and reverse mode at small sizes (target: at least as fast, ratio >= 1)."""

import numpy as np

import paramgeo
from paramgeo import Parameterization


def bench(row, repeats):
    rng = np.random.default_rng(0)
    for m, n, r in ((30, 20, 4), (200, 150, 8)):
        p = paramgeo.get("lora", m=m, n=n, r=r)
        theta = p.random_point(rng)
        v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
        row(f"lora {m}x{n} r={r}: JVP closed vs autograd fwd", lambda: p.jvp(theta, v),
            lambda: Parameterization.jvp(p, theta, v), repeats, target=1.0)
        row(f"lora {m}x{n} r={r}: VJP closed vs autograd rev", lambda: p.vjp(theta, w),
            lambda: Parameterization.vjp(p, theta, w), repeats, target=1.0)
    d, r = 4000, 16
    reps = max(3, repeats // 3)
    p = paramgeo.get("lora", m=d, n=d, r=r)
    B, dB, At, dAt = (rng.standard_normal((d, r)) for _ in range(4))
    G = rng.standard_normal((d, d))
    theta, v = p.point(B, At.T), p.point(dB, dAt.T)
    row(f"lora {d}x{d} r={r}: JVP vs dB A + B dA", lambda: p.jvp(theta, v),
        lambda: (dB @ At.T + B @ dAt.T).ravel(), reps, target=0.83)
    row(f"lora {d}x{d} r={r}: VJP vs G A^T, B^T G", lambda: p.vjp(theta, G.ravel()),
        lambda: np.concatenate([(G @ At).ravel(), (G.T @ B).ravel()]), reps, target=0.83)
