"""The direct parameterization of a square matrix: phi(theta) = S, theta the d x d entries of S.

The identity map R^{d^2} -> R^{d x d}: "direct S" in the attention-indexed models (a learnable
d x d attention matrix with no factorisation), the linear baseline beside the factored uut (tied
S = W W^T) and uvt (untied S = U V^T) plugins.

* Jacobian: J = I (d^2 x d^2); JVP v -> v, VJP w -> w (closed forms).
* Symmetry: none (the trivial group); generic rank d^2 at every point, so there are no
  critical points of phi and no strata.

References: Xu, Sagitova, Zdeborova (online SGD on attention-indexed models with direct,
tied and untied S); Boncoraglio, Troiani, Erba, Zdeborova (2025), "Bayes optimal learning of
attention-indexed models", NeurIPS (arXiv:2506.01582).
"""

import numpy as np

from paramgeo import Parameterization, ParamSpec, Size


class Matrix(Parameterization):
    """phi(theta) = S in R^{d x d} (the identity map; direct S)."""

    name = "matrix"
    size_params = {"d": Size("int", default=4, minimum=1, help="side of the matrix S")}
    capabilities = frozenset({"jvp", "vjp", "jacobian"})
    references = (
        "Boncoraglio, Troiani, Erba, Zdeborova (2025) Bayes optimal learning of "
        "attention-indexed models",
    )

    def make_spec(self):
        return ParamSpec(S=(self.d, self.d))

    def make_predictor_shape(self):
        return (self.d, self.d)

    def forward(self, theta):
        return theta.reshape((self.d, self.d))

    def random_point(self, rng):
        """Symmetric Gaussian (GOE) entries of variance 1/d: spectrum in [-2, 2]."""
        A = rng.standard_normal((self.d, self.d)) / np.sqrt(2.0 * self.d)
        return (A + A.T).ravel()

    def jvp(self, theta, v):
        return v.copy()  # the caller may write into J v (v: a float vector, as the guard passes it)

    def vjp(self, theta, w):
        return np.asarray(w, float).ravel().copy()

    def jacobian(self, theta):
        return np.eye(self.n)
