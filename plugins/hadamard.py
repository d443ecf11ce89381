"""Hadamard product: beta = u * v (elementwise), u, v in R^p.

The two-layer diagonal linear network x -> <u * v, x>. Gradient flow from the balanced
initialisation u = v = alpha 1 has the implicit bias of the hyperbolic entropy (interpolating
between l1 for alpha -> 0 and l2 for alpha -> infinity).

* Jacobian: J = [diag(v), diag(u)] (p x 2p); J (du, dv) = v * du + u * dv;
  J^T w = (w * v, w * u).
* Symmetry: rescalings (u, v) -> (c u, v / c), c in (R\\{0})^p, dimension p; the orbit of
  coordinate i degenerates where u_i = v_i = 0.
* Generic rank p; quotient dimension 2p - p = p. At a point, J J^T = diag(u^2 + v^2): the
  singular values are sqrt(u_i^2 + v_i^2) and rank J = #{i : (u_i, v_i) != 0} (``rank_at``).
* Horizontal projection, per coordinate: the vertical direction is g_i = (u_i, -v_i), so
  h_i = x_i - (<x_i, g_i> / |g_i|^2) g_i (and h_i = x_i where g_i = 0).
* Architecture: input i -> hidden i (weight u_i) -> output (weight v_i).
* Mirror potential (the fields grad beta_i commute): per coordinate u_i^2 - v_i^2 = c_i is
  conserved and u_i^2 + v_i^2 = sqrt(c_i^2 + 4 beta_i^2), so d beta/dt = -(u^2 + v^2) grad ell
  is the mirror flow of R with R''(beta_i) = 1 / sqrt(c_i^2 + 4 beta_i^2): with a_i = |c_i| / 2,
  R(beta) = 1/2 sum_i [beta_i arcsinh(beta_i / a_i) - sqrt(beta_i^2 + a_i^2)
                       - beta_i arcsinh(beta0_i / a_i) + sqrt(beta0_i^2 + a_i^2)]
  (grad R(beta0) = 0), the hyperbolic entropy; where c_i = 0 (|u0_i| = |v0_i| != 0) the sign
  of beta_i is frozen and R_i = 1/2 [|beta_i| log(|beta_i| / |beta0_i|) - |beta_i| + |beta0_i|].
  ``init_at_scale(alpha)`` is u = 2 alpha, v = 0: under u = w+ + w-, v = w+ - w- this is
  Woodworth et al.'s w+ = w- = alpha for beta = w+^2 - w-^2, and R is their
  Q_alpha(beta) = alpha^2 sum_i [2 - sqrt(4 + z_i^2) + z_i arcsinh(z_i / 2)], z = beta / alpha^2,
  divided by 2 (gradient flow on (u, v) runs at half the speed of the flow on (w+, w-)).

References: Hoff (2017), "Lasso, fractional norm and structured sparse estimation using a
Hadamard product parametrization"; Woodworth, Gunasekar, Lee, Moroshko, Savarese, Golan,
Soudry, Srebro (2020), "Kernel and rich regimes in overparametrized models"; Vaskevicius,
Kanade, Rebeschini (2019), "Implicit regularization for optimal sparse recovery".
"""

import numpy as np

from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.linalg import decide_rank
from paramgeo.linalg.numerics import BLOCK, blocks
from paramgeo.symmetry import ScalingTorus


class Hadamard(Parameterization):
    """beta = u * v for u, v in R^p; symmetry (R\\{0})^p rescalings; generic rank p."""

    name = "hadamard"
    size_params = {"p": Size("int", default=5, minimum=1, help="number of coordinates")}
    capabilities = frozenset(
        {"jvp", "vjp", "jacobian", "symmetry", "symbolic", "architecture",
         "horizontal_projection", "mirror_potential", "sparse_jacobian", "rank_at",
         "learning_coefficient"}
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

    def sparse_jacobian(self, theta):
        import scipy.sparse as sp

        u, v = self._uv(theta)
        return sp.hstack([sp.diags(v), sp.diags(u)], format="csr")

    def jvp(self, theta, x):
        """v * du + u * dv; beyond one block (numerics.BLOCK entries) fused block by block, so
        that theta and x are read once and no p-vector temporary is written."""
        p = self.p
        if p <= BLOCK:  # theta and x as the guard passes them: float vectors of length n
            return theta[p:] * x[:p] + theta[:p] * x[p:]
        u, v = self._uv(theta)
        du, dv = self._uv(x)
        out, T = np.empty(p), np.empty(BLOCK)
        for b in blocks(p):
            t = T[:b.stop - b.start]
            np.multiply(v[b], du[b], out=out[b])
            out[b] += np.multiply(u[b], dv[b], out=t)
        return out

    def vjp(self, theta, w):
        """(w * v, w * u), each written into its half of the result (no concatenated copy)."""
        u, v = self._uv(theta)
        out = np.empty(2 * self.p)
        np.multiply(w, v, out=out[:self.p])
        np.multiply(w, u, out=out[self.p:])
        return out

    # phi is a homogeneous quadratic map, so J(theta) is linear in theta: the derivative of J
    # along v is J(v), and (sum_i w_i Hess phi_i) v = J(v)^T w.
    def jacobian_derivative(self, theta, v):
        return self.jacobian(v)

    def hessian_vp(self, theta, w, v):
        return self.vjp(v, w)

    def rank_at(self, theta, policy=None):
        """rank J = #{i : (u_i, v_i) != 0} under the policy: J J^T = diag(u^2 + v^2), so the
        singular values of J are sqrt(u_i^2 + v_i^2) (``singular_values``)."""
        return decide_rank(np.hypot(*self._uv(theta)), policy, what="J of hadamard")

    def learning_coefficient(self, theta):
        """Normal crossings at any true (u*, v*), sparse truths included: K = sum_i
        (u_i v_i - u*_i v*_i)^2 separates over coordinates. Where (u*_i, v*_i) != 0 the term is
        locally a square of a coordinate (lambda_i = 1/2, m_i = 1); where u*_i = v*_i = 0 it is
        the monomial u_i^2 v_i^2 (lambda_i = 1/2, m_i = 2). So lambda = p / 2 and
        m = 1 + #{i : u*_i = v*_i = 0} (Watanabe 2009, Sec. 2.4 and 7.2;
        :func:`paramgeo.llc.normal_crossing_sum`)."""
        from paramgeo.llc import monomial, normal_crossing_sum

        u, v = self._uv(theta)
        both = int(np.sum((u == 0) & (v == 0)))
        terms = [monomial((1, 1))] * both + [(0.5, 1)] * (self.p - both)
        return normal_crossing_sum(
            terms, f"normal crossing, {both} of {self.p} coordinates with u_i = v_i = 0",
            "lambda = sum_i 1/2 = p/2, m = 1 + #{i : u_i = v_i = 0}")

    def horizontal_projection(self, theta, x):
        u, v = self._uv(theta)
        xu, xv = self._uv(x)
        norm2 = u * u + v * v
        coef = np.where(norm2 > 0, (xu * u - xv * v) / np.where(norm2 > 0, norm2, 1.0), 0.0)
        return np.concatenate([xu - coef * u, xv + coef * v])

    def init_at_scale(self, alpha):
        """u = 2 alpha, v = 0 (beta0 = 0): Woodworth et al.'s w+ = w- = alpha, see above."""
        return np.concatenate([2.0 * float(alpha) * np.ones(self.p), np.zeros(self.p)])

    def mirror_potential(self, theta0):
        """The hyperbolic entropy R of the mirror flow from theta0 (see the module docstring)."""
        from paramgeo import ParamgeoError
        from paramgeo.mirror import Potential

        u0, v0 = self._uv(theta0)
        a = np.abs(u0 * u0 - v0 * v0) / 2.0
        b0 = u0 * v0
        hyp = a > 0
        if np.any(~hyp & (b0 == 0)):
            i = int(np.flatnonzero(~hyp & (b0 == 0))[0])
            raise ParamgeoError(
                f"hadamard: u0[{i}] = v0[{i}] = 0 is stationary (beta_{i} never moves); "
                "the mirror potential needs |u0_i| + |v0_i| > 0")
        a_s = np.where(hyp, a, 1.0)
        s0 = np.sign(b0)
        ab0 = np.where(hyp, 1.0, np.abs(b0))

        def value(beta):
            beta = np.asarray(beta, float)
            hy = (beta * np.arcsinh(beta / a_s) - np.sqrt(beta ** 2 + a_s ** 2)
                  - beta * np.arcsinh(b0 / a_s) + np.sqrt(b0 ** 2 + a_s ** 2))
            b = s0 * beta
            with np.errstate(divide="ignore", invalid="ignore"):
                en = np.where(b > 0, b * np.log(np.where(b > 0, b, 1.0) / ab0) - b + ab0,
                              np.where(b == 0, ab0, np.inf))
            return float(0.5 * np.sum(np.where(hyp, hy, en)))

        def grad(beta):
            beta = np.asarray(beta, float)
            b = np.where(hyp, 1.0, s0 * beta)
            with np.errstate(divide="ignore", invalid="ignore"):
                en = s0 * np.log(b / ab0)
            return 0.5 * np.where(hyp, np.arcsinh(beta / a_s) - np.arcsinh(b0 / a_s), en)

        def hessian(beta):
            beta = np.asarray(beta, float)
            return np.diag(1.0 / np.where(hyp, 2.0 * np.sqrt(beta ** 2 + a_s ** 2),
                                          2.0 * np.abs(beta)))

        alpha = np.sqrt(a[0] / 2.0) if np.all(hyp) else 0.0
        if np.all(hyp) and np.allclose(a, a[0], rtol=1e-12) and np.all(b0 == 0):
            formula = (f"R(beta) = 1/2 sum_i [beta_i arcsinh(beta_i / (2 alpha^2)) - "
                       f"sqrt(beta_i^2 + 4 alpha^4) + 2 alpha^2], alpha = {alpha:.6g} "
                       "(hyperbolic entropy; Woodworth et al. 2020 Q_alpha / 2)")
        else:
            formula = ("R(beta) = 1/2 sum_i [beta_i arcsinh(beta_i / a_i) - sqrt(beta_i^2 + "
                       "a_i^2) - beta_i arcsinh(beta0_i / a_i) + sqrt(beta0_i^2 + a_i^2)], "
                       "a_i = |u0_i^2 - v0_i^2| / 2 (hyperbolic entropy"
                       + ("" if np.all(hyp) else "; entropy 1/2 [|b| log(|b|/|b0|) - |b| + |b0|]"
                          " where a_i = 0") + ")")
        return Potential(
            formula=formula, source="closed form",
            reference="Woodworth, Gunasekar, Lee, Moroshko, Savarese, Golan, Soudry, Srebro (2020) "
            "Kernel and rich regimes in overparametrized models, Theorem 1",
            theta0=np.concatenate([u0, v0]), beta0=b0, value=value, grad=grad, hessian=hessian)

    def symmetry(self):
        import scipy.sparse as sp

        eye = sp.identity(self.p, dtype=int, format="csr")
        return ScalingTorus(sp.hstack([eye, -eye]), signed=True)

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
