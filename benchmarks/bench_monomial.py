"""Benchmark rows for the monomial plugin: the closed-form Jacobian, JVP and VJP (adjoint
polynomials, one polynomial pass instead of one backward pass per coefficient) against
autograd: the dense Jacobian (m reverse passes) and autograd's own forward / reverse mode
through the traceable expansion."""

import numpy as np

import paramgeo
from paramgeo import Parameterization


def autograd_dense_jacobian(param, theta):
    """The naive route: autograd's dense m x n Jacobian of forward()."""
    return Parameterization.jacobian(param, theta)


def bench(row, repeats):
    rng = np.random.default_rng(0)
    for widths, degree in (((2, 3, 3, 1), 3), ((3, 4, 4, 1), 3), ((6, 10, 10, 1), 3),
                           ((20, 40, 40, 2), 2)):
        p = paramgeo.get("monomial", widths=widths, degree=degree)
        theta = p.random_point(rng)
        v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
        big = p.m > 1000
        label = f"monomial {','.join(map(str, widths))} k={degree} ({p.m}x{p.n})"
        # the dense autograd Jacobian takes ~20 s at 2002 x 170: time it once there
        if p.n * p.m < 10 ** 6:  # the dense autograd J at 17710 x 2480 would take minutes
            row(f"{label}: J closed vs autograd dense",
                lambda: p.jacobian(theta), lambda: autograd_dense_jacobian(p, theta),
                1 if big else repeats, target=100 if big else None)
        # JVP: forward mode beside the forward pass; VJP: adjoint polynomials (target: at
        # least autograd's speed)
        row(f"{label}: JVP closed vs autograd fwd",
            lambda: p.jvp(theta, v), lambda: Parameterization.jvp(p, theta, v), repeats,
            target=1.0)
        row(f"{label}: VJP closed vs autograd rev",
            lambda: p.vjp(theta, w), lambda: Parameterization.vjp(p, theta, w), repeats,
            target=1.0)
