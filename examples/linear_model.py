"""The linear model as a parameterization: phi(w) = w in R^d (predictor = the weight vector).

For training a linear classifier or regressor through paramgeo's engines, e.g. the sweep
`examples/sweeps/early_stopping.toml` (logistic GD on a label-flip Gaussian mixture).
"""

import numpy as np

import paramgeo


class Linear(paramgeo.Parameterization):
    """beta = w, w in R^d."""

    name = "linear"
    size_params = {"d": paramgeo.Size("int", default=3, minimum=1, help="dimension")}

    def make_spec(self):
        return paramgeo.ParamSpec(w=(self.d,))

    def make_predictor_shape(self):
        return (self.d,)

    def forward(self, theta):
        return 1.0 * theta

    def init_at_scale(self, alpha):
        """w_0 = 0 (logistic GD starts at the origin), whatever alpha."""
        return np.zeros(self.n)
