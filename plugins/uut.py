"""UU^T: phi(U) = U U^T for U in R^{d x r}.

Positive quadratic networks f_U(x) = x^T U U^T x = ||U^T x||^2, tied attention scores
S = W W^T, and the Burer-Monteiro factorization of a PSD matrix all use this map.

* Jacobian-vector product: dphi(U)[dU] = U dU^T + dU U^T.
* Vector-Jacobian product: J^T W = (W + W^T) U.
* Symmetry: O(r) acting U -> U R; vertical space {U Omega : Omega skew}, dimension
  r(r-1)/2 when rank U = r.
* Generic rank (r <= d): d r - r(r-1)/2, the dimension of the rank-r PSD matrices; for r > d
  it is d(d+1)/2. At rank U = k the rank of J drops to d k - k(k-1)/2.
* Horizontal projection: H = V - U Omega with Omega skew solving the Sylvester equation
  (U^T U) Omega + Omega (U^T U) = U^T V - V^T U, solved in the eigenbasis of U^T U with the
  pseudo-inverse where lambda_i + lambda_j = 0 (there U Omega does not depend on Omega_ij).
  The quotient metric is the Bures-Wasserstein metric on rank-r PSD matrices.

References: Burer and Monteiro (2003), "A nonlinear programming algorithm for solving
semidefinite programs via low-rank factorization"; Journee, Bach, Absil, Sepulchre (2010),
"Low-rank optimization on the cone of positive semidefinite matrices"; Massart and Absil (2020),
"Quotient geometry with simple geodesics for the manifold of fixed-rank positive-semidefinite
matrices"; Bhatia, Jain, Lim (2019), "On the Bures-Wasserstein distance between positive
definite matrices".
"""

import autograd.numpy as anp
import numpy as np

from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.geometry import solve_sylvester_psd
from paramgeo.symmetry import OrthogonalGroup, blocks_of


class UUT(Parameterization):
    """phi(U) = U U^T, U in R^{d x r}; symmetry O(r); quotient = rank-r PSD matrices."""

    name = "uut"
    size_params = {
        "d": Size("int", default=4, minimum=1, help="rows of U (predictor is d x d)"),
        "r": Size("int", default=2, minimum=1, help="columns of U (the factor rank)"),
    }
    capabilities = frozenset(
        {"jvp", "vjp", "jacobian", "symmetry", "symbolic", "horizontal_projection"}
    )
    references = (
        "Burer, Monteiro (2003) A nonlinear programming algorithm for solving semidefinite "
        "programs via low-rank factorization",
        "Massart, Absil (2020) Quotient geometry with simple geodesics for the manifold of "
        "fixed-rank positive-semidefinite matrices",
    )

    def make_spec(self):
        return ParamSpec(U=(self.d, self.r))

    def make_predictor_shape(self):
        return (self.d, self.d)

    def forward(self, theta):
        U = anp.reshape(theta, (self.d, self.r))
        return anp.dot(U, U.T)

    def random_point(self, rng):
        return rng.standard_normal(self.n) / np.sqrt(self.r)

    def _U(self, theta):
        return np.reshape(theta, (self.d, self.r))

    def jvp(self, theta, v):
        U, dU = self._U(theta), self._U(v)
        P = U @ dU.T
        return (P + P.T).ravel()

    def vjp(self, theta, w):
        W = np.reshape(w, (self.d, self.d))
        return ((W + W.T) @ self._U(theta)).ravel()

    def jacobian(self, theta):
        # d(U U^T)_{ab} / dU_{ck} = delta_ac U_bk + delta_bc U_ak
        U = self._U(theta)
        eye = np.eye(self.d)
        J = np.einsum("ac,bk->abck", eye, U) + np.einsum("bc,ak->abck", eye, U)
        return J.reshape(self.m, self.n)

    def horizontal_projection(self, theta, v):
        U, V = self._U(theta), self._U(v)
        M = U.T @ U
        omega = solve_sylvester_psd(M, M, U.T @ V - V.T @ U)
        return (V - U @ omega).ravel()

    def symmetry(self):
        return OrthogonalGroup(self.r, right=blocks_of(self.spec, "U"))

    def symbolic(self):
        import sympy

        U = sympy.Matrix(self.d, self.r, lambda i, k: sympy.Symbol(f"U_{i}_{k}", real=True))
        return list(U), list(U * U.T)
