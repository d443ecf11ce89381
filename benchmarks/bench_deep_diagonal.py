"""deep-diagonal at scale.

1. The cofactors c_l = prod_{k != l} w_l (the Jacobian's diagonals) at p = 5e6, depth 4,
   against the fused numpy expression written for depth 4 (target: within 2x, ratio >= 0.5),
   and the JVP against autograd's at p = 1e5.
2. The JVP and VJP (depth 4) at n = 4e5 and 5e6, fused block by block
   (:func:`paramgeo.linalg.numerics.blocks`), against jitted JAX on its own device arrays (XLA fuses
   the chain into one loop; target: within 1.5x, ratio >= 1/1.5), against the plain numpy
   expressions they replace (one pass over memory per ufunc, with temporaries) and, for the
   JVP, against the fused numpy floor (the same blocks hand-written for depth 4 with the fewest
   ufunc calls, 11 a block; target: within 1.5x). XLA runs on one thread (the flags below, set
   before jax is imported); without JAX the numpy rows run.
"""

import os

import numpy as np

import paramgeo
from paramgeo import Parameterization
from paramgeo.linalg.numerics import BLOCK, blocks

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")

TARGET = 1 / 1.5


def bench(row, repeats):
    rng = np.random.default_rng(0)
    p = paramgeo.get("deep-diagonal", p=5_000_000, depth=4, variant="product")
    theta = rng.standard_normal(p.n)
    W = theta.reshape(4, -1)

    def fused():
        w1, w2, w3, w4 = W
        return np.stack([w2 * w3 * w4, w1 * w3 * w4, w1 * w2 * w4, w1 * w2 * w3])

    row("deep-diagonal p=5e6 depth 4: cofactors vs fused expression",
        lambda: p.cofactors(theta), fused, max(3, repeats // 5), target=0.5)
    q = paramgeo.get("deep-diagonal", p=100_000, depth=4, variant="product")
    th, v = rng.standard_normal(q.n), rng.standard_normal(q.n)
    row("deep-diagonal p=1e5 depth 4: JVP closed vs autograd", lambda: q.jvp(th, v),
        lambda: Parameterization.jvp(q, th, v), repeats, target=1.0)
    for n in (400_000, 5_000_000):
        _products(row, repeats if n < 10 ** 6 else max(5, repeats // 2), n, rng)


def _products(row, repeats, n, rng):
    depth = 4
    p = paramgeo.get("deep-diagonal", p=n // depth, depth=depth)
    theta, v, w = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(p.p)
    W, V = theta.reshape(depth, -1), v.reshape(depth, -1)

    def plain_jvp():
        w1, w2, w3, w4 = W
        v1, v2, v3, v4 = V
        return v1 * w2 * w3 * w4 + w1 * v2 * w3 * w4 + w1 * w2 * v3 * w4 + w1 * w2 * w3 * v4

    def plain_vjp():
        w1, w2, w3, w4 = W
        return np.concatenate([w * w2 * w3 * w4, w * w1 * w3 * w4, w * w1 * w2 * w4,
                               w * w1 * w2 * w3])

    def floor_jvp():
        """The fused numpy floor: the JVP hand-written for depth 4 block by block, 11 ufunc
        calls per block of numerics.BLOCK entries, all temporaries in cache."""
        out, P, T = np.empty(p.p), np.empty(BLOCK), np.empty(BLOCK)
        for b in blocks(p.p):
            k = b.stop - b.start
            w1, w2, w3, w4 = W[:, b]
            v1, v2, v3, v4 = V[:, b]
            o, q, t = out[b], P[:k], T[:k]
            np.multiply(v1, w2, out=o)
            o += np.multiply(w1, v2, out=t)
            np.multiply(w1, w2, out=q)
            o *= w3
            o += np.multiply(q, v3, out=t)
            q *= w3
            o *= w4
            o += np.multiply(q, v4, out=t)
        return out

    jvp_baselines = {"plain numpy": plain_jvp, "fused numpy floor": floor_jvp}
    vjp_baselines = {"plain numpy": plain_vjp}
    try:
        import jax
        import jax.numpy as jnp

        from paramgeo.adapters._jax import _x64
    except ImportError:
        jax = None
    if jax is not None:
        with _x64(jax):
            def f(t):
                w1, w2, w3, w4 = jnp.reshape(t, (depth, -1))
                return w1 * w2 * w3 * w4

            jvp = jax.jit(lambda t, u: jax.jvp(f, (t,), (u,))[1])
            vjp = jax.jit(lambda t, c: jax.vjp(f, t)[1](c)[0])
            jt, jv, jw = (jnp.asarray(a) for a in (theta, v, w))
            jvp(jt, jv).block_until_ready(), vjp(jt, jw).block_until_ready()
            jvp_baselines["jitted JAX"] = lambda: jvp(jt, jv).block_until_ready()
            vjp_baselines["jitted JAX"] = lambda: vjp(jt, jw).block_until_ready()
            _rows(row, repeats, n, p, theta, v, w, jvp_baselines, vjp_baselines)
    else:
        _rows(row, repeats, n, p, theta, v, w, jvp_baselines, vjp_baselines)


def _rows(row, repeats, n, p, theta, v, w, jvp_baselines, vjp_baselines):
    targets = {"jitted JAX": TARGET, "fused numpy floor": TARGET}
    row.many(f"deep-diagonal n={n:.0e} depth 4: JVP", lambda: p.jvp(theta, v), jvp_baselines,
             repeats, targets=targets)
    row.many(f"deep-diagonal n={n:.0e} depth 4: VJP", lambda: p.vjp(theta, w), vjp_baselines,
             repeats, targets=targets)
