"""The sweep queries of moving in the quotient (``paramgeo quotient align``, ``barrier`` and
``teleport``): each point from a .npy file or drawn from a seeded generator, a planted pair on
request. Registered in :data:`paramgeo.sweeps.queries.QUERIES` when :mod:`paramgeo.sweeps` is
imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..losses.data import FORMER_LOSSES, LOSS_KINDS
from .queries import (REQUIRED, Option, _seed, _short_repr, choice, flag, integer, number, path,
                      register_query)

if TYPE_CHECKING:
    from ..contract.parameterization import Parameterization

#: the quotient commands' --loss: a loss on predictors from the arrays of a .npz file (today's
#: names and the former ones they still accept)
LOSSES = (*LOSS_KINDS, *FORMER_LOSSES)


def _index_list(value):
    """A list of factor indices (integers >= 0), or None for the whole group."""
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be a non-empty list of factor indices, got {_short_repr(value)}")
    return [integer(0)(v) for v in value]


#: the two points of a quotient query: files, or random points (a planted pair on request)
QUOTIENT_PAIR = {
    "first": Option(default=None, convert=path(optional=True), help="a .npy file holding theta1", path=True),
    "second": Option(default=None, convert=path(optional=True), help="a .npy file holding theta2", path=True),
    "seed": _seed("seed of the random points (theta1, then theta2 or the group element)"),
    "planted": Option(default=False, convert=flag, help="theta2 = a random group element . theta1 (no second)")}


def _quotient_pair(param, first, second, seed, planted):
    """(theta1, theta2): each from its file or drawn from one generator seeded ``seed``;
    ``planted`` draws theta2 as g . theta1 for a random element g of the group."""
    import numpy as np

    from ..cli._common import load_point
    from ..errors import ArgumentError

    rng = np.random.default_rng(seed)
    x = param.random_point(rng) if first is None else load_point(param, first, seed)
    if planted:
        if second is not None:
            raise ArgumentError("planted draws theta2 from the group: give second or planted, "
                                "not both")
        group = param.symmetry()
        return x, group.act(group.random_element(rng), x)
    return x, param.random_point(rng) if second is None else load_point(param, second, seed)


@register_query("quotient-align", {**QUOTIENT_PAIR,
                                   "factors": Option(default=None, convert=_index_list,
                                                     help="indices of the factors to align over")},
                dense=False)
def quotient_align_query(param: Parameterization, first: Optional[str], second: Optional[str],
                         seed: int, planted: bool, factors: Optional[list[int]]) -> Any:
    """Align theta2 to theta1 modulo the group: orbit or quotient distance, certificate
    (paramgeo quotient align)."""
    from ..quotient import align

    theta1, theta2 = _quotient_pair(param, first, second, seed, planted)
    a = align(param, theta1, theta2, factors=factors)
    c = a.certificate
    return {"group": a.group, "distance": a.distance, "naive_distance": a.naive_distance,
            "isometric": a.isometric, "exact": c.exact, "lower_bound": c.lower_bound,
            "gap": c.gap, "method": c.method, "invariance_error": a.invariance_error,
            "skipped": list(a.skipped)}


@register_query("quotient-barrier", {
    **QUOTIENT_PAIR,
    "loss": Option(default="squared", convert=choice(*LOSSES)),
    "data": Option(default=REQUIRED, convert=path(), help="an .npz file with the arrays the loss needs", path=True),
    "path": Option(default="linear", convert=choice("linear", "aligned", "geodesic")),
    "points": Option(default=25, convert=integer(2, 10001), help="equally spaced lambda in [0, 1]")}, dense=False)
def quotient_barrier_query(param: Parameterization, first: Optional[str], second: Optional[str],
                           seed: int, planted: bool, loss: str, data: str, path: str,
                           points: int) -> Any:
    """Loss barrier between two points along the straight, aligned or geodesic path, both
    definitions (paramgeo quotient barrier)."""
    from ..cli._quotient import _loss
    from ..quotient import barrier

    fn = _loss(param, loss, data)  # read before the points, as the call did
    theta1, theta2 = _quotient_pair(param, first, second, seed, planted)
    b = barrier(param, fn, theta1, theta2, path=path, n_points=points)
    return {"path": b.path, "ainsworth": b.ainsworth, "entezari": b.entezari,
            "end_loss_first": b.end_losses[0], "end_loss_second": b.end_losses[1],
            "distance": b.distance}


@register_query("quotient-teleport", {
    "point": Option(default=None, convert=path(optional=True),
                    help="a .npy file holding theta (random from seed where absent)", path=True),
    "seed": _seed("seed of the random point and of the searches' random starts"),
    "loss": Option(default="squared", convert=choice(*LOSSES)),
    "data": Option(default=REQUIRED, convert=path(), help="an .npz file with the arrays the loss needs", path=True),
    "objective": Option(default="grad_norm", convert=choice("grad_norm", "sharpness",
                                                             "hessian_trace")),
    "mode": Option(default="max", convert=choice("max", "min")),
    "radius": Option(default=1.0, convert=number(positive=True),
                     help="bound |a_i| <= radius on the Lie-algebra coordinates"),
    "starts": Option(default=4, convert=integer(1, 100),
                     help="searches: from the identity and from random points of the box")},
    dense=False)
def quotient_teleport_query(param: Parameterization, point: Optional[str], seed: int, loss: str,
                            data: str, objective: str, mode: str, radius: float,
                            starts: int) -> Any:
    """Move theta along its orbit to maximise or minimise the gradient norm, the sharpness or
    the Hessian trace of the loss within the bound (paramgeo quotient teleport)."""
    import numpy as np

    from ..cli._common import load_point
    from ..cli._quotient import _loss
    from ..quotient import teleport

    fn = _loss(param, loss, data)
    theta = (param.random_point(np.random.default_rng(seed)) if point is None
             else load_point(param, point, seed))
    t = teleport(param, fn, theta, objective=objective, mode=mode, radius=radius,
                 starts=starts, seed=seed)
    return {"objective": t.objective, "mode": t.mode, "before": t.before, "after": t.after,
            "loss_before": t.loss_before, "loss_after": t.loss_after, "at_bound": t.at_bound,
            "invariance_error": t.invariance_error}
