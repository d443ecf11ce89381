"""PyTorch models as parameterizations: :func:`from_torch`.

torch is imported when an adapter is built, never by ``import paramgeo``; it is the optional
extra ``paramgeo[torch]``.
"""

from __future__ import annotations

import copy
import sys
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from ..errors import ParamgeoError, ShapeError
from ._attention import math_attention
from ._checks import probe_array, torch_state, written_by
from ._graph import read_torch
from ._layers import GraphModel, LayeredModel, torch_layers
from ._model import Backend, FrameworkModel, model_class

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


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

    single = True

    def normals(self, seed):
        """shape -> i.i.d. N(0, 1) float32 numbers as a host array, from a torch generator
        seeded with ``seed`` (about 3 times faster than numpy's on the CPU)."""
        torch = self.torch
        gen = torch.Generator().manual_seed(int(seed))
        return lambda shape: torch.randn(shape, generator=gen, dtype=torch.float32).numpy()

    def value_vjp(self, fn):
        """(x, single) -> (f(x), g -> Df(x)^T g): one torch.func.vjp, whose forward pass gives
        f(x) and is kept for the backward pass; in float32 where ``single`` (host arrays of
        that precision back)."""
        torch, vjp = self.torch, self.torch.func.vjp

        def put(a, dtype):
            t = torch.from_numpy(np.array(a, dtype=dtype))  # a copy: forward may write to it
            return t if self._cpu else t.to(self.device)

        def call(x, single=False):
            dtype = np.float32 if single else np.float64
            with self.run_context():
                out, pull = vjp(fn, put(x, dtype))

            def back(g):
                with self.run_context():
                    return pull(put(g, dtype))[0].detach().cpu().numpy()

            return out.detach().cpu().numpy(), back

        return call


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


def from_torch(module: Any, probe: ArrayLike, name: Optional[str] = None,
               device: Optional[str] = None,
               layers: Union[str, bool] = "auto") -> FrameworkModel:
    """The parameterization theta -> f(theta; probe) of a PyTorch module.

    phi(theta) = module(probe) with the module's parameters set to theta: theta packs them in
    float64, one block per ``named_parameters()`` entry (``0.weight``, ``0.bias``, ...; tied
    parameters once), in that order. The module is copied, cast to float64 and put in eval
    mode; the caller's module is untouched, and ``theta0`` is its own parameters. Derivatives
    come from torch.func (J v = jvp, J^T w = vjp, J = jacrev/jacfwd, second derivatives as jvp
    of vjp), the pattern of curvlinops' Jacobian operators; ``forward`` is an autograd
    primitive with them, so every engine runs. Devices and float64 rates: docs/own-model.md.

    Args:
        module: a ``torch.nn.Module``.
        probe: the fixed input batch, a tensor or array (floating probes cast to float64).
        name: the registry name; default ``torch-`` and the module's class name.
        device: where the products run ("cpu" by default, "cuda" for a GPU); theta and the
            results stay float64 numpy arrays on the host.
        layers: "auto": for an ``nn.Sequential`` of ``Linear`` layers and elementwise
            activations (or a module with the attribute ``paramgeo_activation``), declare the
            architecture graph and the symmetry group read from it
            (:func:`paramgeo.symmetry.from_architecture`: permutations of twin neurons, sign
            flips of odd activations, rescalings of ReLU neurons, GL(h) of linear layers);
            False declares neither.

    Returns:
        A :class:`FrameworkModel`, a Parameterization with n = the number of parameters and
        predictor shape that of module(probe); ``on_inputs(X)`` evaluates it on other inputs.

    Raises:
        ParamgeoError: torch is not installed, ``module`` is no ``nn.Module``, or the device
            cannot be used.
        ShapeError: the probe does not fit the module, or its output is not one array.

    Examples:
        >>> import torch, paramgeo
        >>> _ = torch.manual_seed(0)
        >>> net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
        >>> p = paramgeo.from_torch(net, torch.randn(5, 2))
        >>> p.n, p.m, p.symmetry()            # tanh: permutations and sign flips of the 3 units
        (13, 5, <ProductGroup S_3 x (Z_2)^3 dim=0>)
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
            # the inputs and buffers in the precision of theta (float64, or float32 for
            # batched_vjp(..., single=True)), cast once
            cast = {torch.float64: (x, buffers)}

            def forward(theta):
                params, start = {}, 0
                for (key, shape), size in zip(shapes, sizes):
                    params[key] = theta[start:start + size].view(shape)
                    start += size
                if theta.dtype not in cast:
                    cast[theta.dtype] = (x.to(theta.dtype) if x.is_floating_point() else x, {
                        k: b.to(theta.dtype) if b.is_floating_point() else b
                        for k, b in buffers.items()})
                xs, bufs = cast[theta.dtype]
                out = call(model, (params, bufs), (xs,))
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
                "forward_on": forward_on, "probe": probe_data,
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
