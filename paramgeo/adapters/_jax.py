"""JAX functions as parameterizations: :func:`from_jax`.

jax is imported when an adapter is built, never by ``import paramgeo``; it is the optional
extra ``paramgeo[jax]``. Every JAX call of the adapter runs with 64-bit types switched on for
that call only (JAX's ``enable_x64`` context), so the user's global setting is left as it was.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ..errors import ParamgeoError, ShapeError
from ..symmetry import verify_group
from ._checks import object_state, one_array, probe_array, real_array
from ._layers import LayeredModel, check_layers
from ._model import Backend, FrameworkModel, model_class

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

#: keys of a dense layer's weight and bias in a dict layer, and whether the weight is stored
#: (in, out) (used as x @ W: flax's ``kernel``, the common JAX convention) or (out, in)
WEIGHT_KEYS = ("W", "w", "weight", "kernel")
BIAS_KEYS = ("b", "bias")


def _import_jax():
    try:
        import jax
    except ImportError as exc:
        raise ParamgeoError(
            "paramgeo.from_jax needs JAX: pip install 'paramgeo[jax]' (or pip install jax); "
            f"importing it failed: {exc}") from None
    return jax


def _x64(jax):
    """A context switching JAX's 64-bit types on for its duration."""
    ctx = getattr(jax, "enable_x64", None)
    if ctx is not None and not isinstance(ctx, bool):
        try:
            return ctx(True)
        except TypeError:
            pass
    from jax.experimental import enable_x64

    return enable_x64()


def _aligned(shape):
    """An uninitialised float64 array of ``shape`` whose data starts on a 64-byte boundary:
    XLA's CPU client reads such a host buffer in place, and copies any other (numpy's large
    arrays are usually 16-byte aligned)."""
    size = int(np.prod(shape))
    raw = np.empty(size + 8)
    start = (-raw.ctypes.data % 64) // 8
    return raw[start:start + size].reshape(shape)


class JaxBackend(Backend):
    """Products of a flat JAX function by jax.jvp/vjp/jacrev under jax.jit on ``device``,
    in 64-bit mode; host float64 numpy arrays in and out.

    On the CPU (no ``device`` and JAX's default backend the CPU) XLA's CPU client reads a
    64-byte aligned host array in place: an argument so aligned (the points ``random_point``
    makes) is passed as it is, any other, the point included, is staged through an aligned
    host buffer, one per thread, position and shape (one copy by numpy, as cheap as JAX's own
    copy of an unaligned array and cheaper than comparing the point with a kept copy). On
    another device the point stays there between calls while it is unchanged (engines call
    many products at one theta: Lanczos, conjugate gradients), after one comparison with a
    kept host copy; the other arguments are put there each call. Results come back without a
    copy where XLA's buffer is on the host, and are copied only where one would alias an
    argument (a product that returns it), so that a returned array is never overwritten by a
    later call."""

    transforms = "jax (jvp, vjp, jacrev under jit)"

    def __init__(self, jax, device):
        self.jax, self.device = jax, device
        self._point = (None, None)  # (host copy, device array) of the last first argument
        self._buffers = threading.local()
        #: stage every argument through aligned host buffers (JAX's CPU client, by default)
        self._host = device is None and jax.default_backend() == "cpu"

    def x64(self):
        return _x64(self.jax)

    def compile(self, fn):
        return self.jax.jit(fn)  # runs where its (committed) arguments are

    def run(self, fn, *arrays):
        with self.x64():
            if self._host:
                args = [self._staged(i, a) for i, a in enumerate(arrays)]
            else:
                args = [self._resident(arrays[0])] + [
                    self._staged(i, a) for i, a in enumerate(arrays[1:], 1)]
            out = np.asarray(fn(*args), dtype=np.float64)
        if self._host and any(np.may_share_memory(out, a) for a in args):
            out = out.copy()  # XLA forwarded an argument: the caller gets its own array
        return out

    def _resident(self, x):
        """x on the device: the kept array when x equals the kept host copy (its first entries
        compared before all of it), else a fresh one, kept with its own aligned host copy
        (private, so an array XLA reads in place is never written to)."""
        x = np.asarray(x, dtype=np.float64)
        host, device = self._point
        if (host is not None and host.shape == x.shape and np.array_equal(host[:64], x[:64])
                and np.array_equal(host, x)):
            return device
        host = _aligned(x.shape)
        np.copyto(host, x)
        device = self.jax.device_put(host, self.device)
        self._point = (host, device)
        return device

    def _staged(self, position, a):
        a = np.asarray(a, dtype=np.float64)
        if not self._host:
            return self.jax.device_put(a, self.device)
        if a.flags.c_contiguous and a.ctypes.data % 64 == 0:
            return a  # aligned already (random_point's points): XLA reads it in place
        key = (position, a.shape)
        buffers = self._buffers.__dict__
        buf = buffers.get(key)
        if buf is None:
            buf = buffers[key] = _aligned(a.shape)
        np.copyto(buf, a)
        return buf

    def jvp_pair(self, fn):
        jax = self.jax
        return lambda x, dx: jax.jvp(fn, (x,), (dx,))[1]

    def vjp_pair(self, fn):
        jax = self.jax
        return lambda x, g: jax.vjp(fn, x)[1](g)[0]

    def jacobian_map(self, fn, reverse):
        return (self.jax.jacrev if reverse else self.jax.jacfwd)(fn)

    def batch_map(self, fn, a):
        vmapped = self.jax.vmap(fn)
        return lambda z: vmapped(z.reshape(-1, a)).reshape(-1)


class JaxModel(FrameworkModel):
    """A JAX function fn(params, probe) on a fixed probe (built by :func:`from_jax`)."""

    framework = "jax"

    def random_point(self, rng):
        """The framework models' random point (:meth:`FrameworkModel.random_point`), its data
        on a 64-byte boundary, so that XLA's CPU client reads it in place in every product at
        it (no copy per call)."""
        point = super().random_point(rng)
        out = _aligned(point.shape)
        out[...] = point
        return out


class JaxLayeredModel(LayeredModel, JaxModel):
    """A JAX list of dense layers with declared activations: the architecture graph and its
    symmetry group are declared (see :mod:`._layers`)."""

    capabilities = JaxModel.capabilities | LayeredModel.capabilities
    references = JaxModel.references + LayeredModel.references


def _path_name(path):
    parts = []
    for key in path:
        for attr in ("key", "idx", "name"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
        else:
            parts.append(str(key))
    return ".".join(parts) or "params"


def _dense_layers(params, names, shapes, in_width):
    """The layers of a list of dense layers (see ``activation`` of :func:`from_jax`): each
    a dict with a weight (``W``, ``w``, ``weight`` (out, in) or ``kernel`` (in, out)) and an
    optional bias (``b``, ``bias``), a tuple (W, b) or (W,), or a bare weight array. Returns
    the layers with ``transposed`` None where the storage order is left open."""
    if not isinstance(params, (list, tuple)) or not params:
        raise ShapeError("from_jax(activation=...) needs params as a list of dense layers "
                         "(dicts with W/kernel and b, tuples (W, b), or weight arrays); got "
                         f"{type(params).__name__}")
    by_name = dict(zip(names, shapes))
    layers, width = [], in_width
    for k, layer in enumerate(params):
        if isinstance(layer, dict):
            wkey = next((key for key in WEIGHT_KEYS if key in layer), None)
            bkey = next((key for key in BIAS_KEYS if key in layer), None)
            extra = set(layer) - {wkey, bkey}
            if wkey is None or extra:
                raise ShapeError(f"dense layer {k} has keys {sorted(layer)}; a dense layer "
                                 f"has a weight ({', '.join(WEIGHT_KEYS)}) and optionally a "
                                 f"bias ({', '.join(BIAS_KEYS)})")
            weight, bias = f"{k}.{wkey}", (f"{k}.{bkey}" if bkey else None)
            order = True if wkey == "kernel" else None
        elif isinstance(layer, (list, tuple)) and 1 <= len(layer) <= 2:
            weight, bias, order = f"{k}.0", (f"{k}.1" if len(layer) == 2 else None), None
        else:
            weight, bias, order = f"{k}", None, None
        shape = by_name.get(weight)
        if shape is None or len(shape) != 2:
            raise ShapeError(f"dense layer {k}: the weight must be a 2-d array, got shape "
                             f"{shape}")
        if order is None:
            fits_out_in, fits_in_out = shape[1] == width, shape[0] == width
            order = None if fits_out_in and fits_in_out else fits_in_out
        out = shape[1] if order else shape[0]
        if (shape[0] if order else shape[1]) != width:
            raise ShapeError(f"dense layer {k}: weight of shape {shape} does not take "
                             f"{width} inputs (the previous layer's width)")
        layers.append({"weight": weight, "bias": bias, "in": width, "out": out,
                       "transposed": order})
        width = out
    return layers


#: jaxpr primitives and named calls that are elementwise activations, by the rules' names
JAXPR_ACTIVATIONS = {"tanh": "tanh", "logistic": "sigmoid", "relu": "relu", "relu6": "other",
                     "gelu": "gelu", "silu": "silu", "sigmoid": "sigmoid",
                     "leaky_relu": "leaky_relu", "softplus": "softplus", "elu": "elu"}


def _read_jaxpr(jax, fn, treedef, leaves, names, probe):
    """(layers, activations) of a dense network read from the jaxpr of fn(params, probe),
    whatever the pytree (nested dicts as flax, haiku and equinox store them): a chain of
    x @ W (+ b) products (``dot_general`` contracting x's last axis with W's first, a kernel
    (in, out), or with its second, a weight (out, in)), each followed by at most one
    elementwise activation (``max(x, 0)`` and ``jax.nn.relu`` read as relu, ``tanh``,
    ``logistic``, named calls such as ``jax.nn.gelu``). None for anything else: the
    architecture is then not declared."""
    try:
        with _x64(jax):
            closed = jax.make_jaxpr(
                lambda *ls: fn(jax.tree_util.tree_unflatten(treedef, list(ls)), probe))(*leaves)
    except Exception:  # noqa: BLE001 - not traceable: no architecture
        return None
    jaxpr = closed.jaxpr
    env = {v: ("param", k) for k, v in enumerate(jaxpr.invars)}
    layers, activations = [], []

    def get(var):
        return env.get(var, ("data",)) if not hasattr(var, "val") else ("literal", var.val)

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        ins = [get(v) for v in eqn.invars]
        out = None
        if name == "dot_general":
            (lc, rc), batch = eqn.params["dimension_numbers"]
            x, w = ins
            wshape = tuple(eqn.invars[1].aval.shape)
            if (w[0] != "param" or len(wshape) != 2 or batch != ((), ()) or len(lc) != 1
                    or lc[0] != len(eqn.invars[0].aval.shape) - 1 or x[0] not in ("data",
                                                                                   "layer")):
                return None
            if x[0] == "layer":
                if x[1] != len(layers) - 1 or len(x[2]) > 1:
                    return None
                activations.append((x[2][0], None) if x[2] else ("identity", None))
            elif layers:
                return None
            transposed = rc[0] == 0
            layers.append({"weight": names[w[1]], "bias": None,
                           "in": wshape[0] if transposed else wshape[1],
                           "out": wshape[1] if transposed else wshape[0],
                           "transposed": transposed})
            out = ("layer", len(layers) - 1, ())
        elif name in ("broadcast_in_dim", "reshape", "convert_element_type") and \
                ins[0][0] == "param":
            out = ins[0]
        elif name == "add" and {i[0] for i in ins} == {"layer", "param"}:
            lay = next(i for i in ins if i[0] == "layer")
            par = next(i for i in ins if i[0] == "param")
            layer = layers[lay[1]]
            if lay[2] or layer["bias"] is not None or np.size(leaves[par[1]]) != layer["out"]:
                return None
            layer["bias"] = names[par[1]]
            out = lay
        elif ins and ins[0][0] == "layer" and name in ("max", "tanh", "logistic",
                                                       "custom_jvp_call", "jit", "pjit"):
            if name == "max":
                if len(ins) != 2 or ins[1] != ("literal", 0.0) and not (
                        ins[1][0] == "literal" and float(ins[1][1]) == 0.0):
                    return None
                act = "relu"
            elif name in ("tanh", "logistic"):
                act = JAXPR_ACTIVATIONS[name]
            else:
                act = JAXPR_ACTIVATIONS.get(_call_name(eqn))
                if act is None:
                    return None
            out = ("layer", ins[0][1], ins[0][2] + (act,))
        elif all(i[0] in ("data", "literal") for i in ins):
            out = ("data",)
        else:
            return None
        for v in eqn.outvars:
            env[v] = out
    final = [get(v) for v in jaxpr.outvars]
    if (len(layers) < 2 or len(final) != 1 or final[0][0] != "layer"
            or final[0][1] != len(layers) - 1 or final[0][2]):
        return None
    used = {layer["weight"] for layer in layers} | {layer["bias"] for layer in layers}
    if set(names) - used:
        return None  # parameters outside the dense chain
    return layers, activations


def _call_name(eqn):
    """The name of an elementwise call (``jit`` of ``jax.nn.gelu``, the ``custom_jvp_call`` of
    ``jax.nn.relu``): its ``name``, else that of the one equation it wraps (``max`` with 0
    read as relu); None when it wraps more."""
    if eqn.params.get("name"):
        return str(eqn.params["name"])
    inner = eqn.params.get("call_jaxpr", eqn.params.get("jaxpr"))
    inner = getattr(inner, "jaxpr", inner)
    eqns = getattr(inner, "eqns", ())
    if len(eqns) != 1:
        return None
    prim = eqns[0].primitive.name
    if prim == "max":
        return "relu"
    return prim if prim in ("tanh", "logistic") else _call_name(eqns[0])


def _activations(activation, count):
    acts = [activation] * count if isinstance(activation, str) or (
        isinstance(activation, tuple) and len(activation) == 2
        and isinstance(activation[0], str) and not isinstance(activation[1], str)) \
        else list(activation)
    from ..symmetry import ACTIVATIONS

    out = []
    for act in acts:
        if isinstance(act, str):
            name, degree = act, None
        elif isinstance(act, (tuple, list)) and len(act) == 2:
            name, degree = str(act[0]), act[1]
            if (isinstance(degree, bool) or not isinstance(degree, (int, float, np.integer))
                    or degree != int(degree) or degree < 1):
                raise ShapeError(f"the power of activation {act!r} must be an integer >= 1 "
                                 f"(t^k), got {degree!r}")
            degree = int(degree)
        else:
            raise ShapeError(f"an activation is a name such as 'tanh' or a pair ('power', k), "
                             f"got {act!r}")
        if name.lower() not in ACTIVATIONS:
            raise ShapeError(f"unknown activation {name!r}; known: "
                             f"{', '.join(sorted(ACTIVATIONS))}")
        out.append((name, degree))
    if len(out) != count:
        raise ShapeError(f"{count + 1} dense layers need {count} activations between them, "
                         f"got {len(out)}")
    return out


def from_jax(fn: Callable[..., Any], params: Any, probe: ArrayLike, name: Optional[str] = None,
             device: Any = None, activation: Any = None) -> FrameworkModel:
    """The parameterization theta -> fn(params(theta), probe) of a JAX function.

    phi(theta) = fn(params, probe) with the leaves of the pytree ``params`` set from theta:
    theta packs the leaves in float64 in ``jax.tree_util`` order, one block per leaf named by
    its path (``0.W``, ``encoder.kernel``); ``theta0`` is ``params`` itself. Derivatives come
    from JAX under ``jax.jit`` (J v = jax.jvp, J^T w = jax.vjp, J = jacrev/jacfwd, second
    derivatives as jvp of vjp), the pattern of neural-tangents' empirical kernels, inside
    ``enable_x64`` (the caller's global setting untouched). Without ``activation`` the
    architecture is read from the jaxpr when fn is a chain of dense layers with elementwise
    activations, its group verified at a random point (docs/own-model.md).

    Args:
        fn: fn(params, probe) -> one array.
        params: any pytree of arrays (dicts, lists, tuples; flax, haiku, equinox layouts).
        probe: the fixed input batch.
        name: the registry name; default ``jax-`` and fn's name.
        device: a ``jax.Device`` on which the products run (default: JAX's default); theta
            and the results stay float64 numpy arrays on the host.
        activation: declares ``params`` a list of dense layers x -> act(x W + b) (a dict with
            ``W``/``w``/``weight`` (out, in) or ``kernel`` (in, out) and optional
            ``b``/``bias``, a pair (W, b), or a bare weight) with this activation between them:
            a name ("tanh", "relu", "identity"), a pair ("power", k) or a list with one per
            hidden layer; the architecture graph and its group are then declared, after a check
            at a random point that the group leaves fn's output unchanged.

    Returns:
        A :class:`FrameworkModel`, a Parameterization with n = the number of parameter entries
        and predictor shape that of fn(params, probe).

    Raises:
        ParamgeoError: JAX is not installed, fn is not callable, or the device cannot be used.
        ShapeError: fn fails on the probe or returns no single array, or ``activation``
            does not describe ``params`` (a wrong activation or storage order is refused).

    Examples:
        >>> import jax.numpy as jnp, numpy as np, paramgeo
        >>> def f(params, x):
        ...     return jnp.tanh(x @ params["W"].T) @ params["v"]
        >>> rng = np.random.default_rng(0)
        >>> params = {"W": rng.standard_normal((3, 2)), "v": rng.standard_normal(3)}
        >>> p = paramgeo.from_jax(f, params, rng.standard_normal((5, 2)))
        >>> p.n, p.m, paramgeo.generic_rank(p)
        (9, 5, 5)
    """
    jax = _import_jax()
    if not callable(fn):
        raise ParamgeoError(f"from_jax needs a function fn(params, probe), got "
                            f"{type(fn).__name__}")
    name = name or f"jax-{getattr(fn, '__name__', 'model').strip('<>').replace('_', '-')}"
    if device is not None and not isinstance(device, jax.Device):
        raise ParamgeoError(f"{name}: device must be a jax.Device such as jax.devices()[0] "
                            f"(available: {', '.join(map(str, jax.devices()))}), got "
                            f"{device!r}")
    with _x64(jax):
        flat, treedef = jax.tree_util.tree_flatten_with_path(params)
    if not flat:
        raise ShapeError(f"{name}: params has no arrays")
    names = [_path_name(path) for path, _ in flat]
    leaves = [real_array(leaf, f"{name}: the parameter {key}", "params holds arrays of real "
                         "numbers only").astype(np.float64) for key, (_, leaf) in zip(names, flat)]
    shapes = [tuple(leaf.shape) for leaf in leaves]
    probe = probe_array(probe, name)
    sizes = [int(np.prod(s)) for s in shapes]
    layered = None
    if activation is not None:
        layers = _dense_layers(params, names, shapes, probe.shape[-1] if probe.ndim else 0)
        layered = (layers, _activations(activation, len(layers) - 1))

    def source():
        import jax.numpy as jnp

        def forward_on(data):
            data = np.asarray(data)
            data = data.astype(np.float64) if np.issubdtype(data.dtype, np.floating) else data

            def forward(theta):
                parts, start = [], 0
                for shape, size in zip(shapes, sizes):
                    parts.append(jnp.reshape(theta[start:start + size], shape))
                    start += size
                out = fn(jax.tree_util.tree_unflatten(treedef, parts), data)
                return jnp.reshape(jnp.asarray(out, dtype=jnp.float64), (-1,))

            return forward

        forward = forward_on(probe)

        try:
            with _x64(jax):
                out = fn(jax.tree_util.tree_unflatten(treedef, leaves), probe)
        except Exception as exc:
            raise ShapeError(f"{name}: the JAX function failed on the probe of shape "
                             f"{probe.shape}: {type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}; give "
                             "fn(params, probe) a probe it accepts") from exc
        one_array(out, name, "JAX")
        return {"backend": JaxBackend(jax, device), "blocks": list(zip(names, shapes)),
                "predictor_shape": tuple(np.shape(out)), "forward": forward,
                "forward_on": forward_on, "probe": probe,
                "theta0": leaves, "layers": layered, "state": lambda: object_state(fn),
                "what": f"JAX function {getattr(fn, '__name__', type(fn).__name__)}"}

    caller = sys._getframe(1).f_globals.get("__name__", __name__)
    if layered is None:
        read = _read_jaxpr(jax, fn, treedef, leaves, names, probe)
        if read is not None:
            try:
                return _layered(name, source, caller, read)
            except ShapeError:
                pass  # the rules do not describe fn: no architecture declared
        return model_class(JaxModel, name, source, caller)()
    return _layered(name, source, caller, layered)


def _layered(name, source, caller, layered):
    """The layered model, its storage order settled: where a square weight leaves (out, in)
    versus (in, out) open, the order whose group leaves fn invariant at a random point."""
    layers, activations = layered
    open_ = [k for k, layer in enumerate(layers) if layer["transposed"] is None]
    tried = []
    for choice in range(2 ** len(open_)):
        trial = [dict(layer) for layer in layers]
        for bit, k in enumerate(open_):
            trial[k]["transposed"] = bool(choice >> bit & 1)

        def trial_source(trial=trial):
            built = source()
            built["layers"] = (trial, activations)
            return built

        model = model_class(JaxLayeredModel, name, trial_source, caller)()
        check_layers(trial, activations, model.spec)
        result = verify_group(model, model.symmetry(), n_points=1)
        if result.passed:
            return model
        tried.append(max(result.action_error, result.generator_error))
    raise ShapeError(
        f"{name}: params read as dense layers with activations "
        f"{[a for a, _ in activations]} do not describe fn: random elements of their symmetry "
        f"group change fn's output (relative change {min(tried):.2g}, by "
        "paramgeo.symmetry.verify_group); check the activation "
        "and that each layer computes act(x W + b) (W stored (in, out), or (out, in) as "
        "x W^T), or leave activation out")

