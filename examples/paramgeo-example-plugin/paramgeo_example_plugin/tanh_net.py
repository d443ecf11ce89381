"""Two-layer tanh network on fixed inputs: phi(W, a) = (a^T tanh(W x_1), ..., a^T tanh(W x_N)).

W in R^{h x d}, a in R^h; the inputs x_1..x_N are drawn once from a seeded generator (size
`data_seed`), so phi: R^{h(d+1)} -> R^N is a fixed smooth map.

* Only `forward` is written; Jacobian, JVP and VJP come from autograd.
* Symmetry: tanh is odd, so flipping hidden unit i, (W_i, a_i) -> (-W_i, -a_i), and swapping
  two hidden units leave phi unchanged: the hyperoctahedral group {+-1}^h x S_h (dimension 0,
  no continuous symmetry). Chen, Lu, Hecht-Nielsen (1993) showed these are all the symmetries of
  a generic tanh network.

Reference: Chen, Lu, Hecht-Nielsen (1993), "On the geometry of feedforward neural network error
surfaces", Neural Computation 5(6).
"""

import functools

import autograd.numpy as anp
import numpy as np

from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.symmetry import SignedPermutationGroup


class TanhNet(Parameterization):
    """Outputs a^T tanh(W x_k) of a two-layer tanh network on N fixed inputs."""

    name = "tanh-net"
    size_params = {
        "d": Size("int", default=2, minimum=1, help="input dimension"),
        "h": Size("int", default=3, minimum=1, help="hidden units"),
        "samples": Size("int", default=8, minimum=1, help="number N of fixed inputs"),
        "data_seed": Size("int", default=0, minimum=0, help="seed of the fixed inputs"),
    }
    capabilities = frozenset({"symmetry"})
    references = ("Chen, Lu, Hecht-Nielsen (1993) On the geometry of feedforward neural "
                  "network error surfaces",)

    def make_spec(self):
        return ParamSpec(W=(self.h, self.d), a=(self.h,))

    def make_predictor_shape(self):
        return (self.samples,)

    @functools.cached_property
    def inputs(self):
        """The fixed inputs, d x N."""
        return np.random.default_rng(self.data_seed).standard_normal((self.d, self.samples))

    def forward(self, theta):
        blocks = self.spec.unpack(theta)
        return anp.dot(blocks["a"], anp.tanh(anp.dot(blocks["W"], self.inputs)))

    def symmetry(self):
        W = np.arange(self.h * self.d).reshape(self.h, self.d)
        a = self.h * self.d + np.arange(self.h)
        gens = []
        for i in range(self.h):  # flip unit i
            signs = np.ones(self.n)
            signs[W[i]] = -1.0
            signs[a[i]] = -1.0
            gens.append((np.arange(self.n), signs))
        for i in range(self.h - 1):  # swap units i and i + 1
            perm = np.arange(self.n)
            perm[W[i]], perm[W[i + 1]] = W[i + 1], W[i]
            perm[a[i]], perm[a[i + 1]] = a[i + 1], a[i]
            gens.append((perm, np.ones(self.n)))
        return SignedPermutationGroup(f"{{+-1}}^{self.h} x S_{self.h}", gens, self.n)
