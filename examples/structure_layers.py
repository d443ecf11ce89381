"""Three layers written against paramgeo's public API, for structure matrices A(x):
`paramgeo --plugin examples/structure_layers.py structure moe -p experts=3 --units w:0,g:0,a:0`.

Each predicts f(x_i) on N fixed inputs x_i ~ N(0, I) (seeded, ``x_seed``) with an activation
sigma (``activation``: tanh, silu, sigmoid, quadratic z^2/2 or linear); forward only, so
paramgeo derives every derivative with autograd.

* ``perceptron``: f(x) = sum_j a_j sigma(w_j . x + b_j); units are the hidden neurons
  (w_j, b_j, a_j). With sigma(0) = 0: A(x) = (sigma'(0) / 2) [[0, 0, x], [0, 0, 1], [x^T, 1, 0]].
* ``moe``: a mixture of experts f(x) = sum_e pi_e(x) a_e sigma(w_e . x), gate
  pi = softmax(G x); units are the experts (w_e, g_e, a_e). At zero pi_e = 1/E and the gate
  enters only at third order: A(x) = (sigma'(0) / 2E) [[0, 0, x], [0, 0, 0], [x^T, 0, 0]].
* ``conv``: a circular 1-D convolution with C channels of filters u_c in R^q on signals of
  length L, z_c = u_c * x, z_{c,t} = sum_s u_{c,s} x_{t+s mod L}; ``readout=dense``:
  f(x) = sum_{c,t} a_{c,t} sigma(z_{c,t}) (units: channels (u_c, a_c));
  ``readout=sum``: f(x) = sum_{c,t} sigma(z_{c,t}) (units: filters u_c). With the quadratic
  activation and the sum readout A(x) = X^T X / 2, X_{t,s} = x_{t+s}: for q = L a symmetric
  circulant matrix, so every A(x) is diagonal in the real Fourier basis (a shared eigenbasis).
"""

import autograd.numpy as anp
import numpy as np

import paramgeo

ACTIVATIONS = {
    "tanh": anp.tanh,
    "silu": lambda z: z / (1.0 + anp.exp(-z)),
    "sigmoid": lambda z: 1.0 / (1.0 + anp.exp(-z)),
    "quadratic": lambda z: 0.5 * z * z,
    "linear": lambda z: z,
}


def _activation():
    return paramgeo.Size("choice", default="tanh", choices=tuple(ACTIVATIONS),
                         help="activation sigma")


def _inputs(self, *shape):
    return np.random.default_rng(self.x_seed).standard_normal(shape)


class Perceptron(paramgeo.Parameterization):
    """f(x_i) = sum_j a_j sigma(w_j . x_i + b_j) on N fixed inputs."""

    name = "perceptron"
    size_params = {
        "d": paramgeo.Size("int", default=3, minimum=1, help="input dimension"),
        "width": paramgeo.Size("int", default=2, minimum=1, help="hidden neurons"),
        "n_inputs": paramgeo.Size("int", default=4, minimum=1, help="inputs N"),
        "activation": _activation(),
        "x_seed": paramgeo.Size("int", default=0, minimum=0, primary=False),
    }

    def validate_sizes(self):
        self.X = _inputs(self, self.n_inputs, self.d)

    def make_spec(self):
        return paramgeo.ParamSpec(w=(self.width, self.d), b=(self.width,), a=(self.width,))

    def make_predictor_shape(self):
        return (self.n_inputs,)

    def forward(self, theta):
        p = self.spec.unpack(theta)
        z = anp.dot(self.X, anp.transpose(p["w"])) + p["b"]
        return anp.dot(ACTIVATIONS[self.activation](z), p["a"])


class MixtureOfExperts(paramgeo.Parameterization):
    """f(x_i) = sum_e softmax(G x_i)_e a_e sigma(w_e . x_i) on N fixed inputs."""

    name = "moe"
    size_params = {
        "d": paramgeo.Size("int", default=3, minimum=1, help="input dimension"),
        "experts": paramgeo.Size("int", default=2, minimum=1, help="experts E"),
        "n_inputs": paramgeo.Size("int", default=4, minimum=1, help="inputs N"),
        "activation": _activation(),
        "x_seed": paramgeo.Size("int", default=0, minimum=0, primary=False),
    }

    def validate_sizes(self):
        self.X = _inputs(self, self.n_inputs, self.d)

    def make_spec(self):
        E, d = self.experts, self.d
        return paramgeo.ParamSpec(w=(E, d), g=(E, d), a=(E,))

    def make_predictor_shape(self):
        return (self.n_inputs,)

    def forward(self, theta):
        p = self.spec.unpack(theta)
        logits = anp.dot(self.X, anp.transpose(p["g"]))
        logits = logits - anp.max(logits, axis=1, keepdims=True)
        gate = anp.exp(logits) / anp.sum(anp.exp(logits), axis=1, keepdims=True)
        experts = ACTIVATIONS[self.activation](anp.dot(self.X, anp.transpose(p["w"]))) * p["a"]
        return anp.sum(gate * experts, axis=1)


class CircularConv(paramgeo.Parameterization):
    """Circular 1-D convolution, C channels of length-q filters, dense or summed readout."""

    name = "conv"
    size_params = {
        "length": paramgeo.Size("int", default=5, minimum=1, help="signal length L"),
        "filter": paramgeo.Size("int", default=3, minimum=1, help="filter length q <= L"),
        "channels": paramgeo.Size("int", default=2, minimum=1, help="channels C"),
        "readout": paramgeo.Size("choice", default="dense", choices=("dense", "sum"),
                                 help="dense: sum a_{c,t} sigma(z_{c,t}); sum: sum sigma(z_{c,t})"),
        "n_inputs": paramgeo.Size("int", default=3, minimum=1, help="inputs N"),
        "activation": _activation(),
        "x_seed": paramgeo.Size("int", default=0, minimum=0, primary=False),
    }

    def validate_sizes(self):
        if self.filter > self.length:
            raise paramgeo.SizeError(f"conv: filter={self.filter} exceeds length="
                                     f"{self.length}; choose filter <= length")
        self.X = _inputs(self, self.n_inputs, self.length)
        shifts = (np.arange(self.length)[:, None] + np.arange(self.filter)[None, :]) % self.length
        self.patches = self.X[:, shifts]  # (N, L, q): patches[i, t, s] = x_i[t + s mod L]

    def make_spec(self):
        blocks = {"u": (self.channels, self.filter)}
        if self.readout == "dense":
            blocks["a"] = (self.channels, self.length)
        return paramgeo.ParamSpec(blocks)

    def make_predictor_shape(self):
        return (self.n_inputs,)

    def forward(self, theta):
        p = self.spec.unpack(theta)
        z = anp.einsum("its,cs->ict", self.patches, p["u"])
        h = ACTIVATIONS[self.activation](z)
        if self.readout == "sum":
            return anp.sum(h, axis=(1, 2))
        return anp.einsum("ict,ct->i", h, p["a"])
