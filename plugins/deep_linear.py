"""Deep linear networks: phi(W_1, ..., W_L) = W_L W_{L-1} ... W_1, an n_L x n_0 matrix.

Widths (n_0, n_1, ..., n_L) (size ``widths``, at least two layers), weights
W_l in R^{n_l x n_{l-1}} stored (out, in) and packed W_1 first; the network x -> W_L ... W_1 x
is identified with its end-to-end matrix. With the partial products
A_i = W_L ... W_{i+1} (n_L x n_i, A_L = I) and B_i = W_{i-1} ... W_1 (n_{i-1} x n_0, B_1 = I):

* Jacobian-vector product: dphi[dW] = sum_i A_i dW_i B_i.
* Vector-Jacobian product: J^T G = (A_i^T G B_i^T)_i.
* Jacobian entries: d phi_{pq} / d (W_i)_{ab} = (A_i)_{pa} (B_i)_{bq}.
* Symmetry: one GL(n_i) per hidden layer, acting on both sides of it,
  W_i -> g_i^{-1} W_i, W_{i+1} -> W_{i+1} g_i (:func:`paramgeo.symmetry.hidden_layer_group`),
  the product GL(n_1) x ... x GL(n_{L-1}) of dimension sum_i n_i^2.
* Generic rank r (n_0 + n_L - r), r = min(n_0, ..., n_L): the image is the determinantal
  variety of n_L x n_0 matrices of rank <= r, and the multiplication map is a submersion onto
  its smooth locus at generic points (Trager, Kohn, Bruna 2020, "Pure and spurious critical
  points: a geometric study of linear networks", ICLR 2020, Sec. 4).
* Rank at a point: the image of the differential is sum_i col(A_i) (x) row(B_i) (each term
  {A_i X B_i} is the set of matrices with columns in col(A_i) and rows in row(B_i); Trager,
  Kohn, Bruna 2020, Sec. 4). The column spaces increase with i (col(A_i) contains
  col(A_{i-1}) = col(A_i W_i)) and the row spaces decrease, so in bases adapted to both flags
  the sum is a staircase of basis pairs and

      rank J = sum_{i=1}^{L} a_i b_i - sum_{i=1}^{L-1} a_i b_{i+1},
      a_i = rank A_i, b_i = rank B_i  (a_L = n_L, b_1 = n_0).

  For L = 2 this is n_L n_0 - (n_L - rank W_2)(n_0 - rank W_1), the formula of ``uvt``.
  ``rank_at`` decides the ranks a_i, b_i from the SVDs of the partial products.
* Conservation laws of gradient flow on any loss of phi (balancedness; Arora, Cohen, Hazan
  2018, "On the optimization of deep networks: implicit acceleration by overparameterization",
  Theorem 1; Du, Hu, Lee 2018): W_i W_i^T - W_{i+1}^T W_{i+1} (n_i x n_i) for each hidden
  layer i, the quantities the symmetric part of gl(n_i) conserves.
* Rank strata: the matrix-group channels of GL(n_i) are the hidden neurons of layer i; where
  W_i loses rank, channels of GL(n_i) lose their incoming side (``critical`` names "W_i lost
  rank k", the layer's weight matrix).

``init_at_scale(alpha)`` is alpha G with G i.i.d. N(0, 1) from ``numpy.random.default_rng(0)``
(the small random initialisation of Saxe, McClelland, Ganguli 2014 and Arora et al. 2018).

References: Trager, Kohn, Bruna (2020); Arora, Cohen, Hazan (2018); Baldi, Hornik (1989),
"Neural networks and principal component analysis: learning from examples without local
minima"; Saxe, McClelland, Ganguli (2014), "Exact solutions to the nonlinear dynamics of
learning in deep linear neural networks".
"""

import dataclasses
import warnings

import autograd.numpy as anp
import numpy as np

from paramgeo import Parameterization, ParamSpec, Size, SizeError
from paramgeo.errors import NumericalDoubtWarning
from paramgeo.linalg import decide_rank
from paramgeo.symmetry import ProductGroup, blocks_of, hidden_layer_group


class DeepLinear(Parameterization):
    """phi = W_L ... W_1 (widths n_0, ..., n_L); symmetry prod_i GL(n_i) over hidden layers."""

    name = "deep-linear"
    size_params = {
        "widths": Size("ints", default=(3, 2, 2, 3), minimum=1,
                       help="widths n_0,...,n_L (input, hidden..., output); predictor n_L x n_0"),
    }
    capabilities = frozenset({"jvp", "vjp", "jacobian", "symmetry", "rank_at", "symbolic",
                              "learning_coefficient", "batched_vjp"})
    references = (
        "Trager, Kohn, Bruna (2020) Pure and spurious critical points: a geometric study of "
        "linear networks (ICLR 2020)",
        "Arora, Cohen, Hazan (2018) On the optimization of deep networks: implicit "
        "acceleration by overparameterization",
        "Baldi, Hornik (1989) Neural networks and principal component analysis",
    )

    def validate_sizes(self):
        if len(self.widths) < 3:
            raise SizeError(
                f"{self.name}: widths={','.join(map(str, self.widths))} has "
                f"{len(self.widths) - 1} layer; give at least two layers (three widths, e.g. "
                "widths=3,2,3); one layer is a plain matrix with no hidden symmetry")
        self.L = len(self.widths) - 1

    def make_spec(self):
        w = self.widths
        return ParamSpec({f"W{l}": (w[l], w[l - 1]) for l in range(1, self.L + 1)})

    def make_predictor_shape(self):
        return (self.widths[-1], self.widths[0])

    def forward(self, theta):
        W = self.spec.unpack(theta)
        out = W["W1"]
        for l in range(2, self.L + 1):
            out = anp.dot(W[f"W{l}"], out)
        return out

    def symbolic(self):
        """Symbols W{l}_{j}_{i} in theta order and the entries of W_L ... W_1 (row-major), the
        polynomials the exact route of :mod:`paramgeo.geometry.precision` differentiates."""
        import sympy

        w, symbols, product = self.widths, [], None
        for l in range(1, self.L + 1):
            block = [[sympy.Symbol(f"W{l}_{j}_{i}", real=True) for i in range(w[l - 1])]
                     for j in range(w[l])]
            symbols += [x for row in block for x in row]
            product = sympy.Matrix(block) if product is None else sympy.Matrix(block) * product
        return symbols, [sympy.expand(e) for e in product]

    def random_point(self, rng):
        # entries N(0, 1 / n_{l-1}): the product stays O(1) at any depth
        return np.concatenate([rng.standard_normal(self.widths[l] * self.widths[l - 1])
                               / np.sqrt(self.widths[l - 1]) for l in range(1, self.L + 1)])

    def init_at_scale(self, alpha):
        """alpha G, G i.i.d. N(0, 1) from the seed 0 (small random initialisation)."""
        return float(alpha) * np.random.default_rng(0).standard_normal(self.n)

    def weights(self, theta):
        """[W_1, ..., W_L] as arrays (n_l x n_{l-1})."""
        theta = np.asarray(theta, float)
        return [theta[s].reshape(shape) for s, shape in zip(self.spec.slices.values(),
                                                             self.spec.blocks.values())]

    def _partials(self, theta):
        """(A, B): A[i] = W_L ... W_{i+2}, B[i] = W_i ... W_1 for the 0-based layer i (so layer
        i + 1 in the docstring's numbering), with identities at the ends."""
        Ws = self.weights(theta)
        B = [np.eye(self.widths[0])]
        for W in Ws[:-1]:
            B.append(W @ B[-1])
        A = [np.eye(self.widths[-1])]
        for W in Ws[:0:-1]:
            A.append(A[-1] @ W)
        return A[::-1], B

    # ------------------------------------------------------------------ derivatives
    def jvp(self, theta, v):
        """sum_i A_i dW_i B_i by forward mode alongside the product: (P, dP) <- (W_l P,
        W_l dP + dW_l P) from (W_1, dW_1), three products a layer and no partial products."""
        Ws, dWs = self.weights(theta), self.weights(v)
        P, dP = Ws[0], dWs[0]
        for l in range(1, self.L):
            dP = Ws[l] @ dP + dWs[l] @ P
            if l + 1 < self.L:
                P = Ws[l] @ P
        return dP.flatten()  # a copy also for one layer (dP a view of v)

    def vjp(self, theta, w):
        A, B = self._partials(theta)
        G = np.reshape(np.asarray(w, float), self.predictor_shape)
        return np.concatenate([(a.T @ G @ b.T).ravel() for a, b in zip(A, B)])

    def batched_vjp(self, thetas):
        """Phi[k] = W_L ... W_1 at each row of thetas (K, n) and vjp(G)[k] =
        (A_i^T G_k B_i^T)_i with the partial products of that row, as stacked matrix products."""
        thetas = np.asarray(thetas, float)
        K, w = len(thetas), self.widths
        Ws = [thetas[:, s].reshape(K, *shape) for s, shape in
              zip(self.spec.slices.values(), self.spec.blocks.values())]
        B = [None]  # B[i] = W_i ... W_1 (None: the identity)
        for W in Ws[:-1]:
            B.append(W if B[-1] is None else W @ B[-1])
        A = [None]  # A[j] = W_L ... W_{L-j+1}
        for W in Ws[:0:-1]:
            A.append(W if A[-1] is None else A[-1] @ W)
        A = A[::-1]

        def vjp(G):
            G = np.reshape(G, (K, w[-1], w[0]))
            out = []
            for a, b in zip(A, B):
                g = G if a is None else a.transpose(0, 2, 1) @ G
                out.append((g if b is None else g @ b.transpose(0, 2, 1)).reshape(K, -1))
            return np.concatenate(out, axis=1)

        return Ws[0] if A[0] is None else A[0] @ Ws[0], vjp

    def jacobian(self, theta):
        A, B = self._partials(theta)
        return np.hstack([np.einsum("pa,bq->pqab", a, b).reshape(self.m, -1)
                          for a, b in zip(A, B)])

    def rank_at(self, theta, policy=None):
        """rank J = sum_i a_i b_i - sum_{i<L} a_i b_{i+1} with a_i = rank(W_L ... W_{i+1}),
        b_i = rank(W_{i-1} ... W_1) (see the module docstring; Trager, Kohn, Bruna 2020), each
        rank decided from the singular values of the partial product under ``policy``. The
        returned decision carries the rank of J and the singular values, tolerance and doubt of
        the partial product decided closest to its tolerance."""
        A, B = self._partials(theta)
        decisions, a, b = [], [], []
        for mats, out, what in ((A, a, "W_L...W_(i+1)"), (B, b, "W_(i-1)...W_1")):
            for M in mats:
                d = decide_rank(np.linalg.svd(M, compute_uv=False), policy, warn=False,
                                what=f"the partial product {what} of deep-linear")
                decisions.append(d)
                out.append(d.rank)
        total = sum(ai * bi for ai, bi in zip(a, b)) - sum(ai * bj for ai, bj in zip(a, b[1:]))
        margins = [abs(np.log(d.closest / d.tol)) if d.tol > 0 and d.closest > 0 else np.inf
                   for d in decisions]
        nearest = decisions[int(np.argmin(margins))]
        doubtful = any(d.doubtful for d in decisions)
        if doubtful:
            warnings.warn(
                f"rank of a partial product of deep-linear decided near the tolerance: singular "
                f"value {nearest.closest:.3g} vs tol {nearest.tol:.3g} (rank J = {total}); pass "
                "a RankPolicy to decide otherwise", NumericalDoubtWarning, stacklevel=2)
        return dataclasses.replace(nearest, rank=total, doubtful=doubtful)

    def learning_coefficient(self, theta):
        """Aoyagi (2024), Theorem 1 (:func:`paramgeo.llc.deep_linear_network`) at a true
        parameter where every W_l has the rank r0 of the product W_L ... W_1 (the deepest true
        parameters); widths (n_0, ..., n_L) are Aoyagi's (H_1, ..., H_{L+1}), input first.
        None at other points."""
        from paramgeo.llc import deep_linear_at

        return deep_linear_at(self.weights(theta))

    def generic_rank_formula(self):
        """r (n_0 + n_L - r) with r = min(widths): the dimension of the determinantal variety
        of n_L x n_0 matrices of rank <= r (Trager, Kohn, Bruna 2020)."""
        r = min(self.widths)
        return r * (self.widths[0] + self.widths[-1] - r)

    # ------------------------------------------------------------------ symmetry
    def symmetry(self):
        factors = [hidden_layer_group(self.widths[l], blocks_of(self.spec, f"W{l}", axis=0),
                                      blocks_of(self.spec, f"W{l + 1}"))
                   for l in range(1, self.L)]
        return factors[0] if len(factors) == 1 else ProductGroup(*factors)
