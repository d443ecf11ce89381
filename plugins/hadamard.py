"""Hadamard product: beta = u * v (elementwise), u, v in R^p.

The two-layer diagonal linear network x -> <u * v, x>. Gradient flow from the balanced
initialisation u = v = alpha 1 has the implicit bias of the hyperbolic entropy (interpolating
between l1 for alpha -> 0 and l2 for alpha -> infinity).

* Jacobian: J = [diag(v), diag(u)] (p x 2p); J (du, dv) = v * du + u * dv;
  J^T w = (w * v, w * u).
* Symmetry: rescalings (u, v) -> (c u, v / c), c in (R\\{0})^p, dimension p; the orbit of
  coordinate i degenerates where u_i = v_i = 0.
* Generic rank p; quotient dimension 2p - p = p.
* Horizontal projection, per coordinate: the vertical direction is g_i = (u_i, -v_i), so
  h_i = x_i - (<x_i, g_i> / |g_i|^2) g_i (and h_i = x_i where g_i = 0).
* Architecture: input i -> hidden i (weight u_i) -> output (weight v_i).

References: Hoff (2017), "Lasso, fractional norm and structured sparse estimation using a
Hadamard product parametrization"; Woodworth, Gunasekar, Lee, Moroshko, Savarese, Golan,
Soudry, Srebro (2020), "Kernel and rich regimes in overparametrized models"; Vaskevicius,
Kanade, Rebeschini (2019), "Implicit regularization for optimal sparse recovery".
"""

import autograd.numpy as anp
import numpy as np

from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.symmetry import ScalingTorus


class Hadamard(Parameterization):
    """beta = u * v for u, v in R^p; symmetry (R\\{0})^p rescalings; generic rank p."""

    name = "hadamard"
    size_params = {"p": Size("int", default=5, minimum=1, help="number of coordinates")}
    capabilities = frozenset(
        {"jvp", "vjp", "jacobian", "symmetry", "symbolic", "architecture",
         "horizontal_projection"}
    )
    references = (
        "Hoff (2017) Lasso, fractional norm and structured sparse estimation using a Hadamard "
        "product parametrization",
        "Woodworth et al. (2020) Kernel and rich regimes in overparametrized models",
    )

    def make_spec(self):
        return ParamSpec(u=(self.p,), v=(self.p,))

    def make_predictor_shape(self):
        return (self.p,)

    def forward(self, theta):
        return theta[: self.p] * theta[self.p:]

    def _uv(self, theta):
        theta = np.asarray(theta, float)
        return theta[: self.p], theta[self.p:]

    def jacobian(self, theta):
        u, v = self._uv(theta)
        return np.hstack([np.diag(v), np.diag(u)])

    def jvp(self, theta, x):
        u, v = self._uv(theta)
        du, dv = self._uv(x)
        return v * du + u * dv

    def vjp(self, theta, w):
        u, v = self._uv(theta)
        return np.concatenate([w * v, w * u])

    def horizontal_projection(self, theta, x):
        u, v = self._uv(theta)
        xu, xv = self._uv(x)
        norm2 = u * u + v * v
        coef = np.where(norm2 > 0, (xu * u - xv * v) / np.where(norm2 > 0, norm2, 1.0), 0.0)
        return np.concatenate([xu - coef * u, xv + coef * v])

    def symmetry(self):
        eye = np.eye(self.p, dtype=int)
        return ScalingTorus(np.hstack([eye, -eye]), signed=True)

    def symbolic(self):
        import sympy

        u = sympy.symbols(f"u_0:{self.p}", real=True)
        v = sympy.symbols(f"v_0:{self.p}", real=True)
        return list(u) + list(v), [a * b for a, b in zip(u, v)]

    def architecture(self):
        import networkx as nx

        g = nx.DiGraph()
        g.add_node("out", layer=2)
        for i in range(self.p):
            g.add_node(f"x{i}", layer=0)
            g.add_node(f"h{i}", layer=1)
            g.add_edge(f"x{i}", f"h{i}", index=i, block="u")
            g.add_edge(f"h{i}", "out", index=self.p + i, block="v")
        return g
