"""deep-diagonal at scale: the cofactors c_l = prod_{k != l} w_l (the Jacobian's diagonals, used
by every product) at p = 5e6, depth 4, against the fused numpy expression written for depth 4
(target: within 2x, ratio >= 0.5), and the JVP against autograd's at p = 1e5."""

import numpy as np

import paramgeo
from paramgeo import Parameterization


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
