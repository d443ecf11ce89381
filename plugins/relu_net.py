"""Two-layer ReLU network with biases, evaluated on a fixed input set.

phi(W, b, a) = (f(x_1), ..., f(x_N)) in R^{N x k},  f(x) = sum_j a_j relu(w_j . x + b_j),

with W in R^{h x d} (rows w_j), b in R^h, a in R^{h x k} (rows a_j: k outputs), h = ``width``
hidden neurons and no output bias (a constant output offset would add k parameters and no
geometry). The inputs X in R^{N x d} are i.i.d. N(0, 1) from
``numpy.random.default_rng(x_seed)`` or the user's array (``ReluNet(width=8, X=array)``).

* Piecewise smooth. With z_ij = w_j . x_i + b_j and the activation pattern D_ij = 1[z_ij > 0],
  phi is polynomial on each activation region and not differentiable where some z_ij = 0
  (with a_j != 0). The plugin declares the capability ``kinks``: the distance of theta to
  the kink of neuron j at input i is |z_ij| / (|w_j| |x_i| + |b_j|) (0/0 = 0), invariant under
  the neuron rescalings; see :mod:`paramgeo.geometry.kinks` for what the engines do on a kink. (Where
  a_j = 0 the map happens to be differentiable across z_ij = 0; the flag is conservative.)
* Derivatives off the kinks, H = relu(Z), G a cotangent in R^{N x k}:
  dphi = (D * (X dW^T + 1 db^T)) a + H da;  J^T G = (dZ^T X, 1^T dZ, H^T G), dZ = D * (G a^T).
* Symmetry: positive rescalings (w_j, b_j, a_j) -> (t w_j, t b_j, a_j / t), t > 0 (relu is
  positively homogeneous), a torus (R_{>0})^h with generators (w_j, b_j, -a_j), times the
  permutations S_h of the neurons: dimension h.
* Rank on a region: neuron j contributes {a_j (x) u : u in range(D_j X~)} + {v (x) h_j : v in
  R^k}, X~ = [X, 1], which meet in a_j (x) h_j (its rescaling direction), so
  rank J <= min(N k, sum_j (rank(D_j X~) + k - 1)) with rank(D_j X~) = min(|S_j|, d + 1) for
  inputs in general position (S_j the inputs where neuron j is active). A neuron active on at
  least d + 1 inputs attains the quotient's share d + k; a dead neuron (S_j empty) contributes
  nothing. The generic rank is therefore a property of the activation regions the random
  points visit; the defaults (N = 10 inputs, d = 2) make |S_j| >= 3 likely.

``init_at_scale(alpha)`` is the small initialisation alpha G (G i.i.d. N(0, 1) from the seed
x_seed + 1) of the feature-quantization literature (Maennel, Bousquet, Gelly 2018).

References: Maennel, Bousquet, Gelly (2018), "Gradient descent quantizes ReLU network
features"; Pilanci and Ergen (2020), "Neural networks are convex regularizers: exact
polynomial-time convex optimization formulations for two-layer networks" (activation patterns
as hyperplane-arrangement cells); Cover (1965), "Geometrical and statistical properties of
systems of linear inequalities with applications in pattern recognition"; Neyshabur, Salakhutdinov,
Srebro (2015), "Path-SGD" (the rescaling symmetry).
"""

import autograd.numpy as anp
import numpy as np

from paramgeo import Parameterization, ParamSpec, ShapeError, Size
from paramgeo.contract.parameterization import fixed_array
from paramgeo.symmetry import ScalingTorus, SignedPermutationGroup


class ReluNet(Parameterization):
    """f(x) = sum_j a_j relu(w_j . x + b_j) on N fixed inputs; symmetry (R_{>0})^h x S_h.

    The inputs are the attribute ``X`` (N x d): seeded N(0, 1), or ``ReluNet(X=array, ...)``."""

    name = "relu-net"
    size_params = {
        "d": Size("int", default=2, minimum=1, help="input dimension"),
        "width": Size("int", default=3, minimum=1, help="hidden neurons h"),
        "outputs": Size("int", default=2, minimum=1, help="outputs k (a_j in R^k)"),
        "n_inputs": Size("int", default=10, minimum=1, help="inputs N (predictor is N x k)"),
        "x_seed": Size("int", default=0, minimum=0, primary=False,
                       help="seed of the N(0, 1) inputs X (ignored with X=)"),
    }
    capabilities = frozenset({"jvp", "vjp", "jacobian", "symmetry", "kinks"})
    references = (
        "Maennel, Bousquet, Gelly (2018) Gradient descent quantizes ReLU network features",
        "Pilanci, Ergen (2020) Neural networks are convex regularizers",
        "Cover (1965) Geometrical and statistical properties of systems of linear "
        "inequalities with applications in pattern recognition",
    )

    def __init__(self, X=None, **sizes):
        X = fixed_array("relu-net", "X", X, sizes, ("n_inputs", "d"))
        super().__init__(**sizes)
        if X is None:
            X = np.random.default_rng(self.x_seed).standard_normal((self.n_inputs, self.d))
        self.X = X

    def make_spec(self):
        return ParamSpec(W=(self.width, self.d), b=(self.width,), a=(self.width, self.outputs))

    def make_predictor_shape(self):
        return (self.n_inputs, self.outputs)

    def _blocks(self, theta):
        """(W, b, a) as views of theta (the array methods: autograd's boxes alike)."""
        h, d, k = self.width, self.d, self.outputs
        W = theta[: h * d].reshape(h, d)
        b = theta[h * d: h * (d + 1)]
        a = theta[h * (d + 1):].reshape(h, k)
        return W, b, a

    def forward(self, theta):
        W, b, a = self._blocks(theta)
        return anp.dot(anp.maximum(anp.dot(self.X, W.T) + b, 0.0), a)

    def random_point(self, rng):
        h, d, k = self.width, self.d, self.outputs
        return np.concatenate([rng.standard_normal(h * (d + 1)),
                               rng.standard_normal(h * k) / np.sqrt(h)])

    def init_at_scale(self, alpha):
        """alpha G, G i.i.d. N(0, 1) from the seed x_seed + 1 (small initialisation)."""
        return float(alpha) * np.random.default_rng(self.x_seed + 1).standard_normal(self.n)

    def point(self, W, b, a):
        """theta for W (h x d), b (h,), a (h x k)."""
        return self.spec.pack(W=W, b=b, a=a)

    def activation_patterns(self, tol=1e-9):
        """The distinct activation patterns (1[w . x_i + b > 0])_i of one neuron over all
        (w, b): the cells of the central arrangement of the hyperplanes {u : x~_i . u = 0} in
        R^{d+1}, x~_i = (x_i, 1), i.e. the affine dichotomies of the inputs. Exact enumeration
        for inputs in general position: each cell is a pointed cone adjacent to an extreme ray
        u, the null line of d independent rows S (after reducing to the row space of X~); near
        +-u the signs off S are those at u and every sign choice on S occurs. Their number is
        Cover's C(N, d + 1) = 2 sum_{k=0}^{d} binom(N - 1, k) (Cover 1965) when any d + 1 inputs
        are affinely independent. Raises ShapeError if more than d rows vanish on a ray (inputs
        not in general position). Returns a sorted tuple of 0/1 tuples (all-zero included)."""
        import itertools

        Xt = np.hstack([self.X, np.ones((self.n_inputs, 1))])
        _, s, vt = np.linalg.svd(Xt, full_matrices=False)
        r = int(np.sum(s > tol * s[0]))
        Xr = Xt @ vt[:r].T  # coordinates in the row space: same patterns, an essential arrangement
        norms = np.linalg.norm(Xr, axis=1)
        patterns = set()
        for S in itertools.combinations(range(self.n_inputs), r - 1):
            _, sv, v = np.linalg.svd(Xr[list(S)].reshape(len(S), r))
            if len(S) and sv[-1] <= tol * sv[0]:
                continue  # dependent rows: not a ray
            u = v[-1]
            values = Xr @ u
            free = np.flatnonzero(np.abs(values) <= tol * norms)
            if len(free) > r - 1:
                raise ShapeError("relu-net: the inputs are not in general position (more than "
                                 f"d = {self.d} of the x~_i lie on one ray); the enumeration "
                                 "needs inputs with any d + 1 affinely independent")
            for sign in (1.0, -1.0):
                base = (sign * values > 0).astype(int)
                for choice in itertools.product((0, 1), repeat=len(free)):
                    pat = base.copy()
                    pat[free] = choice
                    patterns.add(tuple(int(x) for x in pat))
        return tuple(sorted(patterns))

    # ------------------------------------------------------------------ derivatives
    def _state(self, theta):
        W, b, a = self._blocks(np.asarray(theta, float))
        Z = self.X @ W.T + b
        return W, b, a, (Z > 0).astype(float), np.maximum(Z, 0.0)

    def jvp(self, theta, v):
        _, _, a, D, H = self._state(theta)
        dW, db, da = self._blocks(np.asarray(v, float))
        return ((D * (self.X @ dW.T + db)) @ a + H @ da).ravel()

    def vjp(self, theta, w):
        _, _, a, D, H = self._state(theta)
        G = np.reshape(np.asarray(w, float), self.predictor_shape)
        dZ = D * (G @ a.T)
        return np.concatenate([(dZ.T @ self.X).ravel(), dZ.sum(axis=0), (H.T @ G).ravel()])

    def jacobian(self, theta):
        _, _, a, D, H = self._state(theta)
        rows = self.m
        JW = np.einsum("jc,ij,il->icjl", a, D, self.X).reshape(rows, -1)
        Jb = np.einsum("jc,ij->icj", a, D).reshape(rows, -1)
        Ja = np.einsum("ij,ce->icje", H, np.eye(self.outputs)).reshape(rows, -1)
        return np.hstack([JW, Jb, Ja])

    def kinks(self, theta):
        """Labels "neuron j at input i" and distances |z_ij| / (|w_j| |x_i| + |b_j|)."""
        W, b, _, _, _ = self._state(theta)
        Z = self.X @ W.T + b
        scale = np.linalg.norm(self.X, axis=1)[:, None] * np.linalg.norm(W, axis=1) + np.abs(b)
        dist = np.divide(np.abs(Z), scale, out=np.zeros_like(Z), where=scale > 0)
        labels = [f"neuron {j} at input {i}" for i in range(self.n_inputs)
                  for j in range(self.width)]
        return labels, dist.ravel()

    # ------------------------------------------------------------------ symmetry
    def neuron_indices(self, j):
        """Indices of theta holding neuron j's (w_j, b_j) and a_j."""
        h, d, k = self.width, self.d, self.outputs
        incoming = list(range(j * d, (j + 1) * d)) + [h * d + j]
        outgoing = list(range(h * (d + 1) + j * k, h * (d + 1) + (j + 1) * k))
        return incoming, outgoing

    def symmetry(self):
        h = self.width
        E = np.zeros((h, self.n), dtype=int)
        swaps = []
        for j in range(h):
            incoming, outgoing = self.neuron_indices(j)
            E[j, incoming], E[j, outgoing] = 1, -1
            if j + 1 < h:  # adjacent transpositions generate S_h
                perm = np.arange(self.n)
                nxt = sum(self.neuron_indices(j + 1), [])
                cur = sum(self.neuron_indices(j), [])
                perm[cur], perm[nxt] = nxt, cur
                swaps.append((perm, np.ones(self.n)))
        torus = ScalingTorus(E, signed=False)
        return torus * SignedPermutationGroup(f"S_{h}", swaps, self.n)
