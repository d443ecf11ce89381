"""What a model from a framework must pass before any engine runs on it.

* forward is a function of theta (:func:`paramgeo.contract.function_of_theta`): two
  evaluations at the same theta agree bit for bit, also after one at a second theta, and
  forward changes neither the parameters it is given nor the model's state (torch: buffers,
  the module's own parameters, plain attributes of every submodule, :func:`torch_state`;
  JAX: the attributes of the object a bound-method ``fn`` belongs to, :func:`object_state`).
* the precision of its arithmetic is measured (:func:`paramgeo.precision.arithmetic_noise`),
  not read from the float64 interface: a model that computes in float32 inside gets a rank
  tolerance above its round-off and a warning saying so.
"""

from ..contract import attribute_state, snapshot


def torch_state(module):
    """{"buffer 'name'" | "parameter 'name'" | "attribute 'sub.key'": snapshot} of a torch
    module: its buffers and parameters by value and the attributes of each submodule that
    :func:`paramgeo.contract.snapshot` compares (numbers, strings, arrays, tensors)."""
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
