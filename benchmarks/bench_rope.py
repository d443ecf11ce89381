"""Benchmark rows for the rope-attention plugin: the closed-form JVP and VJP (one batched matrix
product of the stacked rotated factors; Z^T g as one BLAS product) against autograd's forward
and reverse mode through ``forward`` (target: at least as fast, ratio >= 1), rotary,
absolute and learned encodings; and the rotation R_p alone against the JVP it is part of (its share)."""

import numpy as np

import paramgeo
from paramgeo import Parameterization


def bench(row, repeats):
    rng = np.random.default_rng(0)
    for sizes in (dict(d=16, r=8, tokens=16), dict(d=64, r=32, tokens=128, sequences=4),
                  dict(d=64, r=32, tokens=128, sequences=4, encoding="absolute"),
                  dict(d=64, r=32, tokens=128, sequences=4, encoding="learned")):
        p = paramgeo.get("rope-attention", **sizes)
        theta = p.random_point(rng)
        v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
        tag = (f"rope {p.encoding} d={p.d} r={p.r} T={p.tokens} B={p.sequences}")
        row(f"{tag}: JVP closed vs autograd fwd", lambda: p.jvp(theta, v),
            lambda: Parameterization.jvp(p, theta, v), repeats, target=1.0)
        row(f"{tag}: VJP closed vs autograd rev", lambda: p.vjp(theta, w),
            lambda: Parameterization.vjp(p, theta, w), repeats, target=1.0)
    p = paramgeo.get("rope-attention", d=64, r=32, tokens=128, sequences=4)
    theta, v = p.random_point(rng), rng.standard_normal(p.n)
    Z = rng.standard_normal((4, 128, 32))
    positions = np.arange(128)
    # ratio = JVP time / one rotation: the JVP rotates four factors (Q, K, dQ, dK)
    row("rope rotary d=64 r=32 T=128 B=4: one rotation R_p vs the whole JVP",
        lambda: p.rotate(Z, positions).ravel()[:1], lambda: p.jvp(theta, v)[:1], repeats)
