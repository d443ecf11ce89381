"""Automatic symmetry discovery: which transformations of theta leave phi unchanged?

Three searches, from the contract alone (J(theta) and forward): (1) the Lie algebra g of linear
continuous symmetries, {A : J(theta) A theta = 0 for all theta} (theta -> exp(tA) theta is a
symmetry iff A theta is tangent to the fibres; Kunin et al. 2021, "Neural mechanics"; Marcotte,
Gribonval, Peyre 2023), linear in A: each random point contributes the rows
C(theta) (x) theta^T / |theta| (C an orthonormal basis of the row space of J) and the null space
of the stacked system is g, named from its structure (centre, derived algebra, Killing form
B(X, Y) = tr(ad X ad Y): tori, so(r), sl(r), gl(r)^c; Helgason, Cartan's criteria); (2) its
diagonal part, the scaling symmetries, n unknowns for any n, snapped to small rationals (an
exponent matrix as in :class:`paramgeo.symmetry.ScalingTorus`); (3) discrete sign flips and
permutations tested at random points from candidates (block swaps and flips, shared axes,
architecture-graph automorphisms). The result is compared with the declared group; the
derivations are in docs/architecture.md ("User definitions, symmetry discovery, exact
analysis").
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import numpy as np

from ..errors import ParamgeoError, SizeError
from ..linalg.numerics import RankPolicy, decide_rank, null_basis, policy_of, range_basis, rational_rref
from ..results import Result, title
from ..io.progress import shows_progress
from .groups import SymmetryGroup

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization

#: Largest parameter dimension n for the linear search (n^2 unknowns; n = 40 takes ~2 s).
MAX_LINEAR_DIM = 40
#: The most entries of the stacked linear system (about n^2 rows of n^2 unknowns, 400 MB): the
#: linear search is refused beyond it whatever ``max_linear_dim`` says (n = 84 at rank n).
MAX_LINEAR_ENTRIES = 50_000_000
#: Relative tolerance of the invariance tests of discrete candidates and finite elements.
INVARIANCE_TOL = 1e-8
#: Tolerances of the structure computations on a discovered algebra (ranks of its bracket
#: tables, the Killing form's signature, the diagonal/symmetric/skew tests). The basis is
#: Frobenius-orthonormal, so structure constants and Killing eigenvalues are O(1) (or exactly
#: 0), while the basis carries the round-off of the null space of the stacked linear system
#: (closure residuals about 1e-15 for the built-in plugins; at worst eps over the singular-value
#: gap of that system). A floor of 1e-8 on bracket ranks (``atol``; the relative part stays the
#: caller's ``rtol``) and of 1e-7 on Killing eigenvalues (``KILLING_POLICY``: |lambda| <=
#: 1e-7 max(1, max|lambda|) counts as zero) sits many orders above that error and far below
#: the nonzero O(1) values, so the decisions do not depend on round-off.
STRUCTURE_ATOL = 1e-8
KILLING_POLICY = RankPolicy(rtol=1e-7, atol=1e-7)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiscoveredSymmetry(Result):
    """What :func:`discover` found (see the module docstring for the method).

    Attributes:
        name: the plugin's name.
        sizes: its sizes.
        param_dim: n.
        dim: the dimension of the Lie algebra of linear symmetries (None if not searched).
        algebra: its recognisable name, e.g. "so(2)", "gl(2)", "torus of rescalings".
        basis: a clean basis (pivot entries 1, small rationals snapped), shape (dim, n, n).
        orbit_dim: the rank of the generators A theta at a random point.
        center_dim: the dimension of the centre.
        derived_dim: the dimension of the derived algebra [g, g].
        killing_signature: (positive, negative, zero) eigenvalue counts of the Killing form.
        closure_residual: the largest relative distance of [A_a, A_b] from the algebra.
        kernel_residual: max |J A theta| / (|J| |A| |theta|) at fresh random points.
        invariance_error: max relative |phi(exp(X) theta) - phi(theta)|, X random in g.
        scaling_dim: the number of scaling symmetries.
        scaling_exponents: their exponent rows E, shape (scaling_dim, n).
        discrete: labels of the discrete candidates that leave phi invariant (None: not
            searched).
        declared: {"name", "dim"} of the declared group, or None.
        finding: the comparison with the declared group.
        points: the random points stacked for the linear search.
        note: why a search was skipped or stopped.
        labels: the label of every entry of theta, e.g. "U[2,1]".
        input_equivariance: the :class:`paramgeo.symmetry.equivariance.InputEquivariance` under the
            plugin's declared action on its inputs (None without ``input_action``).
        interrupted: Ctrl-C during the linear search: it is not reported (``note`` says after
            how many points), the scaling symmetries are, the discrete search did not run.
    """

    name: str
    sizes: dict
    param_dim: int
    dim: Optional[int]
    algebra: str
    basis: np.ndarray
    orbit_dim: Optional[int]
    center_dim: Optional[int]
    derived_dim: Optional[int]
    killing_signature: Optional[tuple]
    closure_residual: float
    kernel_residual: float
    invariance_error: float
    scaling_dim: int
    scaling_exponents: np.ndarray
    discrete: Optional[tuple]
    declared: Optional[dict]
    finding: str
    points: int
    note: str = ""
    labels: tuple = ()
    input_equivariance: Any = None
    interrupted: bool = False

    def group(self) -> LinearSymmetryGroup:
        """The discovered linear symmetries as a :class:`SymmetryGroup` (connected component:
        elements are coefficient vectors c, acting by theta -> expm(sum_a c_a A_a) theta)."""
        if self.dim is None:
            raise ParamgeoError(f"no linear search was run for {self.name}: {self.note}")
        return LinearSymmetryGroup(self.algebra, self.basis)

    def __str__(self):
        lines = [f"{title(self.name, self.sizes)}: n = {self.param_dim}"]
        if self.dim is None:
            lines.append(f"  linear symmetries: not searched ({self.note})")
        else:
            sig = self.killing_signature
            lines.append(f"  linear symmetries: dimension {self.dim}, {self.algebra}")
            lines.append(f"    orbit dimension {self.orbit_dim}; centre {self.center_dim}, "
                         f"derived algebra {self.derived_dim}, Killing signature "
                         f"(+{sig[0]}, -{sig[1]}, 0x{sig[2]}); {self.points} points")
            lines.append(f"    residuals: J A theta {self.kernel_residual:.1e}, brackets "
                         f"{self.closure_residual:.1e}, phi(exp(X) theta) "
                         f"{self.invariance_error:.1e}")
        lines.append(f"  scaling symmetries: dimension {self.scaling_dim}")
        for row in self.scaling_exponents[:6]:
            lines.append(f"    {_exponent_label(row, self._labels())}")
        if len(self.scaling_exponents) > 6:
            lines.append(f"    ... ({len(self.scaling_exponents) - 6} more)")
        found = self.discrete or ()
        shown = ", ".join(found[:8]) or ("not searched" if self.discrete is None
                                         else "none found among the candidates")
        more = f" (+{len(found) - 8} more)" if len(found) > 8 else ""
        lines.append(f"  discrete: {shown}{more}")
        if self.input_equivariance is not None:
            lines.append(f"  {self.input_equivariance}")
        lines.append(f"  {self.finding}")
        return "\n".join(lines)

    def _labels(self):
        return self.labels or [f"theta[{j}]" for j in range(self.param_dim)]


class LinearSymmetryGroup(SymmetryGroup):
    """The connected group generated by a basis A_1..A_k of linear symmetries (a discovered
    Lie algebra): g = c in R^k acts by theta -> expm(sum_a c_a A_a) theta (scipy expm)."""

    def __init__(self, name, basis):
        self.name = name
        self.basis = np.asarray(basis, float)

    @property
    def dim(self):
        return len(self.basis)

    def act(self, g: ArrayLike, theta: ArrayLike) -> NDArray[np.float64]:
        from scipy.linalg import expm

        X = np.tensordot(np.asarray(g, float), self.basis, axes=1)
        return expm(X) @ np.asarray(theta, float)

    def random_element(self, rng: np.random.Generator) -> NDArray[np.float64]:
        return 0.5 * rng.standard_normal(self.dim)

    def generators(self, theta: ArrayLike) -> NDArray[np.float64]:
        theta = np.asarray(theta, float)
        if not self.dim:
            return np.zeros((theta.size, 0))
        return np.stack([A @ theta for A in self.basis], axis=1)


@shows_progress("discover (linear search)")
def discover(param: Parameterization, seed: int = 0, policy: Optional[RankPolicy] = None,
             discrete: bool = True, max_linear_dim: int = MAX_LINEAR_DIM, compare: bool = True,
             equivariance: bool = True,
             progress: Union[bool, str, Callable[[int, int], None], None] = "auto"
             ) -> DiscoveredSymmetry:
    """Discover the symmetries of ``param``: the Lie algebra of linear symmetries (A with
    J(theta) A theta = 0 for all theta), the scaling symmetries (diagonal A) and discrete signed
    permutations from candidates; and, for a plugin declaring ``input_action``, whether phi is
    equivariant under that action on its inputs (:func:`paramgeo.symmetry.equivariance.input_equivariance`;
    e.g. rotary attention logits are invariant under shifting every position); returns a
    :class:`DiscoveredSymmetry`. ``compare=False``
    skips reading the declared group (for a plugin whose ``symmetry()`` is this discovery),
    ``equivariance=False`` the input-action test. ``progress(done, total)`` is called after
    each random point of the linear search, whose cost is a stacked system of about n^2 rows of
    n^2 unknowns, refused with a SizeError above ``MAX_LINEAR_ENTRIES`` entries (True, False,
    or "auto", the default: a display with elapsed time and ETA in an interactive session;
    ``paramgeo.io.progress``); a KeyboardInterrupt there returns what was finished (``interrupted=True``: the scaling
    symmetries; the linear and discrete searches not reported).

    >>> import paramgeo
    >>> paramgeo.symmetry.discover(paramgeo.get("uut", d=4, r=2)).algebra
    'so(2)'
    """
    n = param.n
    if n <= max_linear_dim and n ** 4 > MAX_LINEAR_ENTRIES:  # about n^2 rows of n^2 unknowns
        largest = int(MAX_LINEAR_ENTRIES ** 0.25)
        raise SizeError(
            f"{title(param.name, param.sizes)}: the linear symmetry search at n = {n} stacks a "
            f"system of at least n^4 = {n ** 4:.3g} entries ({8e-9 * n ** 4:.3g} GB), more than "
            f"{MAX_LINEAR_ENTRIES:.3g}; it runs up to about n = {largest} (max_linear_dim / "
            f"--max-dim <= {largest}); without it the scaling and discrete searches run at any n")
    rng = np.random.default_rng(seed)
    policy = policy_of(param, policy)
    labels = param.spec.labels()
    first = param.random_point(rng)
    rank0 = max(1, decide_rank(param.jacobian(first), policy, warn=False).rank)

    scaling = _scaling(param, rng, rank0, policy)
    declared = None
    if compare and param.provides("symmetry"):
        group = param.symmetry()
        declared = {"name": group.name, "dim": int(group.dim)}

    note = ""
    lin = None
    if n > max_linear_dim:
        note = (f"n = {n} > {max_linear_dim} (n^2 unknowns); pass max_linear_dim to search "
                "anyway")
    else:
        lin = _linear(param, rng, rank0, policy, first, progress)
    interrupted = False
    if lin is not None and "interrupted" in lin:
        interrupted = True
        note = f"interrupted after {lin['interrupted']} of {lin['total']} points"
        lin = None
    found = _discrete(param, rng) if discrete and not interrupted else None
    finding = _finding(lin, declared, scaling)
    if lin is None:
        out = DiscoveredSymmetry(name=param.name, sizes=dict(param.sizes), param_dim=n, dim=None,
                                 algebra="not searched", basis=np.zeros((0, n, n)), orbit_dim=None,
                                 center_dim=None, derived_dim=None, killing_signature=None,
                                 closure_residual=0.0, kernel_residual=0.0, invariance_error=0.0,
                                 scaling_dim=len(scaling), scaling_exponents=scaling,
                                 discrete=found, declared=declared, finding=finding, points=0,
                                 note=note, labels=tuple(labels), interrupted=interrupted)
    else:
        out = DiscoveredSymmetry(name=param.name, sizes=dict(param.sizes), param_dim=n,
                                 dim=lin["dim"], algebra=lin["name"], basis=lin["basis"],
                                 orbit_dim=lin["orbit_dim"], center_dim=lin["center"],
                                 derived_dim=lin["derived"], killing_signature=lin["killing"],
                                 closure_residual=lin["closure"],
                                 kernel_residual=lin["kernel_residual"],
                                 invariance_error=lin["invariance"], scaling_dim=len(scaling),
                                 scaling_exponents=scaling, discrete=found, declared=declared,
                                 finding=finding, points=lin["points"], note=note,
                                 labels=tuple(labels))
    if equivariance and not interrupted and param.provides("input_action"):
        from .equivariance import input_equivariance

        out = dataclasses.replace(out, input_equivariance=input_equivariance(param, seed=seed))
    return out


def discovered_group(param: Parameterization) -> SymmetryGroup:
    """The group :func:`discover` finds, as ``param``'s declared symmetry: the connected Lie
    group generated by the linear symmetries A (J(theta) A theta = 0 for all theta), acting by
    theta -> expm(sum_a c_a A_a) theta (:class:`LinearSymmetryGroup`; Kunin et al. 2021,
    Marcotte, Gribonval, Peyre 2023). Computed once per instance (``discover(param,
    discrete=False, compare=False).group()``); the linear search needs n <= ``MAX_LINEAR_DIM``.

    The documented way to declare "the discovered group" from a plugin, subclass or adapter:
    list ``"symmetry"`` in ``capabilities`` and bind this function as the method,

        class MyNet(Parameterization):
            capabilities = frozenset({"symmetry"})
            symmetry = paramgeo.symmetry.discovered_group

    (expression specs say ``symmetry = "discovered"``, which does the same).
    """
    cached = param.__dict__.get("_discovered_group")
    if cached is None:
        if param.n > MAX_LINEAR_DIM:
            raise SizeError(
                f"{param.name}: the discovered symmetry group needs the linear search, which "
                f"runs for n <= {MAX_LINEAR_DIM} (n^2 unknowns); here n = {param.n}: declare "
                "the group (paramgeo.symmetry groups, or from_architecture for a layered "
                "network) or use smaller sizes")
        cached = discover(param, seed=0, discrete=False, compare=False).group()
        param.__dict__["_discovered_group"] = cached
    return cached


# ------------------------------------------------------------------------------- linear search
def _row_space(J, policy):
    """Orthonormal rows spanning the row space of J (range of J^T, rank by the policy)."""
    return range_basis(J.T, policy, warn=False)[0].T


def _null_space(M, policy):
    """Orthonormal rows spanning {x : M x = 0} (rank by the policy)."""
    return null_basis(M, policy, warn=False)[0].T


def _linear(param, rng, rank0, policy, first, progress=None):
    n = param.n
    points = math.ceil(n * n / rank0) + 3
    thetas = [first] + [param.random_point(rng) for _ in range(points - 1)]
    rows = []
    try:
        for theta in thetas:
            C = _row_space(param.jacobian(theta), policy)
            rows.append(np.kron(C, theta[None, :]) / max(np.linalg.norm(theta), 1e-300))
            if progress is not None:
                progress(len(rows), points)
    except KeyboardInterrupt:
        return {"interrupted": len(rows), "total": points}
    M = np.vstack(rows) if rows else np.zeros((0, n * n))
    null = _null_space(M, policy)  # orthonormal rows, (k, n^2)
    k = len(null)
    ortho = null.reshape(k, n, n)
    basis = _clean_basis(null).reshape(k, n, n)
    # verification at fresh points, independent of the stacked ones
    kernel_res, inv_err = 0.0, 0.0
    for _ in range(3):
        theta = param.random_point(rng)
        J = param.jacobian(theta)
        scale = max(np.linalg.norm(J) * np.linalg.norm(theta), 1e-300)
        for A in ortho:
            kernel_res = max(kernel_res, float(np.linalg.norm(J @ (A @ theta)) / scale))
        if k:
            inv_err = max(inv_err, _finite_invariance(param, ortho, theta, rng))
    orbit = 0
    if k:
        theta = param.random_point(rng)
        gens = np.stack([A @ theta for A in ortho], axis=1)
        orbit = decide_rank(gens, policy, warn=False).rank
    struct = _structure(ortho, policy)
    return {"dim": k, "basis": basis, "orbit_dim": orbit, "points": len(thetas),
            "kernel_residual": kernel_res, "invariance": inv_err,
            "name": _name(ortho, struct), **struct}


def _finite_invariance(param, ortho, theta, rng):
    from scipy.linalg import expm

    X = np.tensordot(0.5 * rng.standard_normal(len(ortho)), ortho, axes=1)
    base = np.asarray(param.forward_flat(theta), float)
    moved = np.asarray(param.forward_flat(expm(X) @ theta), float)
    return float(np.linalg.norm(moved - base) / max(np.linalg.norm(base), 1.0))


def _clean_basis(null, max_den=12, tol=1e-9):
    """The reduced row echelon form of the row space of ``null`` (unique, so the basis reads
    the same for every seed), entries within ``tol`` of a fraction with denominator <=
    ``max_den`` snapped to it (so exponents come out as integers): geometry.rational_rref."""
    rows = rational_rref(null, pivot_tol=tol, max_den=max_den, snap_tol=tol)
    return np.array(rows, dtype=float).reshape(len(rows), np.shape(null)[1])


def _structure(basis, policy):
    """Centre and derived dimensions, Killing signature and closure residual of the algebra
    spanned by an orthonormal (Frobenius) basis (k, n, n)."""
    k = len(basis)
    if k == 0:
        return {"center": 0, "derived": 0, "killing": (0, 0, 0), "closure": 0.0}
    B = basis.reshape(k, -1)
    C = np.zeros((k, k, k))
    closure = 0.0
    for a in range(k):
        for b in range(k):
            X = (basis[a] @ basis[b] - basis[b] @ basis[a]).ravel()
            coords = B @ X
            C[a, b] = coords
            closure = max(closure, float(np.linalg.norm(X - coords @ B)))
    # the basis is orthonormal, so brackets are O(1): decide ranks with an absolute floor too
    exact = dataclasses.replace(policy, atol=max(policy.atol, STRUCTURE_ATOL))
    derived = decide_rank(C.reshape(k * k, k), exact, warn=False).rank
    Z = C.transpose(1, 2, 0).reshape(k * k, k)  # x in centre iff sum_a x_a C[a, b, :] = 0
    center = k - decide_rank(Z, exact, warn=False).rank
    ad = C.transpose(0, 2, 1)  # ad[a][e, b] = C[a, b, e]
    K = np.einsum("aij,bji->ab", ad, ad)
    eig = np.linalg.eigvalsh((K + K.T) / 2)
    tol = decide_rank(np.abs(eig), KILLING_POLICY, warn=False).tol
    killing = (int(np.sum(eig > tol)), int(np.sum(eig < -tol)), int(np.sum(np.abs(eig) <= tol)))
    return {"center": int(center), "derived": int(derived), "killing": killing,
            "closure": closure}


def _name(basis, s, tol=STRUCTURE_ATOL):
    """A recognisable name for the algebra (see the module docstring); a structural
    description when nothing matches."""
    k = len(basis)
    if k == 0:
        return "trivial"
    scale = max(float(np.max(np.abs(basis))), 1e-300)
    diag = all(np.allclose(A - np.diag(np.diag(A)), 0, atol=tol * scale) for A in basis)
    sym = all(np.allclose(A, A.T, atol=tol * scale) for A in basis)
    skew = all(np.allclose(A, -A.T, atol=tol * scale) for A in basis)
    pos, neg, _ = s["killing"]
    if s["derived"] == 0:
        if diag:
            return f"torus of rescalings (R\\{{0}})^{k}" if k > 1 else "torus of rescalings R\\{0}"
        if sym:
            return "so(1,1)" + (f"^{k}" if k > 1 else "") + " (hyperbolic rotations)"
        if skew:
            return "so(2)" + (f"^{k} (rotations)" if k > 1 else "")
        return f"abelian R^{k}"
    if s["center"] == 0 and s["derived"] == k:
        r = _triangular_root(k)
        if r and skew and neg == k:
            return f"so({r})"
        r = math.isqrt(k + 1)
        if r * r == k + 1 and (pos, neg) == (r * (r + 1) // 2 - 1, r * (r - 1) // 2):
            return f"sl({r})"
    c = s["center"]
    if c and s["derived"] + c == k and k % c == 0:
        r = math.isqrt(k // c)
        if r >= 2 and r * r * c == k and s["derived"] == c * (r * r - 1) and (pos, neg) == (
                c * (r * (r + 1) // 2 - 1), c * r * (r - 1) // 2):
            return f"gl({r})" + (f"^{c}" if c > 1 else "")
    return (f"Lie algebra of dimension {k} (centre {s['center']}, derived {s['derived']}, "
            f"Killing signature +{pos} -{neg})")


def _triangular_root(k):
    r = (1 + math.isqrt(1 + 8 * k)) // 2
    return r if r * (r - 1) // 2 == k else None


# ------------------------------------------------------------------------------- scaling
def _scaling(param, rng, rank0, policy):
    n = param.n
    points = math.ceil(n / rank0) + 3
    rows = []
    for _ in range(points):
        theta = param.random_point(rng)
        C = _row_space(param.jacobian(theta), policy)
        if len(C):
            rows.append(C * theta[None, :] / max(np.linalg.norm(theta), 1e-300))
    M = np.vstack(rows) if rows else np.zeros((0, n))
    null = _null_space(M, policy)
    return _clean_basis(null)


def _exponent_label(row, labels):
    """theta -> c^E theta summarised per block: the entries of one block with one exponent
    as a slice when they fill a box ("4.weight[0:3, 0:36] x c^-1"), else listed."""
    groups = {}
    for j in np.flatnonzero(np.abs(row) > 1e-12):
        e = row[j]
        txt = f"{e:g}" if float(e).is_integer() else f"{e:.4g}"
        name, _, rest = labels[j].partition("[")
        index = tuple(int(t) for t in rest.rstrip("]").split(",") if t.strip()) if rest else ()
        groups.setdefault((name, txt), []).append((index, labels[j]))
    parts = []
    for (name, txt), entries in groups.items():
        power = "c" if txt == "1" else f"c^{txt}"
        parts.append(f"{_box(name, entries)} x {power}")
    return "theta -> c^E theta: " + ", ".join(parts)


def _box(name, entries):
    """``name[a:b, c:d]`` when the indices of ``entries`` fill that box, else the labels."""
    indices = [index for index, _ in entries]
    if not indices or not indices[0]:
        return " ".join(label for _, label in entries)
    axes = list(zip(*indices))
    ranges = [(min(a), max(a)) for a in axes]
    size = int(np.prod([hi - lo + 1 for lo, hi in ranges]))
    if size != len(set(indices)) or len(entries) == 1:
        return " ".join(label for _, label in entries)
    return f"{name}[{', '.join(f'{lo}:{hi + 1}' if hi > lo else str(lo) for lo, hi in ranges)}]"


# ------------------------------------------------------------------------------- discrete
def _candidates(param):
    """(label, perm, signs) signed permutations: (g . theta)_j = signs_j theta_{perm_j}."""
    n = param.n
    spec = param.spec
    ident = np.arange(n)
    blocks = list(spec.blocks.items())

    def idx(name):
        return np.arange(spec.slices[name].start, spec.slices[name].stop).reshape(
            spec.blocks[name])

    out = []
    for (a, sa), (b, sb) in itertools.combinations(blocks, 2):
        if sa == sb:
            perm = ident.copy()
            perm[idx(a).ravel()], perm[idx(b).ravel()] = idx(b).ravel(), idx(a).ravel()
            out.append((f"swap {a} <-> {b}", perm, np.ones(n)))
    for r in (1, 2):
        for combo in itertools.combinations([b for b, _ in blocks], r):
            signs = np.ones(n)
            for name in combo:
                signs[idx(name).ravel()] = -1.0
            out.append(("flip " + ", ".join(f"-{c}" for c in combo), ident, signs))
    # axes sharing a length: hidden units, columns of factors
    axes = {}
    for name, shape in blocks:
        for ax, length in enumerate(shape):
            axes.setdefault(length, []).append((name, ax))
    for length, members in axes.items():
        groups = [(m,) for m in members]
        if len(members) > 1:
            groups += list(itertools.combinations(members, 2))
            if len(members) > 2:
                groups.append(tuple(members))
        for group in groups:
            where = " & ".join(f"{name} axis {ax}" for name, ax in group)
            for i in range(min(length, 8)):
                signs = np.ones(n)
                for name, ax in group:
                    signs[np.take(idx(name), i, axis=ax).ravel()] = -1.0
                out.append((f"flip index {i} of {where}", ident, signs))
            for i, j in itertools.combinations(range(min(length, 6)), 2):
                perm = ident.copy()
                for name, ax in group:
                    ii, jj = np.take(idx(name), i, axis=ax).ravel(), np.take(
                        idx(name), j, axis=ax).ravel()
                    perm[ii], perm[jj] = jj, ii
                out.append((f"swap indices {i} <-> {j} of {where}", perm, np.ones(n)))
    if param.provides("architecture"):
        out += _graph_candidates(param)
    return out


def _graph_candidates(param, limit=50):
    """Automorphisms of the architecture graph fixing input and output nodes, as permutations
    of the edge weights (each edge's ``index`` addresses theta)."""
    import networkx as nx
    from networkx.algorithms.isomorphism import DiGraphMatcher

    graph = param.architecture()
    if not isinstance(graph, nx.DiGraph):
        return []
    g = graph.copy()
    for node in g.nodes:
        fixed = g.in_degree(node) == 0 or g.out_degree(node) == 0
        g.nodes[node]["_key"] = (node if fixed else None, g.nodes[node].get("layer"))
    matcher = DiGraphMatcher(g, g, node_match=lambda a, b: a["_key"] == b["_key"])
    out = []
    for count, mapping in enumerate(itertools.islice(matcher.isomorphisms_iter(), limit + 1)):
        if all(k == v for k, v in mapping.items()):
            continue
        perm = np.arange(param.n)
        for u, v, index in g.edges(data="index"):
            target = g.edges[mapping[u], mapping[v]].get("index")
            if index is not None and target is not None:
                perm[int(target)] = int(index)
        moved = sorted(k for k, v in mapping.items() if k != v)
        out.append((f"graph automorphism moving {', '.join(map(str, moved[:4]))}"
                    + ("..." if len(moved) > 4 else ""), perm, np.ones(param.n)))
    return out


def _discrete(param, rng, n_points=3):
    thetas = [param.random_point(rng) for _ in range(n_points)]
    bases = [np.asarray(param.forward_flat(t), float) for t in thetas]
    found, seen = [], set()
    for label, perm, signs in _candidates(param):
        key = (tuple(perm), tuple(signs))
        if key in seen or (np.all(perm == np.arange(param.n)) and np.all(signs == 1)):
            continue
        seen.add(key)
        ok = True
        for theta, base in zip(thetas, bases):
            moved = np.asarray(param.forward_flat(signs * theta[perm]), float)
            if np.linalg.norm(moved - base) > INVARIANCE_TOL * max(np.linalg.norm(base), 1.0):
                ok = False
                break
        if ok:
            found.append(label)
    return tuple(found)


# ------------------------------------------------------------------------------- comparison
def _finding(lin, declared, scaling):
    if lin is None:
        dim, name = len(scaling), "scaling symmetries only"
    else:
        dim, name = lin["dim"], lin["name"]
    if declared is None:
        if dim:
            return (f"no symmetry declared; discovered {name} of dimension {dim} (declare it to "
                    "get the vertical space and quotient geometry)")
        return "no symmetry declared and no linear symmetry found"
    if dim > declared["dim"]:
        return (f"finding: discovered dimension {dim} ({name}) exceeds the declared "
                f"{declared['name']} (dimension {declared['dim']})")
    if dim < declared["dim"]:
        return (f"discovered dimension {dim} is below the declared {declared['name']} "
                f"(dimension {declared['dim']}): the declared action is not linear, or "
                "(for scaling-only searches) not diagonal")
    return f"agrees with the declared {declared['name']} (dimension {dim})"
