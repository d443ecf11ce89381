"""LoRA: phi(B, A) = W0 + B A, B in R^{m x r}, A in R^{r x n}, W0 in R^{m x n} fixed.

Low-rank adaptation (Hu et al. 2021) fine-tunes a frozen weight W0 by a rank-r update B A.
The update W - W0 = B A is the map of the ``uvt`` plugin with U = B, V = A^T, so the geometry
of LoRA is uvt's translated by W0: the same Jacobian, the same GL(r) fibers, the same
Euclidean and balanced horizontal geometry (inherited from :class:`UVT`); only forward,
the quadratic forms x^T W x and the symbolic expressions see W0.

* Storage: theta packs B (m x r) and A^T (n x r) (block ``A_T``), so that GL(r) acts on the
  last axis of both blocks, as :class:`paramgeo.symmetry.MatrixGroupAction` (and the factor
  strata of ``paramgeo critical``) expect. ``LoRA.point(B, A)`` packs B and A (r x n).
* W0: i.i.d. N(0, 1/n) entries drawn from ``numpy.random.default_rng(w0_seed)`` (the scale of
  a pre-trained layer with unit-variance activations), or the user's matrix
  ``LoRA(r=2, W0=array)`` (m, n then default to its shape).
* Derivatives: J[dB, dA] = dB A + B dA; J^T G = (G A^T, B^T G), i.e. dA^T = G^T B.
* Symmetry: GL(r), (B, A) -> (B g, g^{-1} A), i.e. A^T -> A^T g^{-T}; dimension r^2.
* Generic rank r(m + n - r) (the rank-r manifold, translated by W0; r <= min(m, n)).
* The standard initialisation B = 0 (A of full rank r) is a critical point of phi:
  J(dB, dA) = dB A + 0 dA = dB A, and dB -> dB A is injective when A has full row rank r, so
  rank J = m r < r(m + n - r) whenever r < n (a drop of r(n - r)). The point lies on the
  stratum where every GL(r) channel vanishes on the B side; the orbit keeps dimension r^2
  (the generators (B L, -L A) = (0, -L A) are independent), so the drop is not an orbit
  degeneration. ``init_at_scale(alpha)`` is that initialisation: B = 0, A = alpha G with G
  i.i.d. N(0, 1) (Hu et al. 2021, Section 4.1: "random Gaussian initialization for A and
  zero for B").

References: Hu, Shen, Wallis, Allen-Zhu, Li, Wang, Wang, Chen (2021), "LoRA: Low-rank adaptation
of large language models", ICLR 2022; Mishra, Meyer, Bonnabel, Sepulchre (2014), "Fixed-rank
matrix factorizations and Riemannian low-rank optimization"; Absil, Mahony, Sepulchre (2008),
"Optimization algorithms on matrix manifolds".
"""

import numpy as np

from paramgeo import ParamSpec, Size
from paramgeo.contract.parameterization import fixed_array

from .uvt import UVT


class LoRA(UVT):
    """W = W0 + B A (B m x r, A r x n, W0 fixed); symmetry GL(r); uvt's geometry shifted by W0.

    W0 comes from ``w0_seed`` (N(0, 1/n) entries) or from the keyword ``W0`` (an m x n
    array, Python only): ``LoRA(r=2, W0=W)``."""

    name = "lora"
    size_params = {
        "m": Size("int", default=4, minimum=1, help="rows of W (output dimension)"),
        "n": Size("int", default=3, minimum=1, help="columns of W (input dimension)"),
        "r": Size("int", default=2, minimum=1, help="adapter rank r <= min(m, n)"),
        "w0_seed": Size("int", default=0, minimum=0, primary=False,
                        help="seed of the frozen W0 (N(0, 1/n) entries; ignored with W0=)"),
    }
    references = (
        "Hu et al. (2021) LoRA: Low-rank adaptation of large language models",
        "Mishra, Meyer, Bonnabel, Sepulchre (2014) Fixed-rank matrix factorizations and "
        "Riemannian low-rank optimization",
        "Absil, Mahony, Sepulchre (2008) Optimization algorithms on matrix manifolds",
    )

    def __init__(self, W0=None, **sizes):
        W0 = fixed_array("lora", "W0", W0, sizes, ("m", "n"))
        super().__init__(**sizes)
        if W0 is None:
            rng = np.random.default_rng(self.w0_seed)
            W0 = rng.standard_normal((self.rows, self.cols)) / np.sqrt(self.cols)
        self.W0 = W0

    def make_spec(self):
        return ParamSpec(B=(self.rows, self.r), A_T=(self.cols, self.r))

    def forward(self, theta):
        return super().forward(theta) + self.W0

    def point(self, B, A):
        """theta for the factors B (m x r) and A (r x n) (stored as B and A^T)."""
        return self.spec.pack(B=B, A_T=np.transpose(np.asarray(A, float)))

    def init_at_scale(self, alpha):
        """B = 0, A = alpha G, G i.i.d. N(0, 1) from the seed w0_seed + 1 (Hu et al. 2021)."""
        G = np.random.default_rng(self.w0_seed + 1).standard_normal((self.r, self.cols))
        return self.point(np.zeros((self.rows, self.r)), float(alpha) * G)

    def symbolic(self):
        import sympy

        m, n, r = self.rows, self.cols, self.r
        B = sympy.Matrix(m, r, lambda i, k: sympy.Symbol(f"B_{i}_{k}", real=True))
        At = sympy.Matrix(n, r, lambda j, k: sympy.Symbol(f"A_{k}_{j}", real=True))
        W0 = sympy.Matrix(m, n, lambda i, j: sympy.Float(self.W0[i, j], 17))
        return list(B) + list(At), list(B * At.T + W0)

    def batched_vjp(self, thetas):
        # W0 + B A: uvt's products shifted by the constant W0, the same VJP
        phis, vjp = super().batched_vjp(thetas)
        return phis + self.W0, vjp

    def quadratic_forms(self, theta, X):
        # x^T (W0 + B A) x = x^T W0 x + <B^T x, A x>; W0 is constant, so the VJP is uvt's
        forms, vjp = super().quadratic_forms(theta, X)
        X = np.asarray(X, float)
        return forms + np.sum((X @ self.W0) * X, axis=1), vjp
