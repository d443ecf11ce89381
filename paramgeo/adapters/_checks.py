"""What a model from a framework must pass before any engine runs on it.

* forward is a function of theta (:func:`paramgeo.contract.determinism.function_of_theta`): two
  evaluations at the same theta agree bit for bit, also after one at a second theta, and
  forward changes neither the parameters it is given nor the model's state (torch: buffers,
  the module's own parameters, plain attributes of every submodule, :func:`torch_state`;
  JAX: the attributes of the object a bound-method ``fn`` belongs to, :func:`object_state`).
* the precision of its arithmetic is measured (:func:`paramgeo.geometry.precision.arithmetic_noise`),
  not read from the float64 interface: a model that computes in float32 inside gets a rank
  tolerance above its round-off and a warning saying so.

and what a model is built from: a probe, parameters and an output of real numbers
(:func:`real_array`, :func:`probe_array`, :func:`one_array`), refused with one line naming the
model otherwise.
"""

import numbers

import numpy as np

from ..contract.determinism import attribute_state, snapshot
from ..errors import ShapeError


def torch_state(module):
    """{"buffer 'name'" | "parameter 'name'" | "attribute 'sub.key'": snapshot} of a torch
    module: its buffers and parameters by value and the attributes of each submodule that
    :func:`paramgeo.contract.determinism.snapshot` compares (numbers, strings, arrays, tensors)."""
    state = {f"buffer {name!r}": snapshot(b) for name, b in module.named_buffers()}
    state.update({f"parameter {name!r}": snapshot(p) for name, p in module.named_parameters()})
    for prefix, sub in module.named_modules():
        for key, value in vars(sub).items():
            snap = snapshot(value)
            if snap is not None:
                state[f"attribute {(prefix + '.' if prefix else '') + key!r}"] = snap
    return state


def object_state(fn):
    """The attributes of the object a bound method ``fn`` belongs to (:func:`attribute_state`),
    {} for a plain function."""
    owner = getattr(fn, "__self__", None)
    if owner is None or not hasattr(owner, "__dict__"):
        return {}
    return attribute_state(owner)


def _dtype_name(arr):
    return "None" if arr.dtype == object and arr.shape == () and arr.item() is None else \
        f"of dtype {arr.dtype}"


def real_array(value, what, fix):
    """``value`` as a numpy array of real numbers (bool, integer or floating; float16 and
    bfloat16 included), floating ones cast to float64, or one :class:`ShapeError` naming
    ``what`` and ``fix``: None, strings, bytes, dates, complex numbers and objects that are not
    numbers are refused (never parsed)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        if value.is_complex():
            raise ShapeError(f"{what} is a complex tensor ({value.dtype}); {fix}")
        value = value.detach().cpu()
        if value.is_floating_point():  # bfloat16 has no numpy dtype: cast in torch
            value = value.double()
        value = value.numpy()
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # a ragged nested list
        raise ShapeError(f"{what} is not an array ({type(exc).__name__}: {exc}); {fix}") \
            from None
    if arr.dtype.kind in "USMmcO" or arr.dtype.kind == "V" and "float" not in arr.dtype.name:
        if arr.dtype.kind == "O" and arr.size and all(
                isinstance(x, numbers.Real) for x in arr.flat):  # a list of Python numbers
            return real_array(arr.astype(np.float64), what, fix)
        raise ShapeError(f"{what} is {_dtype_name(arr)}, not real numbers; {fix}")
    if arr.dtype.kind in "biu":
        return arr
    return arr.astype(np.float64)


def probe_array(probe, name):
    """The probe batch as a numpy array (:func:`real_array`; integer probes such as token ids
    stay integers) with at least one entry, or one ShapeError naming the model."""
    fix = "give the probe batch as a non-empty array or tensor of real numbers"
    arr = real_array(probe, f"{name}: the probe", fix)
    if arr.size == 0:
        raise ShapeError(f"{name}: the probe is empty (shape {arr.shape}); {fix}")
    return arr


def one_array(out, name, framework):
    """Refuse a model output that is not one array of real numbers (a tuple, list, dict, None,
    strings): one ShapeError naming the model and the fix."""
    if isinstance(out, (tuple, list, dict)) or out is None or not (
            hasattr(out, "shape") or isinstance(out, (int, float, np.number))):
        raise ShapeError(f"{name}: the {framework} model returned {type(out).__name__}, not "
                         "one array; wrap it in a function that returns the array to analyse "
                         "(e.g. its first element)")
    real_array(out, f"{name}: the output on the probe",
               f"return the {framework} array of real numbers to analyse")


def written_by(forward):
    """theta -> what ``forward`` (a flat torch function) writes into the parameter tensor it
    is given (the change of that tensor over the call; zero where it writes nothing). The
    backend hands forward a copy of theta at every call, so an update of the model's weights
    in place (``with torch.no_grad(): self.w.add_(1.0)``) is invisible in its outputs at the
    same theta; the function-of-theta check reads it from here."""
    def change(theta):
        before = theta.clone()
        forward(theta)
        return theta - before
    return change

