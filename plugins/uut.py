"""UU^T: phi(U) = U U^T for U in R^{d x r}.

Positive quadratic networks f_U(x) = x^T U U^T x = ||U^T x||^2, tied attention scores
S = W W^T, and the Burer-Monteiro factorization of a PSD matrix all use this map.

* Jacobian-vector product: dphi(U)[dU] = U dU^T + dU U^T.
* Vector-Jacobian product: J^T W = (W + W^T) U.
* Symmetry: O(r) acting U -> U R; vertical space {U Omega : Omega skew}, dimension
  r(r-1)/2 when rank U = r.
* Generic rank (r <= d): d r - r(r-1)/2, the dimension of the rank-r PSD matrices; for r > d
  it is d(d+1)/2. At rank U = k the rank of J drops to d k - k(k-1)/2: the singular values of
  J are sqrt(2 (a_i + a_j)), i <= j, over the squared singular values a of U (``rank_at``).
* Horizontal projection: H = V - U Omega with Omega skew solving the Sylvester equation
  (U^T U) Omega + Omega (U^T U) = U^T V - V^T U, solved in the eigenbasis of U^T U with the
  pseudo-inverse where lambda_i + lambda_j = 0 (there U Omega does not depend on Omega_ij).
  The quotient metric is the Bures-Wasserstein metric on rank-r PSD matrices.
* Mirror potential, valid in commuting regimes only (the fields of UU^T do not commute for
  generic losses, so no potential serves every loss). With G = grad ell(Q) symmetric, gradient
  flow dU/dt = -2 G U gives dQ/dt = -2 (G Q + Q G). If the loss is ell(Q) =
  sum_i f_i(<A_i, Q>) with symmetric A_i that commute with each other and with Q0 = U0 U0^T,
  then in a joint orthonormal eigenbasis E of {A_i, Q0} the flow stays diagonal,
  Q(t) = E diag(lambda(t)) E^T, and with g = grad_lambda ell(E diag(lambda) E^T)
      d lambda_j / dt = -4 lambda_j g_j,   i.e.   d/dt (1/4) log lambda_j = -g_j,
  the mirror flow of the entropy R(lambda) = 1/4 sum_j [lambda_j log(lambda_j / lambda0_j)
  - lambda_j + lambda0_j] (grad R(lambda0) = 0; coordinates with lambda0_j = 0 never move).
  Basis-free, this is d/dt grad R(Q) = -G for the von Neumann relative entropy
      R(Q) = 1/4 tr[Q log Q - Q log Q0 - Q + Q0]       (+inf unless range Q is in range Q0),
  the potential of the matrix exponentiated gradient (Tsuda, Raetsch, Warmuth 2005); its
  alpha -> 0 limit from U0 = alpha I is the minimum-trace (nuclear-norm) bias of Gunasekar et
  al. (2017, Theorem 1, commuting measurements). ``mirror_potential(theta0)`` returns it;
  ``paramgeo.mirror.commuting_regime`` decides when a loss and theta0 are in such a regime and
  restricts it to the joint spectral coordinates. ``init_at_scale(alpha)`` is U0 = alpha I_{d x r}.

References: Burer and Monteiro (2003), "A nonlinear programming algorithm for solving
semidefinite programs via low-rank factorization"; Journee, Bach, Absil, Sepulchre (2010),
"Low-rank optimization on the cone of positive semidefinite matrices"; Massart and Absil (2020),
"Quotient geometry with simple geodesics for the manifold of fixed-rank positive-semidefinite
matrices"; Bhatia, Jain, Lim (2019), "On the Bures-Wasserstein distance between positive
definite matrices"; Gunasekar, Woodworth, Bhojanapalli, Neyshabur, Srebro (2017), "Implicit
regularization in matrix factorization"; Tsuda, Raetsch, Warmuth (2005), "Matrix exponentiated
gradient updates for on-line learning and Bregman projection".
"""

import autograd.numpy as anp
import numpy as np

from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.geometry.factor_spectra import gram_jacobian_singular_values
from paramgeo.geometry import solve_sylvester_psd
from paramgeo.linalg import decide_rank
from paramgeo.symmetry import OrthogonalGroup, blocks_of


class UUT(Parameterization):
    """phi(U) = U U^T, U in R^{d x r}; symmetry O(r); quotient = rank-r PSD matrices."""

    name = "uut"
    size_params = {
        "d": Size("int", default=4, minimum=1, help="rows of U (predictor is d x d)"),
        "r": Size("int", default=2, minimum=1, help="columns of U (the factor rank)"),
    }
    capabilities = frozenset(
        {"jvp", "vjp", "jacobian", "symmetry", "symbolic", "horizontal_projection",
         "quadratic_forms", "mirror_potential", "rank_at"}
    )
    references = (
        "Burer, Monteiro (2003) A nonlinear programming algorithm for solving semidefinite "
        "programs via low-rank factorization",
        "Massart, Absil (2020) Quotient geometry with simple geodesics for the manifold of "
        "fixed-rank positive-semidefinite matrices",
        "Gunasekar, Woodworth, Bhojanapalli, Neyshabur, Srebro (2017) Implicit regularization "
        "in matrix factorization",
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
        return theta.reshape(self.d, self.r)  # the method: arrays and autograd's boxes alike

    # The JVP U dU^T + dU U^T = [U, dU] [dU, U]^T is one product of inner size 2r: computing
    # only the upper triangle (half the flops) and mirroring it costs more, because the mirror
    # is a strided pass over d^2 / 2 entries (d = 1024 ... 4000, one core: the single product
    # 0.73x-0.83x of one product U dU^T, the triangle and its mirror 0.56x-0.82x).
    # The VJP (W + W^T) U: once W outgrows the last-level cache (d >= TILED_MIN_D, W >= 42 MB)
    # it is sum over tiles I <= J of S_IJ U_J into rows I and S_IJ^T U_I into rows J,
    # S_IJ = W_IJ + W_JI^T formed in a TILE x TILE buffer: W is read from memory once and the
    # flops are those of one product W U. Below that W U + W^T U re-reads W from cache and is
    # faster (d = 2048: 22 ms against 27 ms; d = 2500: 31 ms against 25 ms).
    # Up to d = PAIR_MAX_D the two stacked copies cost more than they save, and the JVP is the
    # two products U dU^T + dU U^T (d = 20, 50, 100: 0.65x, 0.75x, 0.92x of the stacked product's
    # time; d = 200: 7x, where the two d x d temporaries leave the cache).
    TILE = 256
    TILED_MIN_D = 2304
    PAIR_MAX_D = 100

    def jvp(self, theta, v):
        U, dU = self._U(theta), self._U(v)
        if self.d <= self.PAIR_MAX_D:
            return (U @ dU.T + dU @ U.T).ravel()
        return (np.hstack([U, dU]) @ np.hstack([dU, U]).T).ravel()

    def vjp(self, theta, w):
        from scipy.linalg.blas import dgemm

        W, U = w.reshape(self.d, self.d), self._U(theta)
        d, b = self.d, self.TILE
        if d < self.TILED_MIN_D:
            return (W @ U + W.T @ U).ravel()
        out = np.zeros((d, self.r))
        S = np.empty((b, b))
        # dgemm works in Fortran order: out[I]^T += U[J]^T S_IJ^T is the C-order out[I] += S U[J]
        outT = out.T
        for i in range(0, d, b):
            ei = min(i + b, d)
            for j in range(i, d, b):
                ej = min(j + b, d)
                s = S[:ei - i, :ej - j]
                np.add(W[i:ei, j:ej], W[j:ej, i:ei].T, out=s)
                dgemm(1.0, U[j:ej].T, s.T, beta=1.0, c=outT[:, i:ei], overwrite_c=1)
                if j > i:  # out[J] += S_IJ^T U[I]
                    dgemm(1.0, U[i:ei].T, s.T, trans_b=1, beta=1.0, c=outT[:, j:ej],
                          overwrite_c=1)
        return out.ravel()

    def jacobian(self, theta):
        # d(U U^T)_{ab} / dU_{ck} = delta_ac U_bk + delta_bc U_ak
        U = self._U(theta)
        eye = np.eye(self.d)
        J = np.einsum("ac,bk->abck", eye, U) + np.einsum("bc,ak->abck", eye, U)
        return J.reshape(self.m, self.n)

    # phi is a homogeneous quadratic map, so J(theta) is linear in theta: the derivative of J
    # along v is J(v), and (sum_i w_i Hess phi_i) v = J(v)^T w = (W + W^T) V.
    def jacobian_derivative(self, theta, v):
        return self.jacobian(v)

    def hessian_vp(self, theta, w, v):
        return self.vjp(v, w)

    def rank_at(self, theta, policy=None):
        """rank J(U) from the singular values of J in closed form, sqrt(2 (a_i + a_j)) for
        i <= j with a the squared singular values of U padded with zeros
        (:func:`paramgeo.geometry.factor_spectra.gram_jacobian_singular_values`): rank J = d k - k(k-1)/2
        at rank U = k (Journee et al. 2010). ``singular_values`` are those of J; O(d r^2)."""
        return decide_rank(gram_jacobian_singular_values(self._U(theta)), policy,
                           what="J of uut")

    def quadratic_forms(self, theta, X):
        # x^T U U^T x = |U^T x|^2; J^T vec(W) = (W + W^T) U = 2 X^T diag(c) X U for
        # W = sum_i c_i x_i x_i^T: O(N d r), never forming U U^T.
        P = np.asarray(X, float) @ self._U(theta)
        return (np.sum(P * P, axis=1),
                lambda c: (X.T @ ((2.0 * np.asarray(c, float))[:, None] * P)).ravel())

    def horizontal_projection(self, theta, v):
        U, V = self._U(theta), self._U(v)
        M, A = U.T @ U, U.T @ V
        omega = solve_sylvester_psd(M, M, A - A.T)
        return (V - U @ omega).ravel()

    def symmetry(self):
        return OrthogonalGroup(self.r, right=blocks_of(self.spec, "U"))

    def init_at_scale(self, alpha):
        """U0 = alpha I_{d x r} (Gunasekar et al. 2017 start from U0 = alpha I), so
        Q0 = alpha^2 diag(1, ..., 1, 0, ..., 0) with min(d, r) ones."""
        return float(alpha) * np.eye(self.d, self.r).ravel()

    def mirror_potential(self, theta0):
        """The von Neumann relative entropy R(Q) = 1/4 tr[Q log Q - Q log Q0 - Q + Q0].

        Valid in commuting regimes only (see the module docstring); None when U0 = 0 (then
        nothing moves). R is +inf unless sym(Q) is PSD with range inside range Q0 = U0 U0^T;
        grad and Hessian are those of the restriction to that face, with P an orthonormal basis
        of range Q0, Qc = P^T sym(Q) P = W diag(l) W^T and F = P W:
            grad R(Q) = 1/4 P (log Qc - log(P^T Q0 P)) P^T,
            Hess R(Q)[H] = 1/4 F (Gamma o (F^T sym(H) F)) F^T,
        Gamma_jk = (log l_j - log l_k) / (l_j - l_k), Gamma_jj = 1 / l_j (the Daleckii-Krein
        formula for the derivative of the matrix logarithm; Bhatia 1997, Matrix Analysis,
        Theorem V.3.3). On matrices Q = E diag(lambda) E^T that commute with Q0 this is
        R = 1/4 sum_j [lambda_j log(lambda_j / lambda0_j) - lambda_j + lambda0_j].
        """
        from paramgeo.mirror import Potential

        U0 = self._U(np.asarray(theta0, float))
        Q0 = U0 @ U0.T
        w0, V0 = np.linalg.eigh(Q0)
        if w0[-1] <= 0:
            return None
        keep = w0 > 1e-12 * w0[-1]
        P, l0 = V0[:, keep], w0[keep]
        d, k = self.d, int(keep.sum())

        def parts(beta):
            S = np.reshape(np.asarray(beta, float), (d, d))
            S = (S + S.T) / 2
            Sc = P.T @ S @ P
            outside = np.linalg.norm(S - P @ Sc @ P.T) > 1e-9 * (1 + np.linalg.norm(S))
            lam, W = np.linalg.eigh(Sc)
            return Sc, lam, W, outside

        def value(beta):
            Sc, lam, _, outside = parts(beta)
            if outside or lam[0] < -1e-12 * (1 + abs(lam[-1])):
                return np.inf
            lam = np.clip(lam, 0.0, None)
            with np.errstate(divide="ignore", invalid="ignore"):
                xlogx = np.where(lam > 0, lam * np.log(np.where(lam > 0, lam, 1.0)), 0.0)
            return float(0.25 * (xlogx.sum() - np.diag(Sc) @ np.log(l0) - np.trace(Sc)
                                 + l0.sum()))

        def grad(beta):
            _, lam, W, _ = parts(beta)
            with np.errstate(divide="ignore", invalid="ignore"):
                L = (W * np.log(np.clip(lam, 0.0, None))) @ W.T - np.diag(np.log(l0))
            return (0.25 * P @ L @ P.T).ravel()

        def hessian(beta):
            _, lam, W, _ = parts(beta)
            F = P @ W
            lj, lk = lam[:, None], lam[None, :]
            close = np.abs(lj - lk) <= 1e-8 * np.maximum(np.abs(lj), np.abs(lk))
            with np.errstate(divide="ignore", invalid="ignore"):
                gamma = np.where(close, 1.0 / np.sqrt(np.abs(lj * lk)),
                                 (np.log(np.abs(lj)) - np.log(np.abs(lk))) / (lj - lk))
            K = np.kron(F, F)  # vec(F X F^T) = K vec(X) (row-major vec)
            T = np.eye(d * d).reshape(d, d, d, d).transpose(0, 1, 3, 2).reshape(d * d, d * d)
            return 0.25 * (K * gamma.ravel()) @ K.T @ (np.eye(d * d) + T) / 2

        uniform = np.allclose(l0, l0[0], rtol=1e-12)
        lam0 = f"alpha^2 = {l0[0]:.6g}" if uniform else "the eigenvalues of Q0"
        formula = ("R(Q) = 1/4 tr[Q log Q - Q log Q0 - Q + Q0], Q0 = U0 U0^T (von Neumann "
                   "relative entropy; valid in commuting regimes). In joint spectral coordinates: "
                   "R(lambda) = 1/4 sum_j [lambda_j log(lambda_j / lambda0_j) - lambda_j + "
                   f"lambda0_j], lambda0_j = {lam0} on range Q0 ({k} of {d}), lambda_j = 0 "
                   "frozen elsewhere")
        return Potential(
            formula=formula, source="closed form",
            reference="Gunasekar et al. (2017) Implicit regularization in matrix factorization, "
            "Theorem 1 (commuting measurements); Tsuda, Raetsch, Warmuth (2005) Matrix "
            "exponentiated gradient updates",
            theta0=np.asarray(theta0, float).copy(), beta0=Q0.ravel(), value=value, grad=grad,
            hessian=hessian)

    def symbolic(self):
        import sympy

        U = sympy.Matrix(self.d, self.r, lambda i, k: sympy.Symbol(f"U_{i}_{k}", real=True))
        return list(U), list(U * U.T)
