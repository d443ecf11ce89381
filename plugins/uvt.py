"""UV^T: phi(U, V) = U V^T for U in R^{m x r}, V in R^{n x r} (r <= min(m, n)).

Matrix factorization, low-rank matrix sensing and completion, untied attention scores
S = W_Q W_K^T, and the linear two-layer network x -> U V^T x all use this map.

* Jacobian-vector product: dphi(U, V)[dU, dV] = dU V^T + U dV^T.
* Vector-Jacobian product: J^T W = (W V, W^T U).
* Jacobian entries: d(U V^T)_{ab} / dU_{ck} = delta_ac V_bk,
  d(U V^T)_{ab} / dV_{ck} = U_ak delta_bc.
* Symmetry: GL(r) acting (U, V) -> (U A, V A^{-T}); vertical space {(U L, -V L^T) : L in gl(r)},
  of dimension r^2 where U and V have full column rank (then the action is free).
* Rank at (U, V): mn - (m - rank U)(n - rank V), from the singular values sqrt(a_i + b_j) of J
  (a, b the squared singular values of U and V, padded with zeros; ``rank_at``).
* Generic rank r(m + n - r): the dimension of the manifold of m x n matrices of rank r
  (Mishra et al. 2014, Section 2; Absil, Mahony, Sepulchre 2008); quotient dimension
  r(m + n) - r^2 = r(m + n - r), so phi is generically an immersion of the quotient.
* Euclidean horizontal projection: h = (dU - U L, dV + V L^T) with L solving the Sylvester
  equation (U^T U) L + L (V^T V) = U^T dU - dV^T V; solved in the eigenbases of U^T U and V^T V
  (divide by a_i + b_j; pseudo-inverse where that vanishes, i.e. at rank-deficient factors).
  The Euclidean metric is invariant only under O(r), not GL(r): the induced "quotient metric" on
  U V^T depends on the point of the fiber (it is not a Riemannian quotient metric for GL(r)).
* Balanced metric (Mishra, Meyer, Bonnabel, Sepulchre 2014, eq. for the "balanced" quotient
  geometry; Manopt ``fixedrankfactory_2factors``):
      g_(U,V)((xU, xV), (yU, yV)) = tr((U^T U)^{-1} xU^T yU) + tr((V^T V)^{-1} xV^T yV),
  invariant under the whole GL(r) action, so it descends to a Riemannian metric on the
  fixed-rank manifold. Horizontal projection for it: h = (dU - U L, dV + V L^T) with
  Y = L^T solving S Y + Y S = dU^T U (V^T V) - (U^T U) V^T dV, S = (U^T U)(V^T V); S is
  similar to the SPD matrix K = G_U^{1/2} G_V G_U^{1/2} = Q diag(mu) Q^T through
  P = G_U^{1/2} Q, so Y = P [(P^{-1} C P)_ij / (mu_i + mu_j)] P^{-1} in closed form.
  Horizontal lift of a tangent xi of the rank-r manifold at X = U V^T: the balanced projection
  of the preimage (xi - P_U xi / 2) V G_V^{-1}, (xi^T - P_V xi^T / 2) U G_U^{-1}.
* Where the two agree: at points with U^T U = V^T V = c I both Sylvester equations reduce to
  2 c L = U^T dU - dV^T V, so the horizontal spaces coincide and g_balanced = g_Euclid / c.

References: Mishra, Meyer, Bonnabel, Sepulchre (2014), "Fixed-rank matrix factorizations and
Riemannian low-rank optimization", Computational Statistics 29(3-4); Meyer, Bonnabel, Sepulchre
(2011), "Linear regression under fixed-rank constraints: a Riemannian approach", ICML; Absil,
Mahony, Sepulchre (2008), "Optimization algorithms on matrix manifolds"; Boumal, Mishra, Absil,
Sepulchre (2014), "Manopt, a Matlab toolbox for optimization on manifolds".
"""

import autograd.numpy as anp
import numpy as np

from paramgeo import Parameterization, ParamSpec, ShapeError, Size, SizeError
from paramgeo.geometry.factor_spectra import product_jacobian_singular_values
from paramgeo.geometry import solve_sylvester_psd
from paramgeo.linalg import decide_rank
from paramgeo.symmetry import GeneralLinearGroup, blocks_of


class UVT(Parameterization):
    """phi(U, V) = U V^T, U in R^{m x r}, V in R^{n x r}; symmetry GL(r); quotient = rank r.

    The quotient (the m x n matrices of rank r) carries the Euclidean horizontal geometry
    (``horizontal_projection``) and the GL(r)-invariant balanced metric of Mishra et al.
    (``balanced_metric``, ``balanced_horizontal_projection``, ``balanced_horizontal_lift``,
    ``balanced_quotient_metric``)."""

    name = "uvt"
    size_params = {
        "m": Size("int", default=4, minimum=1, help="rows of U (predictor is m x n)"),
        "n": Size("int", default=3, minimum=1, help="rows of V (predictor is m x n)"),
        "r": Size("int", default=2, minimum=1, help="columns of U and V (factor rank)"),
    }
    capabilities = frozenset(
        {"jvp", "vjp", "jacobian", "symmetry", "symbolic", "horizontal_projection",
         "quadratic_forms", "rank_at", "learning_coefficient", "batched_vjp"}
    )
    references = (
        "Mishra, Meyer, Bonnabel, Sepulchre (2014) Fixed-rank matrix factorizations and "
        "Riemannian low-rank optimization",
        "Meyer, Bonnabel, Sepulchre (2011) Linear regression under fixed-rank constraints: "
        "a Riemannian approach",
        "Absil, Mahony, Sepulchre (2008) Optimization algorithms on matrix manifolds",
    )

    def validate_sizes(self):
        # the sizes m, n are kept as rows, cols: the contract's attributes m, n are the
        # predictor and parameter dimensions (m n and (m + n) r here)
        self.rows, self.cols = self.sizes["m"], self.sizes["n"]
        if self.r > min(self.rows, self.cols):
            raise SizeError(
                f"{self.name}: r={self.r} exceeds min(m, n)={min(self.rows, self.cols)}; then "
                "U V^T is generically of full rank and GL(r) no longer acts freely (the fixed-rank "
                "quotient geometry needs r <= min(m, n)); choose r <= min(m, n)"
            )

    def make_spec(self):
        return ParamSpec(U=(self.rows, self.r), V=(self.cols, self.r))

    def make_predictor_shape(self):
        return (self.rows, self.cols)

    def forward(self, theta):
        U = anp.reshape(theta[: self.rows * self.r], (self.rows, self.r))
        V = anp.reshape(theta[self.rows * self.r:], (self.cols, self.r))
        return anp.dot(U, V.T)

    def random_point(self, rng):
        return rng.standard_normal(self.n) / np.sqrt(self.r)

    def _UV(self, theta):
        theta = np.asarray(theta, float)
        k = self.rows * self.r
        return theta[:k].reshape(self.rows, self.r), theta[k:].reshape(self.cols, self.r)

    def _pack(self, U, V):
        return np.concatenate([np.ravel(U), np.ravel(V)])

    # ------------------------------------------------------------------ derivatives
    #: m x n up to which the JVP is the two products dU V^T + U dV^T (the stacked copies of
    #: the one-product form cost more than they save on outputs that stay in cache; see uut)
    PAIR_MAX_ENTRIES = 10_000

    def jvp(self, theta, v):
        U, V = self._UV(theta)
        dU, dV = self._UV(v)
        if self.rows * self.cols <= self.PAIR_MAX_ENTRIES:
            return (dU @ V.T + U @ dV.T).ravel()
        # dU V^T + U dV^T = [dU, U] [V, dV]^T: one product, one pass over the output
        return (np.hstack([dU, U]) @ np.hstack([V, dV]).T).ravel()

    def vjp(self, theta, w):
        U, V = self._UV(theta)
        W = w.reshape(self.rows, self.cols)
        return self._pack(W @ V, W.T @ U)

    def batched_vjp(self, thetas):
        """Phi[k] = U_k V_k^T and vjp(G)[k] = (G_k V_k, G_k^T U_k) for thetas of shape (K, n)."""
        thetas = np.asarray(thetas, float)
        k = self.rows * self.r
        U = thetas[:, :k].reshape(-1, self.rows, self.r)
        V = thetas[:, k:].reshape(-1, self.cols, self.r)

        def vjp(G):
            G = np.reshape(G, (-1, self.rows, self.cols))
            return np.concatenate([(G @ V).reshape(len(G), -1),
                                   (G.transpose(0, 2, 1) @ U).reshape(len(G), -1)], axis=1)

        return U @ V.transpose(0, 2, 1), vjp

    def jacobian(self, theta):
        U, V = self._UV(theta)
        JU = np.einsum("ac,bk->abck", np.eye(self.rows), V).reshape(self.rows * self.cols, -1)
        JV = np.einsum("ak,bc->abck", U, np.eye(self.cols)).reshape(self.rows * self.cols, -1)
        return np.hstack([JU, JV])

    def rank_at(self, theta, policy=None):
        """rank J(U, V) from the singular values of J in closed form, sqrt(a_i + b_j) over the
        squared singular values a of U and b of V padded with zeros (J J^T is the Kronecker sum
        of U U^T and V V^T; :func:`paramgeo.geometry.factor_spectra.product_jacobian_singular_values`):
        rank J = mn - (m - rank U)(n - rank V). ``singular_values`` are those of J."""
        return decide_rank(product_jacobian_singular_values(*self._UV(theta)), policy,
                           what="J of uvt")

    def learning_coefficient(self, theta):
        """Reduced-rank regression (Aoyagi and Watanabe 2005, Theorem 1) at a true parameter
        whose factors U and V both have the rank r0 of U V^T (the deepest true parameters, where
        the local coefficient is the global one): Aoyagi's input M = n (rows of V), hidden
        H = r, output N = m (rows of U), with U = B and V = A^T for y = B A x. None at other
        points (the regular case d / 2 then applies where rank J is generic)."""
        from paramgeo.llc import reduced_rank_regression

        U, V = self._UV(theta)
        ranks = [decide_rank(np.linalg.svd(X, compute_uv=False), warn=False).rank
                 for X in (U, V, U @ V.T)]
        if ranks[0] != ranks[2] or ranks[1] != ranks[2]:
            return None
        return reduced_rank_regression(self.cols, self.r, self.rows, ranks[2])

    # ------------------------------------------------------------------ symmetry
    def symmetry(self):
        left, right = self.spec.blocks  # U, V (the lora subclass names them B, A_T)
        return GeneralLinearGroup(
            self.r, right=blocks_of(self.spec, left), contragredient=blocks_of(self.spec, right)
        )

    def symbolic(self):
        import sympy

        U = sympy.Matrix(self.rows, self.r, lambda i, k: sympy.Symbol(f"U_{i}_{k}", real=True))
        V = sympy.Matrix(self.cols, self.r, lambda j, k: sympy.Symbol(f"V_{j}_{k}", real=True))
        return list(U) + list(V), list(U * V.T)

    def quadratic_forms(self, theta, X):
        # square case m = n = d: x^T U V^T x = <U^T x, V^T x>; for the symmetric
        # W = sum_i c_i x_i x_i^T, J^T vec(W) = (W V, W^T U) = (X^T diag(c) X V, X^T diag(c) X U).
        if self.rows != self.cols:
            raise ShapeError(f"{self.name}: quadratic forms x^T U V^T x need m = n, got "
                             f"m={self.rows}, n={self.cols}")
        U, V = self._UV(theta)
        X = np.asarray(X, float)
        P, R = X @ U, X @ V

        def vjp(c):
            c = np.asarray(c, float)[:, None]
            return self._pack(X.T @ (c * R), X.T @ (c * P))

        return np.sum(P * R, axis=1), vjp

    # phi is a homogeneous quadratic map, so J(theta) is linear in theta: the derivative of J
    # along v is J(v), and (sum_i w_i Hess phi_i) v = J(v)^T w.
    def jacobian_derivative(self, theta, v):
        return self.jacobian(v)

    def hessian_vp(self, theta, w, v):
        return self.vjp(v, w)

    # ------------------------------------------------------------------ Euclidean geometry
    def horizontal_projection(self, theta, v):
        """Euclidean horizontal projection h = (dU - U L, dV + V L^T), where L solves
        (U^T U) L + L (V^T V) = U^T dU - dV^T V (pseudo-inverse at rank-deficient factors)."""
        U, V = self._UV(theta)
        dU, dV = self._UV(v)
        L = solve_sylvester_psd(U.T @ U, V.T @ V, U.T @ dU - dV.T @ V)
        return self._pack(dU - U @ L, dV + V @ L.T)

    # ------------------------------------------------------------------ balanced geometry
    def _grams(self, U, V, what):
        GU, GV = U.T @ U, V.T @ V
        for name, G in (("U", GU), ("V", GV)):
            s = np.linalg.eigvalsh(G)
            if s[0] <= 1e-12 * max(s[-1], 1e-300):
                raise ShapeError(
                    f"{self.name}: the balanced metric ({what}) needs {name} of full column rank "
                    f"r={self.r} (smallest eigenvalue of {name}^T {name} is {s[0]:.2e}); "
                    "use a point of the fixed-rank manifold or the Euclidean geometry"
                )
        return GU, GV

    def balanced_metric(self, theta, xi, eta):
        """Balanced metric of Mishra et al. (2014):
        g(xi, eta) = tr((U^T U)^{-1} xi_U^T eta_U) + tr((V^T V)^{-1} xi_V^T eta_V)."""
        U, V = self._UV(theta)
        GU, GV = self._grams(U, V, "balanced_metric")
        xU, xV = self._UV(xi)
        yU, yV = self._UV(eta)
        return float(np.trace(np.linalg.solve(GU, xU.T @ yU))
                     + np.trace(np.linalg.solve(GV, xV.T @ yV)))

    def balanced_horizontal_projection(self, theta, v):
        """Projection of v onto the horizontal space of the balanced metric, orthogonal for that
        metric: h = (dU - U L, dV + V L^T), Y = L^T solving S Y + Y S = C with
        S = (U^T U)(V^T V), C = dU^T U (V^T V) - (U^T U) V^T dV (Mishra et al. 2014; Manopt
        fixedrankfactory_2factors ``proj``), solved through the similarity of S to the SPD
        matrix G_U^{1/2} G_V G_U^{1/2}."""
        U, V = self._UV(theta)
        GU, GV = self._grams(U, V, "balanced_horizontal_projection")
        dU, dV = self._UV(v)
        g, E = np.linalg.eigh(GU)
        root, inv_root = (E * np.sqrt(g)) @ E.T, (E / np.sqrt(g)) @ E.T
        mu, Q = np.linalg.eigh(root @ GV @ root)
        P, P_inv = root @ Q, Q.T @ inv_root
        C = dU.T @ U @ GV - GU @ V.T @ dV
        Y = P @ ((P_inv @ C @ P) / (mu[:, None] + mu[None, :])) @ P_inv
        L = Y.T
        return self._pack(dU - U @ L, dV + V @ L.T)

    def balanced_horizontal_lift(self, theta, xi):
        """The balanced-horizontal (dU, dV) with dU V^T + U dV^T = xi, for xi tangent to the
        rank-r manifold at X = U V^T: the balanced projection of the preimage
        dU = (xi - P_U xi / 2) V G_V^{-1}, dV = (xi^T - P_V xi^T / 2) U G_U^{-1},
        P_U = U G_U^{-1} U^T, P_V = V G_V^{-1} V^T. Raises ShapeError if xi is not tangent."""
        U, V = self._UV(theta)
        GU, GV = self._grams(U, V, "balanced_horizontal_lift")
        xi = np.reshape(np.asarray(xi, float), (self.rows, self.cols))
        PU = U @ np.linalg.solve(GU, U.T)
        PV = V @ np.linalg.solve(GV, V.T)
        normal = xi - PU @ xi - xi @ PV + PU @ xi @ PV
        if np.linalg.norm(normal) > 1e-8 * max(np.linalg.norm(xi), 1.0):
            raise ShapeError(
                f"{self.name}: xi is not tangent to the rank-r manifold at U V^T (its component "
                f"(I - P_U) xi (I - P_V) has norm {np.linalg.norm(normal):.2e}); project it first"
            )
        dU = np.linalg.solve(GV, V.T @ (xi - 0.5 * PU @ xi).T).T
        dV = np.linalg.solve(GU, U.T @ (xi.T - 0.5 * PV @ xi.T).T).T
        return self.balanced_horizontal_projection(theta, self._pack(dU, dV))

    def balanced_quotient_metric(self, theta, xi, eta):
        """The balanced Riemannian metric of the rank-r manifold at X = U V^T on tangent
        matrices xi, eta: g(lift(xi), lift(eta)); independent of the point of the fiber."""
        lift = self.balanced_horizontal_lift
        return self.balanced_metric(theta, lift(theta, xi), lift(theta, eta))
