"""The field-group aligner's two routes to exp(M) z~ and its Jacobian, measured in one run.

``paramgeo.quotient._factors._fields`` solves min_t |x - exp(sum t_k X_k) . z| by
Levenberg-Marquardt with the exact Jacobian of the group exponential: dense (scipy.linalg.expm
and expm_frechet on the (n + 1) x (n + 1) augmented matrix) up to ``MAX_DENSE_FIELDS``
augmented entries a side, sparse above it (expm_multiply on the block matrix
[[M, A~_k], [0, M]]). Rows, each the chosen route against the other one on the same problem
(the moved points must agree):

* a pre-norm transformer block read by ``paramgeo.from_torch`` (width 6, two heads, an MLP of
  8 units; n = 302, its first layer norm's 12 fields): sparse chosen, dense the baseline;
* Linear(3, 5)-LayerNorm-Linear(5, 2) (n = 42): dense chosen, sparse the baseline.

Usage: python benchmarks/run.py fields (torch needed; a few seconds a repeat).
"""

import warnings

import numpy as np

#: the dense route for every size (the baseline of the large row)
ALWAYS_DENSE = 10 ** 6


def _block(d=6, heads=2, hidden=8):
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(d)
            self.att = torch.nn.MultiheadAttention(d, heads, batch_first=True)
            self.ln2 = torch.nn.LayerNorm(d)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.ReLU(),
                                           torch.nn.Linear(hidden, d))

        def forward(self, x):
            y = self.ln(x)
            x = x + self.att(y, y, y, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    torch.manual_seed(0)
    return Block().eval(), torch.randn(5, 4, d)


def _layer_norm_net(width=5):
    import torch

    torch.manual_seed(0)
    return (torch.nn.Sequential(torch.nn.Linear(3, width), torch.nn.LayerNorm(width),
                                torch.nn.Linear(width, 2)), torch.randn(40, 3))


def _problem(net, data, name):
    """(field group, x, z): the model's first field group and two of its random points."""
    import paramgeo
    from paramgeo.symmetry import FieldGroup

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = paramgeo.from_torch(net, data, name=name)
    group = next(f for f in model.symmetry().factors if isinstance(f, FieldGroup))
    rng = np.random.default_rng(0)
    return group, model.random_point(rng), model.random_point(rng)


def _solve(group, x, z, limit):
    """The moved point of the field aligner with MAX_DENSE_FIELDS set to ``limit``."""
    from paramgeo.quotient import _factors

    saved = _factors.MAX_DENSE_FIELDS
    _factors.MAX_DENSE_FIELDS = limit
    try:
        return _factors._fields(group, x, z)[1]
    finally:
        _factors.MAX_DENSE_FIELDS = saved


def bench(row, repeats):
    """Rows for benchmarks/run.py: the field aligner's chosen route against the other one."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("fields: torch is not installed; no rows")
        return
    from paramgeo.quotient._factors import MAX_DENSE_FIELDS

    group, x, z = _problem(*_block(), "bench-fields-block")
    row(f"fields: align a transformer block's layer norm, n = {x.size} (sparse vs dense)",
        lambda: _solve(group, x, z, MAX_DENSE_FIELDS),
        lambda: _solve(group, x, z, ALWAYS_DENSE), repeats, target=2.0)
    group, x, z = _problem(*_layer_norm_net(), "bench-fields-ln")
    row(f"fields: align a layer norm, n = {x.size} (dense vs sparse)",
        lambda: _solve(group, x, z, MAX_DENSE_FIELDS),
        lambda: _solve(group, x, z, 0), repeats, target=1.2)
