"""PyTorch models as parameterizations: :func:`from_torch`.

torch is imported when an adapter is built, never by ``import paramgeo``; it is the optional
extra ``paramgeo[torch]``.
"""

import copy
import sys

import numpy as np

from ..errors import ParamgeoError, ShapeError
from ._attention import math_attention
from ._checks import probe_array, torch_state, written_by
from ._graph import read_torch
from ._layers import GraphModel, LayeredModel, torch_layers
from ._model import Backend, FrameworkModel, model_class


def _import_torch():
    try:
        import torch
        import torch.func  # noqa: F401
    except ImportError as exc:
        raise ParamgeoError(
            "paramgeo.from_torch needs PyTorch: pip install 'paramgeo[torch]' (or pip install "
            f"torch); importing it failed: {exc}") from None
    return torch


class TorchBackend(Backend):
    """Products of a flat torch function by torch.func on ``device``; host float64 numpy
    arrays in and out (zero-copy on the CPU)."""

    transforms = "torch.func (jvp, vjp, jacrev)"

    def __init__(self, torch, device):
        self.torch, self.device = torch, device
        self._cpu = torch.device(device).type == "cpu"

    def compile(self, fn):
        return fn  # eager: torch.func has no jit of its own here

    def run_context(self):
        """Attention in torch's math backend (forward-mode derivatives exist there) and
        torch.func's fallback warnings silenced: see :class:`._graph.math_attention`."""
        return math_attention(self.torch)

    def tensor(self, a):
        # always a copy: a forward that updates its weights in place never writes the caller's
        # array (theta, model.theta0)
        t = self.torch.from_numpy(np.array(a, dtype=np.float64))
        return t if self._cpu else t.to(self.device)

    def run(self, fn, *arrays):
        with self.run_context():
            out = fn(*(self.tensor(a) for a in arrays))
        if not self._cpu:
            return out.detach().cpu().numpy()
        out = out.detach().numpy()
        # a model returning its parameters gives its tangent back: not the caller's array
        return out.copy() if any(np.may_share_memory(out, a) for a in arrays) else out

    def jvp_pair(self, fn):
        jvp = self.torch.func.jvp
        return lambda x, dx: jvp(fn, (x,), (dx,))[1]

    def vjp_pair(self, fn):
        vjp = self.torch.func.vjp
        return lambda x, g: vjp(fn, x)[1](g)[0]

    def jacobian_map(self, fn, reverse):
        return (self.torch.func.jacrev if reverse else self.torch.func.jacfwd)(fn)

    def batch_map(self, fn, a):
        vmapped = self.torch.func.vmap(fn)
        return lambda z: vmapped(z.reshape(-1, a)).reshape(-1)


class TorchModel(FrameworkModel):
    """A torch ``nn.Module`` on a fixed probe batch (built by :func:`from_torch`)."""

    framework = "torch"


class TorchGraphModel(GraphModel, TorchModel):
    """A torch module of any structure: the symmetry group and the units (neurons, channels,
    heads) are read from its torch.fx graph by the layer rules (see :mod:`._graph`)."""

    capabilities = TorchModel.capabilities | GraphModel.capabilities
    references = TorchModel.references + GraphModel.references

    def _read_graph(self):
        reading, reason = self._graph_reader()
        type(self)._graph_reason = reason
        return reading


class TorchLayeredModel(LayeredModel, TorchModel):
    """A torch ``nn.Sequential`` of ``Linear`` layers and elementwise activations: the
    architecture graph and its symmetry group are declared (see :mod:`._layers`)."""

    capabilities = TorchModel.capabilities | LayeredModel.capabilities
    references = TorchModel.references + LayeredModel.references


def from_torch(module, probe, name=None, device=None, layers="auto"):
    """The parameterization theta -> module(probe) of a PyTorch module.

    theta packs the module's parameters in float64, one block per ``named_parameters()`` entry
    (``0.weight``, ``0.bias``, ...; tied parameters once), in that order; the predictor is the
    module's output on the fixed ``probe`` batch (a tensor or array; floating probes are cast
    to float64), phi(theta) = f(theta; probe) with the shape of that output. The module is
    copied, cast to float64 and put in eval mode (dropout off, batch-norm statistics fixed as
    buffers); the caller's module is untouched. ``theta0`` is its own parameters.

    Derivatives come from torch.func: J v = torch.func.jvp, J^T w = torch.func.vjp, J =
    jacrev/jacfwd, (sum_i w_i Hess phi_i) v = jvp of vjp, d/dt J(theta + t v) = jacrev of
    jvp; ``forward`` is an autograd primitive with these derivatives, so every engine that
    traces it with autograd runs (the pattern of curvlinops' torch Jacobian operators).

    ``device``: where the products run ("cpu" by default, "cuda" for a GPU); theta and the
    results stay float64 numpy arrays on the host, where the eigensolvers run. By NVIDIA's
    published peak rates (quoted, not measured by paramgeo), consumer GPUs run float64 at 1/32
    or 1/64 of their float32 rate (data-centre GPUs at 1/2); rank
    decisions need float64.

    ``layers="auto"``: for an ``nn.Sequential`` of ``Linear`` layers and elementwise
    activations (ReLU, LeakyReLU, Tanh, Identity, Dropout, Sigmoid, GELU, ..., or a module with
    the attribute ``paramgeo_activation`` naming its activation, e.g. "power" with ``degree``)
    the architecture graph (neurons as nodes, weights as edges) and the symmetry group read
    from it (:func:`paramgeo.symmetry.from_architecture`: permutations of twin neurons, sign
    flips of odd activations, rescalings of ReLU neurons, GL(h) of linear layers) are
    declared; ``layers=False`` declares neither. ``name``: the registry name (default
    ``torch-`` and the module's class name).
    """
    torch = _import_torch()
    if not isinstance(module, torch.nn.Module):
        raise ParamgeoError(f"from_torch needs a torch.nn.Module, got {type(module).__name__}; "
                            "for a function of parameters use paramgeo.from_jax or write a "
                            "Parameterization")
    name = name or f"torch-{type(module).__name__.lower()}"
    try:
        device = torch.device(device or "cpu")
        torch.zeros(1, dtype=torch.float64, device=device).cpu()  # data must come back
    except (RuntimeError, AssertionError, TypeError, NotImplementedError) as exc:
        raise ParamgeoError(
            f"{name}: torch cannot use the device {device!r}: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}; give device='cpu' or a device "
            "this torch build has (torch.cuda.is_available())") from None
    template = copy.deepcopy(module)
    probe_data = probe_array(probe, name)
    if layers not in ("auto", False, None):
        raise ParamgeoError(f"from_torch: layers must be 'auto' or False, got {layers!r}")
    layered = torch_layers(template, probe_data.shape) if layers == "auto" else None

    def source():
        model = copy.deepcopy(template).to(device=device, dtype=torch.float64).eval()
        for p in model.parameters():
            p.requires_grad_(False)
        named = list(model.named_parameters())
        if not named:
            raise ShapeError(f"{name}: the torch module has no parameters")
        buffers = dict(model.named_buffers())
        shapes = [(key, tuple(p.shape)) for key, p in named]
        sizes = [int(np.prod(s)) for _, s in shapes]
        call = torch.func.functional_call

        def inputs(data):
            x = torch.as_tensor(np.asarray(data), device=device)
            return x.to(torch.float64) if x.is_floating_point() else x

        def forward_on(data):
            x = inputs(data)

            def forward(theta):
                params, start = {}, 0
                for (key, shape), size in zip(shapes, sizes):
                    params[key] = theta[start:start + size].view(shape)
                    start += size
                out = call(model, (params, buffers), (x,))
                if not isinstance(out, torch.Tensor):
                    raise ShapeError(
                        f"{name}: the module returned {type(out).__name__}, not one tensor; "
                        "wrap it in a module whose forward returns the tensor to analyse")
                return out.reshape(-1)

            return forward

        x = inputs(probe_data)
        forward = forward_on(probe_data)

        def read_graph():
            positions, start = {}, 0
            for (key, shape), size in zip(shapes, sizes):
                positions[key] = np.arange(start, start + size).reshape(shape)
                start += size
            return read_torch(model, x, positions, start)

        try:
            with torch.no_grad(), math_attention(torch):
                out = model(x)
        except Exception as exc:
            raise ShapeError(f"{name}: the torch module failed on the probe of shape "
                             f"{tuple(x.shape)}: {type(exc).__name__}: {exc}; give a probe "
                             "batch the module accepts") from exc
        if not isinstance(out, torch.Tensor):
            raise ShapeError(f"{name}: the module returned {type(out).__name__}, not one "
                             "tensor; wrap it in a module whose forward returns the tensor "
                             "to analyse")
        return {"backend": TorchBackend(torch, device), "blocks": shapes,
                "predictor_shape": tuple(out.shape), "forward": forward,
                "forward_on": forward_on,
                "theta0": [p.detach().cpu().numpy() for _, p in named], "layers": layered,
                "graph": read_graph if layers == "auto" else None,
                "state": lambda: torch_state(model), "written": written_by(forward),
                "what": f"torch module {type(module).__name__}"}

    base = (TorchLayeredModel if layered is not None else
            TorchGraphModel if layers == "auto" else TorchModel)
    caller = sys._getframe(1).f_globals.get("__name__", __name__)
    model = model_class(base, name, source, caller)()
    if layered is not None:
        _verify_declared(model, template)
    return model


def _verify_declared(model, module):
    """A layered module's group is verified before it is declared
    (:func:`paramgeo.symmetry.verify_group`): activations that do not compute what they declare
    (``paramgeo_activation``) are refused."""
    from ..errors import ContractError
    from ..symmetry import verify_group

    result = verify_group(model, model.symmetry())
    if not result.passed:
        declared = sorted({f"{type(m).__name__} ({m.paramgeo_activation})"
                           for m in module.modules()
                           if getattr(m, "paramgeo_activation", None) is not None})
        raise ContractError(
            f"{model.name}: the group its activations imply does not leave the module invariant "
            f"({result}); " + (f"the declared {', '.join(declared)} do not compute what they "
                               "declare: fix paramgeo_activation or remove it" if declared else
                               "from_torch(..., layers=False) analyses it without a group"))
