"""The contract check (:func:`check`): does a plugin's behaviour match what the contract
promises? Each property compares two routes to one quantity at a few random points (the list:
docs/architecture.md, "Contract check"); a failure is one line with the point, the relative
error, the tolerance and a hint."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Callable, Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..contract.parameterization import Parameterization
from ..errors import ParamgeoError, PluginError
from ..geometry.precision import difference_step
from ..io.progress import shows_progress
from ..linalg.numerics import decide_rank
from ..results import Result, title


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckItem(Result):
    """One property checked at one point (``str`` gives its one line).

    Attributes:
        property: the property's name, e.g. "jacobian-fd" (docs/architecture.md lists them).
        passed: whether error <= tolerance.
        error: the relative error ||a - b|| / max(||b||, 1) of the two routes compared.
        tolerance: the tolerance it is held to.
        point: the index of the random point (-1: a property of the whole plugin).
        hint: what to fix when it fails.
        note: shown even when passing (findings such as a larger discovered symmetry).
        at: the first coordinates of the point, e.g. "theta=[0.12, -1.3, ...]".
    """

    property: str
    passed: bool
    error: float
    tolerance: float
    point: int
    hint: str = ""
    note: str = ""
    at: str = ""

    def __str__(self):
        mark = "ok  " if self.passed else "FAIL"
        where = f"point {self.point}" if self.point >= 0 else "plugin"
        if self.at:
            where += f" ({self.at})"
        msg = (f"{mark}  {self.property:<24} {where}: error {self.error:.2e} "
               f"(tol {self.tolerance:.0e})")
        return msg if self.passed else f"{msg}; {self.hint}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckReport(Result):
    """The outcome of :func:`check`.

    Attributes:
        name: the plugin's name.
        sizes: its sizes.
        passed: whether every item passed.
        items: one :class:`CheckItem` per property and point.
    """

    name: str
    sizes: dict
    passed: bool
    items: tuple

    def failures(self) -> list[CheckItem]:
        return [item for item in self.items if not item.passed]

    def __str__(self):
        """One line per property (worst point); failing points are listed in full."""
        lines = [f"{title(self.name, self.sizes)}: {'passed' if self.passed else 'FAILED'}"]
        worst = {}
        for item in self.items:
            if item.property not in worst or item.error > worst[item.property].error:
                worst[item.property] = item
        for prop, item in worst.items():
            if item.passed:
                note = next((i.note for i in self.items if i.property == prop and i.note), "")
                lines.append(f"  ok    {prop:<24} worst error {item.error:.1e} (tol {item.tolerance:.0e})"
                             + (f"; {note}" if note else ""))
        lines += ["  " + str(item) for item in self.failures()]
        return "\n".join(lines)


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        return float("inf")
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1.0))


def _overrides(param, method):
    return getattr(type(param), method) is not getattr(Parameterization, method)


def finite_difference_jacobian(param: Parameterization, theta: ArrayLike,
                               h: float = 1e-6) -> NDArray[np.float64]:
    """Central finite differences (phi(theta + h e_j) - phi(theta - h e_j)) / 2h, m x n."""
    step = h * (1.0 + np.max(np.abs(theta)))
    cols = []
    for j in range(param.n):
        e = np.zeros(param.n)
        e[j] = step
        cols.append(
            (np.asarray(param.forward_flat(theta + e)) - np.asarray(param.forward_flat(theta - e)))
            / (2 * step)
        )
    return np.stack(cols, axis=1)


def _autograd_jacobian(param, theta):
    return Parameterization.jacobian(param, theta)


@shows_progress("check")
def check(param: Parameterization, seed: int = 0, n_points: int = 3, n_group: int = 3,
          tol: float = 1e-6, llc: bool = True,
          progress: bool | str | Callable[[int, int], None] | None = "auto") -> CheckReport:
    """The contract check: does the plugin's behaviour match what its declaration promises?

    Each property (docs/architecture.md, "Contract check") compares two routes to one quantity,
    e.g. J against (phi(theta + h e_j) - phi(theta - h e_j)) / 2h, by the relative error
    ||a - b|| / max(||b||, 1): within ``tol`` for exact identities, max(tol, 1e-5) for finite
    differences (:func:`paramgeo.geometry.precision.difference_step` below float64).

    Args:
        param: the instantiated parameterization.
        seed: seed of the random points and group elements (an int >= 0).
        n_points: how many random points (>= 1).
        n_group: random group elements per point for the invariance check (>= 0).
        tol: the relative tolerance of the exact identities (> 0).
        llc: run the short estimate that tests a declared learning coefficient.
        progress: a callable progress(done, total) called after each point and the whole-map
            checks; True, False, or "auto" (a display with elapsed time and ETA in an
            interactive session; :mod:`paramgeo.io.progress`).

    Returns:
        The :class:`CheckReport`: ``passed`` and one :class:`CheckItem` per property and point
        (``str(report)`` prints one line per property).

    Raises:
        ArgumentError: ``param`` is not a Parameterization, or a bad seed, n_points, n_group
            or tol (a plugin's own faults are failed properties, not raised).

    Examples:
        >>> import paramgeo
        >>> report = paramgeo.check(paramgeo.get("uut", d=2, r=1), llc=False)
        >>> report.passed, report.items[0].property
        (True, 'forward')
    """
    from ..contract.arguments import integer, number, parameterization

    parameterization(param)
    seed = integer(seed, "seed", minimum=0)
    n_points = integer(n_points, "n_points", minimum=1)
    n_group = integer(n_group, "n_group", minimum=0)
    tol = number(tol, "tol", positive=True)
    rng = np.random.default_rng(seed)
    items = []
    where: dict[int, str] = {}  # point index -> preview of its coordinates
    fd_h, fd_tol, fd_note = difference_step(param, tol)

    def add(prop, err, tolerance, point, hint, note=""):
        items.append(CheckItem(property=prop, passed=bool(err <= tolerance), error=float(err),
                               tolerance=tolerance, point=point, hint=hint, note=note,
                               at=where.get(point, "")))

    try:
        group = param.symmetry() if param.provides("symmetry") else None
    except ParamgeoError as exc:
        group = None
        add("symmetry", float("inf"), 0.0, -1, str(exc) if isinstance(exc, PluginError)
            else f"symmetry() raised: {exc}")
    symbolic = None
    if param.provides("symbolic"):
        from ..expressions.symbolic import lambdify_parameterization

        try:
            symbolic = lambdify_parameterization(param)
        except PluginError as exc:
            add("symbolic", float("inf"), 0.0, -1, str(exc))
    action = None
    if param.provides("input_action"):
        from ..symmetry.equivariance import declared_action

        try:
            action = declared_action(param)
        except ParamgeoError as exc:
            add("input-action", float("inf"), 0.0, -1, f"input_action() failed: {exc}")

    last = None  # the last random point drawn
    for k in range(n_points):
        try:
            theta = np.asarray(param.random_point(rng), dtype=float)  # shape checked (guard)
            where[k] = _preview(theta)
            last = theta
            if param.provides("kinks"):
                _check_kinks(param, theta, k, add)
            out = np.asarray(param.forward(theta))
            ok_shape = out.shape == param.predictor_shape and bool(np.all(np.isfinite(out)))
            add("forward", 0.0 if ok_shape else float("inf"), 0.0, k,
                f"forward returned shape {out.shape}, expected {param.predictor_shape}, all finite")
            if not ok_shape:
                continue
            if k == 0:
                from ..contract.determinism import function_of_theta, plugin_state

                problem = function_of_theta(param.forward_flat, theta, 0.5 * np.roll(theta, 1),
                                            state=lambda: plugin_state(param),
                                            labels=param.spec.labels)
                add("function-of-theta", 0.0 if problem is None else float("inf"), 0.0, k,
                    f"forward is not a function of theta: {problem}")
            J = param.jacobian(theta)  # its shape is checked by the guarded call layer
            if param.provides("jacobian"):
                add("jacobian-autograd", _rel(J, _autograd_jacobian(param, theta)), tol, k,
                    "the closed-form jacobian() disagrees with autograd's derivative of forward()")
            add("jacobian-fd", _rel(J, finite_difference_jacobian(param, theta, fd_h)), fd_tol,
                k, "jacobian() disagrees with central finite differences of forward()",
                note=fd_note)
            v = rng.standard_normal(param.n)
            w = rng.standard_normal(param.m)
            if param.provides("sparse_jacobian"):
                add("sparse-jacobian", _rel(param.sparse_jacobian(theta).toarray(), J), tol, k,
                    "sparse_jacobian(theta) disagrees with jacobian(theta)")
            add("jvp", _rel(param.jvp(theta, v), J @ v), tol, k, "jvp(theta, v) != J(theta) v")
            add("vjp", _rel(param.vjp(theta, w), J.T @ w), tol, k, "vjp(theta, w) != J(theta)^T w")
            if param.provides("quadratic_forms") and len(param.predictor_shape) == 2 \
                    and param.predictor_shape[0] == param.predictor_shape[1]:
                d = param.predictor_shape[0]
                X, c = rng.standard_normal((5, d)), rng.standard_normal(5)
                forms, vjp = param.quadratic_forms(theta, X)
                Q = np.reshape(param.forward_flat(theta), (d, d))
                W = (X.T * c) @ X
                err = max(_rel(forms, np.sum((X @ Q) * X, axis=1)),
                          _rel(vjp(c), param.vjp(theta, W.ravel())))
                add("quadratic-forms", err, tol, k,
                    "quadratic_forms(theta, X) disagrees with x_i^T phi(theta) x_i or with "
                    "vjp(theta, sum_i c_i x_i x_i^T)")
            if param.provides("batched_vjp"):
                thetas = np.stack([theta, -0.5 * theta, theta + v])
                Ws = np.stack([w, 2 * w, -w])
                phis, vjp = param.batched_vjp(thetas)
                err = max(_rel(np.reshape(phis, (3, -1)),
                               np.stack([param.forward_flat(t) for t in thetas])),
                          _rel(vjp(Ws), np.stack([param.vjp(t, u) for t, u in zip(thetas, Ws)])))
                add("batched-vjp", err, tol, k,
                    "batched_vjp(thetas) disagrees with forward(theta) or vjp(theta, w) at a "
                    "row of thetas")
            if _overrides(param, "hessian_vp") or _overrides(param, "jacobian_derivative"):
                h = max(1e-5, fd_h) * (1.0 + np.max(np.abs(theta)))
                fd = (param.vjp(theta + h * v, w) - param.vjp(theta - h * v, w)) / (2 * h)
                add("hessian-vp", _rel(param.hessian_vp(theta, w, v), fd), fd_tol, k,
                    "hessian_vp(theta, w, v) disagrees with central differences of vjp along v")
                add("jacobian-derivative", _rel(param.jacobian_derivative(theta, v).T @ w, fd),
                    fd_tol, k,
                    "jacobian_derivative(theta, v) disagrees with central differences of J along v")
            try:  # the group is the plugin's object: its faults are failures too
                if group is not None:
                    base = np.asarray(param.forward_flat(theta))
                    worst = 0.0
                    for _ in range(n_group):
                        moved = group.act(group.random_element(rng), theta)
                        worst = max(worst, _rel(param.forward_flat(moved), base))
                    add("invariance", worst, tol, k,
                        f"phi(g . theta) != phi(theta) for a random g in {group.name}: the declared "
                        "symmetry does not leave the map invariant")
                    G = group.generators(theta)
                    if G.ndim != 2 or G.shape[0] != param.n:
                        add("generators-shape", float("inf"), 0.0, k,
                            f"generators returned shape {G.shape}, expected ({param.n}, k)")
                    else:
                        scale = max(np.linalg.norm(J) * np.linalg.norm(G), 1.0)
                        add("generators-in-kernel", float(np.linalg.norm(J @ G) / scale), tol, k,
                            "J(theta) X != 0 for a symmetry generator X: the vertical space is not "
                            "inside ker J")
                        rank = decide_rank(G, warn=False).rank if G.size else 0
                        stabilizer = group.dim - rank
                        add("generators-rank", float(max(-stabilizer, 0)), 0.0, k,
                            f"generators have rank {rank} at a random point, more than the dimension "
                            f"{group.dim} that {group.name} declares",
                            note=(f"{group.name} acts with a stabilizer of dimension {stabilizer} at "
                                  f"random points (orbits of dimension {rank}, not free)"
                                  if stabilizer > 0 else ""))
                        from ..linalg.numerics import range_basis

                        basis = range_basis(G, warn=False)[0]
                        projector = group.vertical_projector(theta)
                        add("vertical-projector", _rel(projector(v), basis @ (basis.T @ v)), tol, k,
                            f"{group.name}.vertical_projector(theta) disagrees with the projection onto "
                            "the span of generators(theta)",
                            note="" if projector.dim == basis.shape[1] else
                            f"orbit dimension {projector.dim} vs generator rank {basis.shape[1]}")
                if param.provides("horizontal_projection"):
                    from ..geometry.jacobian import horizontal_projection

                    closed = horizontal_projection(param, theta, v)
                    generic = horizontal_projection(param, theta, v, generic=True)
                    add("horizontal-projection", _rel(closed, generic), tol, k,
                        "the closed-form horizontal_projection disagrees with v - V V^T v")
            except Exception as exc:  # noqa: BLE001 - any fault of the group
                if isinstance(exc, ParamgeoError) and not isinstance(exc, PluginError):
                    raise
                add("symmetry-group", float("inf"), 0.0, k, _group_fault(group, exc))
            if param.provides("rank_at"):
                _check_rank_at(param, theta, J, k, add)
            if action is not None:
                add("input-action", _rel(action.forward(theta, action.identity),
                                         param.forward(theta)), tol, k,
                    "input_action().forward(theta, identity) != phi(theta): the declared action on "
                    "the inputs is not wired to the same map")
            if symbolic is not None:
                add("symbolic", _rel(symbolic(theta), param.forward_flat(theta)), tol, k,
                    "symbolic() expressions disagree with forward(); check the symbol order")
        except PluginError as exc:  # the plugin's own fault: a failed property
            add(_property_of(exc.method), float("inf"), 0.0, k, str(exc))
            if exc.method == "random_point":
                break
        if callable(progress):
            progress(k + 1, n_points + 1)
    try:
        if param.provides("rank_at") and last is not None:
            for i, (label, point) in enumerate(_rank_deficient_points(param, group, last, rng)):
                where[n_points + i] = f"{label}; {_preview(point)}"
                _check_rank_at(param, point, param.jacobian(point), n_points + i, add)
        if param.provides("architecture"):
            items.append(_check_architecture(param))
        if param.provides("learning_coefficient") and llc:
            items.append(_check_learning_coefficient(param, seed))
        items.append(_check_discovered(param, group, seed))
        items.append(_check_completeness(param, group, seed))
    except PluginError as exc:  # reported once: a method failing at the points already is
        if not any(not i.passed and i.property == _property_of(exc.method) for i in items):
            add(_property_of(exc.method), float("inf"), 0.0, -1, str(exc))
    if callable(progress):
        progress(n_points + 1, n_points + 1)
    return CheckReport(name=param.name, sizes=dict(param.sizes),
                       passed=all(i.passed for i in items), items=tuple(items))


def construction_failure(name: str, sizes: Mapping[str, Any], error: PluginError) -> CheckReport:
    """The CheckReport of a plugin that could not even be built: its ``make_spec``,
    ``make_predictor_shape`` or ``validate_sizes`` failed with the PluginError ``error``."""
    item = CheckItem(property=_property_of(error.method), passed=False, error=float("inf"),
                     tolerance=0.0, point=-1, hint=str(error))
    return CheckReport(name=name, sizes=dict(sizes), passed=False, items=(item,))


def _property_of(method):
    """The check property a failing plugin method is reported under (``random_point`` ->
    ``random-point``)."""
    return method.replace("_", "-")


def _group_fault(group, exc):
    """The hint of a symmetry group whose own methods failed during the check."""
    if isinstance(exc, PluginError):
        return str(exc)
    return (f"the declared group {getattr(group, 'name', '?') or type(group).__name__} failed: "
            f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}; fix its act, "
            "random_element, generators or vertical_projector")


def _check_rank_at(param, theta, J, point, add):
    from ..errors import NumericalDoubtWarning

    with warnings.catch_warnings():  # a doubtful decision is compared, not reported
        warnings.simplefilter("ignore", NumericalDoubtWarning)
        closed = param.rank_at(theta).rank
    dense = decide_rank(J, warn=False).rank
    add("rank-at", float(abs(closed - dense)), 0.0, point,
        f"rank_at(theta) gives rank {closed} but the SVD of the dense Jacobian gives {dense}")


def _lower_rank(theta, blocks, k, rng):
    """theta with every block B (shape (..., r)) replaced by B C, C a random r x r matrix of
    rank k: a point where the factor has rank <= k on those blocks."""
    from ..symmetry import block_index

    out = theta.copy()
    for block in blocks:
        idx = block_index(block)
        r = idx.shape[1]
        C = rng.standard_normal((r, k)) @ rng.standard_normal((k, r))
        out[idx] = theta[idx] @ C
    return out


def _rank_deficient_points(param, group, theta, rng, max_neurons=8):
    """(label, point) on the strata the plugin names (see ``rank-at`` in the module docstring),
    built from the random point theta."""
    from ..symmetry import MatrixGroupAction, ProductGroup

    points = []
    factors = () if group is None else (group.factors if isinstance(group, ProductGroup)
                                        else (group,))
    factors = [f for f in factors if isinstance(f, MatrixGroupAction) and f.r > 0]
    for i, f in enumerate(factors):
        sides = [(name, blocks) for name, blocks in (("right", f.right),
                                                     ("contragredient", f.contragredient))
                 if blocks]
        if len(sides) == 2:
            sides.append(("both", f.right + f.contragredient))
        for k in sorted({0, 1, f.r // 2, f.r - 1} & set(range(f.r))):
            for side, blocks in sides:
                points.append((f"factor {i} ({f.name}) rank {k} on {side}",
                               _lower_rank(theta, blocks, k, rng)))
    if len(factors) > 1:
        low = theta
        for f in factors:
            low = _lower_rank(low, f.right + f.contragredient, f.r // 2, rng)
        points.append(("every factor at rank r/2", low))
    if param.provides("architecture"):
        graph = param.architecture()
        layers = dict(graph.nodes(data="layer"))
        top = max(layers.values(), default=0)
        hidden = [node for node, layer in layers.items() if 0 < layer < top]
        sides = {node: {"in": [graph.edges[a, node]["index"] for a in graph.predecessors(node)],
                        "out": [graph.edges[node, b]["index"] for b in graph.successors(node)]}
                 for node in hidden}
        for s in sides.values():
            s["removed"] = s["in"] + s["out"]
        for node in hidden[:max_neurons]:
            for state, idx in sides[node].items():
                point = theta.copy()
                point[idx] = 0.0
                points.append((f"neuron {node} {state}", point))
        if hidden:
            point = theta.copy()
            for node in hidden:
                state = rng.choice(["active", "in", "out", "removed"])
                if state != "active":
                    point[sides[node][state]] = 0.0
            points.append(("random mixture of neuron states", point))
    return points


def _check_kinks(param, theta, k, add):
    from ..geometry.kinks import kink_report

    try:
        report = kink_report(param, theta)
    except ParamgeoError as exc:
        add("kinks", float("inf"), 0.0, k, str(exc))
        return
    add("kinks", float(report.on_kink), 0.0, k,
        f"random_point lies on {len(report.kinks)} kink(s) ({', '.join(report.kinks[:3])}): "
        "kinks() reports conditions met at generic points, or random_point is degenerate",
        note=f"{report.conditions} nonsmooth conditions; random points off them")


def _check_architecture(param):
    import networkx as nx

    graph = param.architecture()
    problem = ""
    if not isinstance(graph, nx.DiGraph):
        problem = f"architecture() returned {type(graph).__name__}, expected networkx.DiGraph"
    else:
        bad = [
            (u, v) for u, v, idx in graph.edges(data="index")
            if idx is None or not 0 <= int(idx) < param.n
        ]
        if bad:
            problem = f"edges {bad[:3]} lack an `index` attribute addressing theta"
    return CheckItem(property="architecture", passed=not problem,
                     error=0.0 if not problem else float("inf"), tolerance=0.0, point=-1,
                     hint=problem)


#: the largest parameter count at which ``check`` runs the short LLC estimate
LLC_CHECK_MAX_PARAMS = 40


def _check_learning_coefficient(param, seed):
    """The declared learning coefficient at theta* = 0 (or, where the plugin gives none there,
    at a random point) against a short estimate: MALA on the noiseless loss
    (1/2N) |A (phi(theta) - phi(theta*))|^2 with Gaussian measurements A (N = 4m), at
    n beta = 1e4, where E[n beta L] = lambda - (m - 1) / log(n beta) + o(1 / log(n beta))
    (Watanabe 2009, Theorem 6.1: the free energy lambda log t - (m - 1) log log t). Passes when
    |estimate - lambda| <= (m - 1) / log(n beta) + 3 s.e. + 0.15 lambda."""
    from ..llc import LLCWarning, estimate_llc
    from ..losses.predictor import LinearMeasurements

    prop = "learning-coefficient"
    if param.n > LLC_CHECK_MAX_PARAMS:
        return CheckItem(property=prop, passed=True, error=0.0, tolerance=0.0, point=-1, hint="",
                         note=f"skipped: n = {param.n} > {LLC_CHECK_MAX_PARAMS}, too large "
                         "for a short estimate")
    rng = np.random.default_rng(seed)
    theta = np.zeros(param.n)
    try:
        declared = param.learning_coefficient(theta)
        if declared is None:
            theta = np.asarray(param.random_point(rng), float)
            declared = param.learning_coefficient(theta)
    except Exception as exc:  # the plugin's fault: name it
        return CheckItem(property=prop, passed=False, error=float("inf"), tolerance=0.0, point=-1,
                         hint=f"plugin {param.name}: learning_coefficient(theta) raised "
                         f"{type(exc).__name__}: {exc}; fix the plugin's learning_coefficient")
    if declared is None:
        return CheckItem(property=prop, passed=True, error=0.0, tolerance=0.0, point=-1, hint="",
                         note="no declared value at 0 or at a random point; nothing to compare")
    target, A = param.forward_flat(theta), rng.standard_normal((4 * param.m, param.m))
    nbeta = 1e4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        est = estimate_llc(param, LinearMeasurements(A, A @ target), theta, nbeta=nbeta,
                           sampler="mala", chains=2, draws=400, burn=200, seed=seed,
                           temperatures=(1.0,), bias_check=False)
    mult = declared.multiplicity or 1
    allowed = (mult - 1) / math.log(nbeta) + 3 * est.se + 0.15 * declared.lam
    error = abs(est.llc - declared.lam)
    return CheckItem(
        property=prop, passed=bool(error <= allowed), error=float(error / max(declared.lam, 1e-12)),
        tolerance=float(allowed / max(declared.lam, 1e-12)), point=-1,
        hint=f"plugin {param.name}: learning_coefficient declares lambda = {declared.exact} "
        f"({declared.case}) but a short estimate gives {est.llc:.3g} +- {est.se:.2g}; check the "
        "formula of the plugin's learning_coefficient",
        note=f"declared lambda = {declared.exact}, estimate {est.llc:.3g} +- {est.se:.2g}")


def _preview(theta, k=3):
    head = ", ".join(f"{x:.3g}" for x in theta[:k])
    return f"theta=[{head}{', ...' if len(theta) > k else ''}]"


def _is_linear(group, n, rng, tol=1e-8):
    """Whether g . (a + b) = g . a + g . b and g . (2a) = 2 g . a for random g, a, b."""
    for _ in range(2):
        g = group.random_element(rng)
        a, b = rng.standard_normal(n), rng.standard_normal(n)
        lhs = group.act(g, a + b)
        if _rel(lhs, group.act(g, a) + group.act(g, b)) > tol or _rel(
                group.act(g, 2 * a), 2 * group.act(g, a)) > tol:
            return False
    return True


def _check_completeness(param, group, seed):
    """How many of the kernel dimensions n - rank J the declared group explains at a random
    point (:func:`paramgeo.critical.completeness`): reported, not failed (a symmetry the group
    does not declare makes the quotient too large, not the plugin wrong)."""
    from ..critical.group_completeness import MAX_DENSE_N, completeness

    if param.n > MAX_DENSE_N:
        return CheckItem(property="symmetry-completeness", passed=True, error=0.0, tolerance=0.0,
                         point=-1, hint="", note=f"skipped: n = {param.n} > {MAX_DENSE_N} "
                         "(paramgeo describe compares the dimensions)")
    found = completeness(param, group=group, seed=seed)
    return CheckItem(property="symmetry-completeness", passed=True,
                     error=float(found.kernel_dim - found.explained), tolerance=0.0, point=-1,
                     hint="", note=str(found))


def _check_discovered(param, group, seed):
    """Declared versus discovered continuous symmetry (see the module docstring)."""
    from ..symmetry import MAX_LINEAR_DIM, discover

    if param.n > MAX_LINEAR_DIM:
        prop = "declared-vs-discovered" if group is not None else "discovered-symmetry"
        return CheckItem(property=prop, passed=True, error=0.0, tolerance=0.0, point=-1, hint="",
                         note=f"skipped: n = {param.n} > {MAX_LINEAR_DIM}, too large for the "
                         "linear search")
    found = discover(param, seed=seed, discrete=False, equivariance=False)
    label = f"{found.algebra} (dimension {found.dim})"
    if group is None:
        note = f"no symmetry declared; discovered {label}" if found.dim else ""
        return CheckItem(property="discovered-symmetry", passed=True, error=0.0, tolerance=0.0,
                         point=-1, hint="", note=note)
    try:
        linear = _is_linear(group, param.n, np.random.default_rng(seed))
    except Exception as exc:  # noqa: BLE001 - the declared group's own fault
        if isinstance(exc, ParamgeoError) and not isinstance(exc, PluginError):
            raise
        return CheckItem(property="symmetry-group", passed=False, error=float("inf"), tolerance=0.0,
                         point=-1, hint=_group_fault(group, exc))
    if not linear:
        return CheckItem(
            property="declared-vs-discovered", passed=True, error=0.0, tolerance=0.0, point=-1,
            hint="", note=f"{group.name} acts non-linearly; discovered linear symmetries: {label}")
    gap = float(max(group.dim - found.dim, 0))
    note = ""
    if found.dim > group.dim:
        note = (f"finding: discovered {label} is larger than the declared {group.name} "
                f"(dimension {group.dim})")
    return CheckItem(
        property="declared-vs-discovered", passed=gap == 0, error=gap, tolerance=0.0, point=-1,
        hint=f"the declared {group.name} has dimension {group.dim} but only {label} of linear "
        "symmetries exist (J(theta) A theta = 0 for all theta): the declared group is too large "
        "or its action is wrong", note=note)
