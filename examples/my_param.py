"""A parameterization in a Python file: `paramgeo --plugin examples/my_param.py check mine`.

phi(w) = w * w (elementwise); forward only, so paramgeo derives J, JVP and VJP with autograd.
"""

import paramgeo


class Mine(paramgeo.Parameterization):
    """beta = w * w (elementwise), w in R^p."""

    name = "mine"
    size_params = {"p": paramgeo.Size("int", default=3, minimum=1)}

    def make_spec(self):
        return paramgeo.ParamSpec(w=(self.p,))

    def make_predictor_shape(self):
        return (self.p,)

    def forward(self, theta):
        return theta ** 2


paramgeo.register(Mine)
