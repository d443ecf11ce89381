"""Benchmark rows for the guarded call layer (:mod:`paramgeo.contract.guard`): a tiny plugin's forward,
jvp and vjp through the guard against the same methods unguarded (the plugin's own functions,
``__wrapped__``), so the ratio is the guard's overhead on the cheapest calls (1 = none)."""

import autograd.numpy as anp
import numpy as np

from paramgeo import Parameterization, ParamSpec


class Tiny(Parameterization):
    """phi(u, v) = u * v in R^3 with closed-form J v and J^T w: calls of about a microsecond."""

    name = "bench-tiny"
    capabilities = frozenset({"jvp", "vjp"})

    def make_spec(self):
        return ParamSpec(u=(3,), v=(3,))

    def make_predictor_shape(self):
        return (3,)

    def forward(self, theta):
        return theta[:3] * theta[3:]

    def jvp(self, theta, v):
        return theta[3:] * v[:3] + theta[:3] * v[3:]

    def vjp(self, theta, w):
        return anp.concatenate([theta[3:] * w, theta[:3] * w])


def bench(row, repeats):
    p = Tiny()
    rng = np.random.default_rng(0)
    theta, v, w = rng.standard_normal(6), rng.standard_normal(6), rng.standard_normal(3)
    for method, args in (("forward", (theta,)), ("jvp", (theta, v)), ("vjp", (theta, w))):
        guarded = getattr(p, method)
        raw = getattr(Tiny, method).__wrapped__
        row(f"guard: tiny plugin {method} (guarded vs unguarded)",
            lambda guarded=guarded, args=args: guarded(*args),
            lambda raw=raw, args=args: raw(p, *args), 2000 * repeats)
